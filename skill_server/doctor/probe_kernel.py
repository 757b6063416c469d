"""The doctor's tiny known kernel: one Triton program adding 1 to 128 floats in place.

Its source name is fixed (:data:`PROBE_NAME`), so the name a profiler reports for it on this
box (``skill_doctor_probe`` on CUDA; ROCm tools may add the HSA symbol suffix ``.kd``) shows
how the verifier's signature patterns will see every Triton and FlyDSL kernel here.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import triton
import triton.language as tl

PROBE_NAME = "skill_doctor_probe"
BLOCK = 128


@triton.jit
def skill_doctor_probe(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x + 1.0, mask=mask)


def probe_launch(x: Any) -> Callable[[], None]:
    """A zero-argument launch of the probe on ``x`` (float32, at most BLOCK elements, on the GPU)."""
    n = min(x.numel(), BLOCK)

    def launch() -> None:
        skill_doctor_probe[(1,)](x, n, BLOCK=BLOCK)

    return launch

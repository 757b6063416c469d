"""The stage-2 segment as one launch: the down-projection GEMM, then the top-k reduce.

``Stage2Launch`` is what every arm's ``build`` returns: a zero-argument callable that
runs the two kernels in order on the current stream and writes ``outputs["out"]``, plus
the evidence a verifier or a test wants without a profiler: the two kernel names, the
producer's and the reducer's scale, and the partial workspace.

On CPU (Triton's interpreter) each kernel call runs inside
``torch.profiler.record_function(<kernel name>)``, so a torch.profiler trace of a CPU
run shows the same names the device trace shows on a GPU. On a GPU nothing wraps the
launches (no host-side annotation in the timed path).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch


@dataclass
class Stage2Launch:
    gemm: Callable[[], None]
    reduce: Callable[[], None]
    gemm_name: str
    reduce_name: str
    partial: "torch.Tensor"
    producer_scale: float | None
    reducer_scale: float | None
    annotate: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def kernel_names(self) -> tuple[str, str]:
        return (self.gemm_name, self.reduce_name)

    def __call__(self) -> None:
        if self.annotate:
            import torch

            with torch.profiler.record_function(self.gemm_name):
                self.gemm()
            with torch.profiler.record_function(self.reduce_name):
                self.reduce()
        else:
            self.gemm()
            self.reduce()

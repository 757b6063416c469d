"""Plain-torch arm: fp32 dequant -> fp32 matmul -> bf16, on any platform (CPU included).

The same arithmetic as the oracle, written into ``c`` in place: a harness
control (its parity must be perfect, and A/A timing against itself measures
noise), and the arm that lets the whole verification path run on a CPU box.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .contract import check_contract
from .oracle import blockscale_reference

if TYPE_CHECKING:  # pragma: no cover
    import torch

Launch = Callable[[], None]


def build(inputs: dict[str, "torch.Tensor"], outputs: dict[str, "torch.Tensor"]) -> Launch:
    check_contract(inputs, outputs)
    a, a_scale, b, b_scale = inputs["a"], inputs["a_scale"], inputs["b"], inputs["b_scale"]
    c = outputs["c"]

    def launch() -> None:
        c.copy_(blockscale_reference(a, a_scale, b, b_scale))

    launch()
    return launch

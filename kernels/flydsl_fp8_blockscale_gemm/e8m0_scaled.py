"""Ablation arm: the card's trap, E8M0 (power-of-two) block scales. Must FAIL strict parity.

A native scaled-MMA (gfx950 ``mfma_scale_*_f8f6f4``, MX block-scaled MMA on NVIDIA)
takes its block scale as E8M0, i.e. a power of two. Folding the arbitrary fp32
``amax/448`` scales into that operand rounds each one by up to a factor sqrt(2)
(:func:`.quant.round_scales_pow2`); the fp8 data was quantised with the exact scale,
so every block's contribution comes out off by that factor. This arm computes
exactly that (dequant with the rounded scales -> fp32 matmul -> bf16), on any
platform, so the failure is demonstrable without the hardware: on realistic data
almost every output element leaves rtol=atol=1e-2.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .contract import check_contract
from .oracle import blockscale_reference
from .quant import round_scales_pow2

if TYPE_CHECKING:  # pragma: no cover
    import torch

Launch = Callable[[], None]


def build(inputs: dict[str, "torch.Tensor"], outputs: dict[str, "torch.Tensor"]) -> Launch:
    check_contract(inputs, outputs)
    a, a_scale, b, b_scale, c = inputs["a"], inputs["a_scale"], inputs["b"], inputs["b_scale"], outputs["c"]

    def launch() -> None:
        # rounded at call time: the verifier changes input values between timing rounds
        c.copy_(blockscale_reference(a, round_scales_pow2(a_scale), b, round_scales_pow2(b_scale)))

    launch()
    return launch

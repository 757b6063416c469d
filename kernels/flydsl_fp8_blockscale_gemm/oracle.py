"""The immutable oracle: fp32 dequant -> fp32 matmul -> bf16.

This is the card's reference ("fp32 dequant->matmul->bf16, allclose rtol=atol=1e-2").
The matmul is forced to IEEE fp32 (no TF32) for the duration of the call, whatever
the caller's global setting, so the oracle means the same thing on every box.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .quant import dequantize_activations, dequantize_weights

if TYPE_CHECKING:  # pragma: no cover
    import torch


@contextmanager
def ieee_fp32_matmul() -> Iterator[None]:
    """Run fp32 matmuls at full precision (TF32 off), restoring the caller's setting."""
    import torch

    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


def blockscale_reference(
    a: "torch.Tensor", a_scale: "torch.Tensor", b: "torch.Tensor", b_scale: "torch.Tensor"
) -> "torch.Tensor":
    """``bf16( dequant(a, a_scale) @ dequant(b, b_scale).T )`` computed in fp32.

    ``a`` fp8 ``[M, K]`` with ``a_scale[M, K/128]``; ``b`` fp8 ``[N, K]`` with
    ``b_scale[N/128, K/128]``.
    """
    import torch

    with ieee_fp32_matmul():
        c = dequantize_activations(a, a_scale) @ dequantize_weights(b, b_scale).t()
    return c.to(torch.bfloat16)


def oracle(inputs: dict[str, "torch.Tensor"], dims: dict[str, int]) -> dict[str, "torch.Tensor"]:
    """The problem's oracle: ``{"c": bf16 [M, N]}`` from the contract's inputs."""
    c = blockscale_reference(inputs["a"], inputs["a_scale"], inputs["b"], inputs["b_scale"])
    expected = (dims["M"], dims["N"])
    if tuple(c.shape) != expected:
        raise ValueError(f"oracle: inputs give C {list(c.shape)}, but dims say {list(expected)}")
    return {"c": c}

"""mxfp8 (OCP MX, 1x32 ue8m0) quantiser and the immutable GEMM oracle.

Format: fp8 e4m3 (OCP ``float8_e4m3fn``) elements, one power-of-two scale per 32
consecutive elements along K, for both operands: ``A [M, K]`` with scales ``[M, K/32]``
and ``B [N, K]`` (the weight, K-contiguous) with scales ``[N, K/32]``. A scale is stored
as its e8m0 byte ``e`` (biased exponent, value ``2^(e-127)``; 255 is NaN and never
produced) and, for convenience, as the float32 it stands for.

Oracle: dequantise both operands to float32 (exact: an fp8 value times a power of two
is representable in fp32 for every byte the quantiser emits), multiply in float32,
round once to bf16: ``C = bf16((A * sa) @ (B * sb)^T)``.

torch is imported lazily (inside the functions).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch

MX_BLOCK = 32
E8M0_BIAS = 127
E8M0_NAN = 255
FP8_E4M3_MAX = 448.0


@dataclass(frozen=True)
class MxTensor:
    """An mxfp8 operand: ``q`` fp8 e4m3fn ``[R, K]``, ``exps`` uint8 ``[R, K/32]`` e8m0
    bytes, ``scales`` the same scales as float32."""

    q: "torch.Tensor"
    exps: "torch.Tensor"
    scales: "torch.Tensor"


def _check_k(k: int, what: str) -> None:
    if k % MX_BLOCK:
        raise ValueError(f"{what}: K={k} must be a multiple of {MX_BLOCK} (one ue8m0 scale per 32 elements)")


def e8m0_to_float(exps: "torch.Tensor", check_nan: bool = True) -> "torch.Tensor":
    """e8m0 bytes -> float32 powers of two, exactly (``2^(e-127)``; 0 -> 2^-127).

    ``check_nan`` refuses the NaN byte; it reads a flag back from the device (a host
    synchronisation), so a timed launch passes False and lets parity see the NaN instead."""
    import torch

    if exps.dtype != torch.uint8:
        raise TypeError(f"e8m0_to_float: expected uint8 exponent bytes, got {exps.dtype}")
    if check_nan and bool((exps == E8M0_NAN).any()):
        raise ValueError("e8m0_to_float: byte 255 is the e8m0 NaN encoding")
    e = exps.to(torch.int32)
    # normal floats: the byte is the fp32 exponent field; e == 0 is the subnormal 2^-127
    bits = torch.where(e == 0, torch.full_like(e, 1 << 22), e << 23)
    return bits.view(torch.float32)


def quantize_mxfp8(x: "torch.Tensor") -> MxTensor:
    """Quantise ``x [R, K]`` (any float dtype) to mxfp8 along K.

    Scale rule: the smallest power of two ``s`` with ``amax(block) / s <= 448`` (so no
    element saturates), i.e. ``e = ceil(log2(amax / 448))``; an all-zero block gets
    ``s = 1``. Elements are ``x / s`` rounded to nearest-even fp8 e4m3fn.
    """
    import torch

    if x.dim() != 2:
        raise ValueError(f"quantize_mxfp8: expected a 2-D [R, K] tensor, got shape {tuple(x.shape)}")
    r, k = x.shape
    _check_k(k, "quantize_mxfp8")
    xf = x.detach().to(torch.float32)
    if not bool(torch.isfinite(xf).all()):
        raise ValueError("quantize_mxfp8: input holds NaN or Inf")
    blocks = xf.view(r, k // MX_BLOCK, MX_BLOCK)
    amax = blocks.abs().amax(dim=-1)
    # exact, no division or log: amax = m * 2^p with m in [0.5, 1); 448 = 0.875 * 2^9, so
    # amax / 2^(p-9) = m * 2^9 <= 448 iff m <= 0.875, else one more power of two is needed
    mant, p = torch.frexp(amax)
    e = torch.where(mant <= 0.875, p - 9, p - 8)
    e = torch.where(amax > 0, e, torch.zeros_like(e))
    biased = (e + E8M0_BIAS).clamp(0, 254).to(torch.uint8)
    scales = e8m0_to_float(biased)
    q = (blocks / scales.unsqueeze(-1)).view(r, k).to(torch.float8_e4m3fn)
    return MxTensor(q=q.contiguous(), exps=biased.contiguous(), scales=scales.contiguous())


def dequantize_mxfp8(q: "torch.Tensor", exps: "torch.Tensor", check_nan: bool = True) -> "torch.Tensor":
    """``q [R, K]`` fp8 and ``exps [R, K/32]`` e8m0 bytes -> float32 ``q * 2^(e-127)``."""
    import torch

    if q.dim() != 2 or exps.dim() != 2:
        raise ValueError(f"dequantize_mxfp8: expected 2-D q and exps, got {tuple(q.shape)} and {tuple(exps.shape)}")
    r, k = q.shape
    _check_k(k, "dequantize_mxfp8")
    if tuple(exps.shape) != (r, k // MX_BLOCK):
        raise ValueError(
            f"dequantize_mxfp8: exps shape {tuple(exps.shape)} does not match q {tuple(q.shape)}; "
            f"expected ({r}, {k // MX_BLOCK})"
        )
    if q.dtype != torch.float8_e4m3fn:
        q = q.view(torch.float8_e4m3fn)
    scales = e8m0_to_float(exps, check_nan)
    return (q.to(torch.float32).view(r, k // MX_BLOCK, MX_BLOCK) * scales.unsqueeze(-1)).view(r, k)


def mxfp8_gemm_fp32(
    a: "torch.Tensor", a_exps: "torch.Tensor", b: "torch.Tensor", b_exps: "torch.Tensor", check_nan: bool = True
) -> "torch.Tensor":
    """float32 ``(A * sa) @ (B * sb)^T`` (before the bf16 rounding)."""
    a_deq = dequantize_mxfp8(a, a_exps, check_nan)
    b_deq = dequantize_mxfp8(b, b_exps, check_nan)
    if a_deq.shape[1] != b_deq.shape[1]:
        raise ValueError(f"mxfp8 GEMM: K mismatch, A is {tuple(a.shape)} and B is {tuple(b.shape)}")
    return a_deq @ b_deq.t()


def mxfp8_gemm_oracle(
    a: "torch.Tensor", a_exps: "torch.Tensor", b: "torch.Tensor", b_exps: "torch.Tensor"
) -> "torch.Tensor":
    """The oracle: dequantise -> float32 matmul -> bf16. ``C [M, N]`` bf16."""
    import torch

    return mxfp8_gemm_fp32(a, a_exps, b, b_exps).to(torch.bfloat16)

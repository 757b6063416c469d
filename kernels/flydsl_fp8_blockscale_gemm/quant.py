"""fp8 e4m3 block quantiser with arbitrary fp32 scales, and the E8M0 rounding trap.

Activations get one scale per row per 128-wide K block (``[M, K/128]``), weights
one per 128x128 block (``[N/128, K/128]``). Each scale is ``amax / 448`` of its
block (448 = the largest finite e4m3fn value), so the block's largest element
maps onto the top of the fp8 range. An all-zero block gets scale 1.0 (its fp8
values are all zero, so any finite scale reproduces it; 1.0 avoids 0/0).

:func:`round_scales_pow2` rounds scales to powers of two, which is all an E8M0
hardware scale (the MX scaled-MMA scale operand) can hold. Folding the arbitrary
fp32 scales into that operand is the silent parity failure the card warns about.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # pragma: no cover
    import torch

FP8_E4M3_MAX = 448.0
BLOCK = 128
#: E8M0 encodes 2**(e - 127) for e in 0..254 (255 is NaN)
E8M0_MIN_EXP, E8M0_MAX_EXP = -127, 127


def _check_blocked(x: "torch.Tensor", what: str, rows_blocked: bool) -> tuple[int, int]:
    import torch

    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise ValueError(f"{what}: expected a 2-D tensor, got {getattr(x, 'shape', type(x).__name__)}")
    r, k = x.shape
    if k % BLOCK or (rows_blocked and r % BLOCK):
        need = f"both dims multiples of {BLOCK}" if rows_blocked else f"K a multiple of {BLOCK}"
        raise ValueError(f"{what}: shape {list(x.shape)} needs {need}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{what}: input has NaN/Inf; block scales would be meaningless")
    return r, k


def block_scale_from_amax(amax: "torch.Tensor") -> "torch.Tensor":
    """``amax / 448`` with the zero-block guard (scale 1.0 where ``amax == 0``)."""
    import torch

    amax = amax.float()
    return torch.where(amax > 0, amax / FP8_E4M3_MAX, torch.ones_like(amax))


def _to_fp8(x_over_scale: "torch.Tensor") -> "torch.Tensor":
    import torch

    # clamp first: x/scale can land a hair above 448 after fp32 rounding, and an
    # out-of-range cast to e4m3fn gives NaN rather than saturating
    return x_over_scale.clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.float8_e4m3fn)


def quantize_activations(x: "torch.Tensor") -> tuple["torch.Tensor", "torch.Tensor"]:
    """``x[M, K]`` -> (fp8 e4m3fn ``[M, K]``, fp32 scales ``[M, K/128]``), 1x128 blocks."""
    m, k = _check_blocked(x, "quantize_activations", rows_blocked=False)
    blocks = x.float().reshape(m, k // BLOCK, BLOCK)
    scale = block_scale_from_amax(blocks.abs().amax(dim=2))
    q = _to_fp8(blocks / scale[:, :, None]).reshape(m, k)
    return q, scale.contiguous()


def quantize_weights(w: "torch.Tensor") -> tuple["torch.Tensor", "torch.Tensor"]:
    """``w[N, K]`` -> (fp8 e4m3fn ``[N, K]``, fp32 scales ``[N/128, K/128]``), 128x128 blocks."""
    n, k = _check_blocked(w, "quantize_weights", rows_blocked=True)
    blocks = w.float().reshape(n // BLOCK, BLOCK, k // BLOCK, BLOCK)
    scale = block_scale_from_amax(blocks.abs().amax(dim=(1, 3)))
    q = _to_fp8(blocks / scale[:, None, :, None]).reshape(n, k)
    return q, scale.contiguous()


def dequantize_activations(q: "torch.Tensor", scale: "torch.Tensor") -> "torch.Tensor":
    """fp32 ``q * scale`` with ``scale[M, K/128]`` broadcast over each 1x128 block."""
    m, k = q.shape
    return (q.float().reshape(m, k // BLOCK, BLOCK) * scale.float()[:, :, None]).reshape(m, k)


def dequantize_weights(q: "torch.Tensor", scale: "torch.Tensor") -> "torch.Tensor":
    """fp32 ``q * scale`` with ``scale[N/128, K/128]`` broadcast over each 128x128 block."""
    n, k = q.shape
    blocks = q.float().reshape(n // BLOCK, BLOCK, k // BLOCK, BLOCK)
    return (blocks * scale.float()[:, None, :, None]).reshape(n, k)


def round_scales_pow2(
    scale: "torch.Tensor", mode: Literal["nearest", "floor", "ceil"] = "nearest"
) -> "torch.Tensor":
    """Round positive fp32 scales to powers of two, the only values E8M0 can hold.

    ``nearest`` rounds in the log domain (the smallest relative change, at most a
    factor of sqrt(2)); ``floor``/``ceil`` are the truncating conversions some
    quantisers use. Results are clamped to E8M0's range ``2**-127 .. 2**127``.
    """
    import torch

    if (scale <= 0).any() or not torch.isfinite(scale).all():
        raise ValueError("round_scales_pow2: scales must be positive and finite")
    rounders = {"nearest": torch.round, "floor": torch.floor, "ceil": torch.ceil}
    if mode not in rounders:
        raise ValueError(f"round_scales_pow2: mode must be one of {sorted(rounders)}, got {mode!r}")
    exp = rounders[mode](torch.log2(scale.double())).clamp(E8M0_MIN_EXP, E8M0_MAX_EXP)
    return torch.exp2(exp).to(torch.float32)

"""The fp8 partial format: OCP e4m3 (``float8_e4m3fn``), one symmetric fp32 scale.

Every path (torch emulation, Triton, FlyDSL) quantises the same way: multiply the fp32
partial by ``s``, clamp to the finite e4m3 range [-448, 448], round to nearest even.
The explicit clamp makes the result independent of whether a backend's conversion
saturates (Triton on sm_90 and torch do; gfx950's ``v_cvt_pk_fp8_f32`` without the
clamp bit does not), so an out-of-range value is a counted saturation, never a NaN.

gfx950 uses OCP e4m3 (max 448), not the fnuz flavour of gfx942 (max 240): the card's
"match the fp8 flavour to the arch" rule.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch

E4M3_MAX = 448.0  # largest finite OCP e4m3 value
E4M3_MIN_NORMAL = 2.0**-6
E4M3_MIN_SUBNORMAL = 2.0**-9  # values below half of this round to zero


def as_f32(value: float) -> float:
    """Round a Python float to the nearest float32 (the scale every kernel sees)."""
    return struct.unpack("<f", struct.pack("<f", float(value)))[0]


def f32_bits(value: float) -> int:
    """The IEEE float32 bit pattern of ``value`` (rounded to f32 first)."""
    return struct.unpack("<I", struct.pack("<f", float(value)))[0]


def f32_from_bits(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def check_scale(scale: float) -> float:
    """Validate a partial scale and return it rounded to float32.

    A scale must be a finite positive float32 whose reciprocal is finite too; anything
    else cannot be a symmetric store scale.
    """
    import math

    if not isinstance(scale, (int, float)) or isinstance(scale, bool):
        raise TypeError(f"partial scale must be a float, got {type(scale).__name__}")
    flt_max = 3.4028234663852886e38
    if not math.isfinite(scale) or abs(scale) > flt_max:
        raise ValueError(f"partial scale must be a finite positive float32 with a finite reciprocal, got {scale!r}")
    s = as_f32(scale)
    if not (s > 0.0 and 1.0 / s <= flt_max):
        raise ValueError(f"partial scale must be a finite positive float32 with a finite reciprocal, got {scale!r}")
    return s


def quantize_e4m3(x: "torch.Tensor", scale: float) -> "torch.Tensor":
    """fp32 partial -> e4m3 bytes: ``clamp(x * s, -448, 448)`` rounded to nearest even."""
    import torch

    s = check_scale(scale)
    y = (x.float() * s).clamp_(-E4M3_MAX, E4M3_MAX)
    return y.to(torch.float8_e4m3fn)


def dequantize_e4m3(q: "torch.Tensor", scale: float) -> "torch.Tensor":
    """e4m3 -> fp32, then ``* (1/s)``: the reducer's per-slot unscale (before the sum)."""
    s = check_scale(scale)
    return q.float() * (1.0 / s)

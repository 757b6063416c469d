"""Number formats of CDNA4 as the emulator computes them (numpy, vectorised over lanes).

* OCP fp8: e4m3 (``fp8``: bias 7, no infinities, S.1111.111 is NaN, max 448) and e5m2
  (``bf8``: bias 15, IEEE-like with infinities, max 57344). Decoding is exact (lookup
  tables to float64). Encoding from f32 rounds to nearest even; values whose rounded
  magnitude exceeds the format's max become NaN (e4m3) / infinity (e5m2), unless
  saturation is on (gfx950 MODE bit 23, set by ``s_setreg`` as Triton does, or the
  instruction's clamp bit): then finite overflow saturates to +-max. NaN stays NaN.
* E8M0 scales (``2**(e - 127)``, 0xFF is NaN) for the scaled MFMA.
* bf16 from f32: round to nearest even, NaN quieted.
* ``fma_f32``: single-rounding fused multiply-add in f32, computed in float64 with a
  TwoSum correction so the one f32 rounding is exact even at ties.
"""
from __future__ import annotations

import numpy as np


def _decode_table(exp_bits: int, man_bits: int, bias: int, ieee_special: bool) -> np.ndarray:
    out = np.empty(256, dtype=np.float64)
    for b in range(256):
        sign = -1.0 if b & 0x80 else 1.0
        e = (b >> man_bits) & ((1 << exp_bits) - 1)
        m = b & ((1 << man_bits) - 1)
        if ieee_special and e == (1 << exp_bits) - 1:
            out[b] = sign * np.inf if m == 0 else np.nan
        elif not ieee_special and e == (1 << exp_bits) - 1 and m == (1 << man_bits) - 1:
            out[b] = np.nan
        elif e == 0:
            out[b] = sign * m * 2.0 ** (1 - bias - man_bits)
        else:
            out[b] = sign * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
    return out


FP8_E4M3 = _decode_table(4, 3, 7, False)
BF8_E5M2 = _decode_table(5, 2, 15, True)
FP8_MAX = {"fp8": 448.0, "bf8": 57344.0}
_FORMATS = {"fp8": (4, 3, 7), "bf8": (5, 2, 15)}


def decode_fp8(bytes_: np.ndarray, fmt: str) -> np.ndarray:
    """uint8 array -> float64 values."""
    return (FP8_E4M3 if fmt == "fp8" else BF8_E5M2)[bytes_]


def encode_fp8(x: np.ndarray, fmt: str, saturate: bool) -> np.ndarray:
    """float32 array -> uint8 codes, round to nearest even (see the module docstring)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return _encode_fp8(np.asarray(x, dtype=np.float32), fmt, saturate)


def _encode_fp8(x: np.ndarray, fmt: str, saturate: bool) -> np.ndarray:
    exp_bits, man_bits, bias = _FORMATS[fmt]
    bits = x.view(np.uint32)
    sign = ((bits >> 24) & 0x80).astype(np.uint8)
    a = np.abs(np.where(np.isnan(x), 0, x).astype(np.float64))
    nan = np.isnan(x)
    inf = np.isinf(x)
    # quantise |x| to the format's grid with RNE: scale so the grid step is 1
    e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(e, 1 - bias)  # subnormals share the minimum exponent's step
    step = np.ldexp(1.0, (e - man_bits).astype(np.int64))
    q = np.rint(np.where(inf, 0.0, a) / step) * step  # np.rint is round-half-even
    mx = FP8_MAX[fmt]
    over = q > mx
    if saturate:
        q = np.where(over, mx, q)
        over = np.zeros_like(over)
    # encode q (exact on the grid now)
    qe = np.floor(np.log2(np.where(q > 0, q, 1.0)))
    normal = qe >= 1 - bias
    mant_n = np.where(normal, q / np.ldexp(1.0, qe.astype(np.int64)) - 1.0, 0.0)
    code_n = ((qe + bias).astype(np.int64) << man_bits) + np.rint(mant_n * (1 << man_bits)).astype(np.int64)
    code_s = np.rint(q / np.ldexp(1.0, 1 - bias - man_bits)).astype(np.int64)
    code = np.where(q == 0, 0, np.where(normal, code_n, code_s)).astype(np.uint8)
    if fmt == "fp8":
        special = nan | over | inf  # e4m3 has no infinity: NaN (sign kept)
        code = np.where(special, np.uint8(0x7F), code)
        if saturate:
            code = np.where(inf & ~nan, np.uint8(0x7F), code)
    else:
        code = np.where(over | inf, np.uint8(0x7C), code)
        code = np.where(nan, np.uint8(0x7F), code)
    return code | sign


def e8m0_scale(bytes_: np.ndarray) -> np.ndarray:
    b = bytes_.astype(np.int64)
    return np.where(b == 0xFF, np.nan, np.ldexp(1.0, b - 127))


def f32_to_bf16_bits(x_bits: np.ndarray) -> np.ndarray:
    """uint32 f32 bits -> uint32 holding the bf16 bits in the low half (RNE, NaN quieted)."""
    u = x_bits.astype(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = (u + (np.uint32(0x7FFF) + ((u >> 16) & 1))) >> 16
    return np.where(nan, (u >> 16) | np.uint32(0x40), rounded).astype(np.uint32)


def bf16_to_f32_bits(h: np.ndarray) -> np.ndarray:
    return (h.astype(np.uint32) & 0xFFFF) << 16


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray, scale: np.ndarray | None = None) -> np.ndarray:
    """Correctly rounded f32 fma (float32 arrays in, float32 out). ``scale`` (float64 powers
    of two, optional): round ``(a * b + c) * scale`` once, as ``v_div_fmas_f32`` does."""
    with np.errstate(over="ignore", invalid="ignore"):
        p = a.astype(np.float64) * b.astype(np.float64)  # exact: 24 + 24 bits
        c64 = c.astype(np.float64)
        s = p + c64
        bp = s - c64
        err = (p - bp) + (c64 - (s - bp))  # TwoSum: s + err == p + c exactly
        if scale is not None:  # exact: a power of two, far from float64's limits here
            s, err = s * scale, err * scale
        r = s.astype(np.float32)
        # only when s is exactly halfway between two f32 values can err change the rounding. A
        # cheap necessary test first: err != 0 and, in f32's normal range, s's 29 low float64
        # mantissa bits are exactly the half of an f32 unit (below 2**-126: always tested fully)
        s_ = np.asarray(s, dtype=np.float64)
        maybe = (np.asarray(err) != 0) & (((s_.view(np.uint64) & np.uint64(0x1FFFFFFF)) == np.uint64(0x10000000))
                                          | (np.abs(s_) < 2.0**-126))
        if not maybe.any():
            return r.astype(np.float32)
        r64 = r.astype(np.float64)
        other = np.nextafter(r, np.where(s > r64, np.float32(np.inf), np.float32(-np.inf)))
        tie = (s != r64) & (s == (r64 + other.astype(np.float64)) * 0.5) & (err != 0) & np.isfinite(s)
        if tie.any():
            # the true value s + err lies on err's side of the midpoint
            toward_other = np.sign(err) == np.sign(other.astype(np.float64) - r64)
            r = np.where(tie & toward_other, other, r)
    return r.astype(np.float32)

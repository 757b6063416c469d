"""gfx950 emulator number formats: OCP fp8 / bf8, bf16, E8M0 and the fused multiply-add."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from verifiers.gfx950.emulator import numerics


@pytest.mark.parametrize(("fmt", "dtype"), [("fp8", torch.float8_e4m3fn), ("bf8", torch.float8_e5m2)])
def test_decode_every_code(fmt, dtype):
    codes = np.arange(256, dtype=np.uint8)
    ref = torch.from_numpy(codes.copy()).view(dtype).double().numpy()
    assert np.array_equal(numerics.decode_fp8(codes, fmt), ref, equal_nan=True)


@pytest.mark.parametrize(("fmt", "dtype", "mx"), [("fp8", torch.float8_e4m3fn, 448.0), ("bf8", torch.float8_e5m2, 57344.0)])
def test_encode_rounds_to_nearest_even_like_torch_in_range(fmt, dtype, mx):
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(100_000, generator=g) * s for s in (1e-3, 1.0, 30.0, 300.0)])
    x = x.clamp(-mx, mx)
    grid = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype).float()
    mids = grid[torch.isfinite(grid)].sort().values
    x = torch.cat([x, (mids[1:] + mids[:-1]) / 2])  # exact ties: round half to even
    ref = x.to(dtype).view(torch.uint8).numpy()
    got = numerics.encode_fp8(x.numpy(), fmt, saturate=False)
    assert np.array_equal(got, ref)


def test_overflow_saturates_only_in_saturation_mode():
    x = np.array([464.0, 465.0, -1e6, 500.0], dtype=np.float32)
    assert list(numerics.encode_fp8(x, "fp8", saturate=True)) == [0x7E, 0x7E, 0xFE, 0x7E]
    assert list(numerics.encode_fp8(x, "fp8", saturate=False)) == [0x7E, 0x7F, 0xFF, 0x7F]  # e4m3 has no inf: NaN
    big = np.array([61440.0, 1e9], dtype=np.float32)
    assert list(numerics.encode_fp8(big, "bf8", saturate=False)) == [0x7C, 0x7C]  # infinity
    assert list(numerics.encode_fp8(big, "bf8", saturate=True)) == [0x7B, 0x7B]  # 57344
    assert numerics.encode_fp8(np.array([np.nan], np.float32), "fp8", saturate=True)[0] & 0x7F == 0x7F


def test_bf16_round_to_nearest_even():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(200_000, generator=g) * 1e3
    ours = numerics.f32_to_bf16_bits(x.numpy().view(np.uint32)).astype(np.uint16)
    assert np.array_equal(ours, x.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16))


def test_e8m0():
    assert list(numerics.e8m0_scale(np.array([127, 0, 254], dtype=np.uint8))) == [1.0, 2.0**-127, 2.0**127]
    assert np.isnan(numerics.e8m0_scale(np.array([255], dtype=np.uint8))[0])


def test_fma_is_rounded_once():
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(3000).astype(np.float32) for _ in range(3))
    a[:500], b[:500] = np.float32(1 + 2**-12), np.float32(1 + 2**-12)  # products with a tie after one rounding
    c[:500] = np.float32(-1.0)
    got = numerics.fma_f32(a, b, c)
    exact = [Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)) for x, y, z in zip(a, b, c)]
    want = np.array([_round_f32(v) for v in exact], dtype=np.float32)
    assert np.array_equal(got, want)
    unfused = (a * b) + c  # f32 multiply then add: two roundings
    assert not np.array_equal(unfused, want), "the cases must tell a fused from an unfused multiply-add"


def _round_f32(v: Fraction) -> float:
    """Correct round-to-nearest-even of an exact rational to f32."""
    f = np.float32(float(v))
    lo, hi = (np.nextafter(f, np.float32(-np.inf)), f) if Fraction(float(f)) > v else (f, np.nextafter(f, np.float32(np.inf)))
    dl, dh = v - Fraction(float(lo)), Fraction(float(hi)) - v
    if dl < dh:
        return float(lo)
    if dh < dl:
        return float(hi)
    return float(lo if int(np.float32(lo).view(np.uint32)) % 2 == 0 else hi)


def test_fma_breaks_a_float64_tie_by_the_lost_remainder():
    """a*b + c whose float64 sum lands exactly halfway between two f32 values while the true
    value lies 2**-64 below it: the result must round down (to 1 + 2**-23), not to even."""
    a = np.array([2.0**-12 * (1 + 2.0**-20)] * 3, dtype=np.float32)
    b = np.array([2.0**-12 * (1 - 2.0**-20)] * 3, dtype=np.float32)
    c = np.array([1 + 2.0**-23, -(1 + 2.0**-23), 2.0**-100], dtype=np.float32)
    b[2] = np.float32(2.0**-12)  # an ordinary case next to them
    got = numerics.fma_f32(a, b, c)
    exact = [Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)) for x, y, z in zip(a, b, c)]
    want = np.array([_round_f32(v) for v in exact], dtype=np.float32)
    assert got[0] == np.float32(1 + 2.0**-23) and got[1] == -np.float32(1 + 2.0**-23)  # not rounded to even
    assert np.array_equal(got, want)


@pytest.mark.parametrize("m", [16, 32])
def test_mfma_result_movement_is_the_documented_layout(m):
    """The MFMA result written by reshapes and one axis swap (``to_registers`` and the view
    ``registers_as_matrix``) is the register/lane layout ``result_layout`` documents."""
    from verifiers.gfx950.emulator.ops import mfma

    rng = np.random.default_rng(m)
    prod = rng.standard_normal((3, 2, m, m))
    rows, cols = mfma.result_layout(m)
    want = prod[..., rows, cols]
    assert np.array_equal(mfma.to_registers(prod, m), want)
    out = np.empty(want.shape, dtype=np.float32)
    mfma.registers_as_matrix(out, m)[...] = prod.reshape(prod.shape[:-2] + mfma._result_split(m)[0])
    assert np.array_equal(out, want.astype(np.float32))

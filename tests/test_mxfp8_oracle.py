"""mxfp8 quantiser and oracle: applying a ue8m0 scale is lossless; the oracle's only
error is bf16 rounding."""
from __future__ import annotations

import pytest
import torch

from skill_kernels.flydsl_mxfp8_8wave_gemm import oracle as O


def _x(shape, seed=0, spread=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    if spread:  # a different magnitude per 32-block, 2^-20 .. 2^20
        e = torch.randint(-20, 21, (shape[0], shape[1] // 32, 1), generator=g).float()
        x = (x.view(shape[0], -1, 32) * torch.exp2(e)).view(shape)
    return x


def test_e8m0_to_float_is_exact_power_of_two():
    e = torch.arange(0, 255, dtype=torch.uint8)
    f = O.e8m0_to_float(e).to(torch.float64)
    assert torch.equal(f, torch.ldexp(torch.ones(255, dtype=torch.float64), e.to(torch.int64) - 127))


def test_e8m0_rejects_nan_byte_and_wrong_dtype():
    with pytest.raises(ValueError, match="NaN"):
        O.e8m0_to_float(torch.tensor([255], dtype=torch.uint8))
    with pytest.raises(TypeError, match="uint8"):
        O.e8m0_to_float(torch.tensor([127], dtype=torch.int32))


def test_dequant_is_fp8_value_times_exact_power_of_two():
    mx = O.quantize_mxfp8(_x((64, 256)))
    deq = O.dequantize_mxfp8(mx.q, mx.exps)
    q = mx.q.to(torch.float64)
    scale = torch.ldexp(torch.ones_like(mx.exps, dtype=torch.float64), mx.exps.to(torch.int64) - 127)
    # exact in fp32: the product equals the fp64 product bit for bit
    assert torch.equal(deq.to(torch.float64), (q.view(64, 8, 32) * scale.unsqueeze(-1)).view(64, 256))
    # and dividing the scale back out gives the fp8 value exactly
    assert torch.equal((deq.view(64, 8, 32) / mx.scales.unsqueeze(-1)).view(64, 256), mx.q.to(torch.float32))
    assert torch.equal(mx.scales, O.e8m0_to_float(mx.exps))


def test_quantiser_picks_smallest_non_saturating_power_of_two():
    x = _x((32, 512), seed=3)
    mx = O.quantize_mxfp8(x)
    amax = x.view(32, 16, 32).abs().amax(-1)
    assert bool((amax / mx.scales <= 448).all())
    assert bool((amax / (mx.scales / 2) > 448).all())  # half the scale would saturate
    assert bool(torch.isfinite(mx.q.to(torch.float32)).all())
    # quantisation error is within half an fp8 ulp (3 mantissa bits) of each block's scale
    err = (O.dequantize_mxfp8(mx.q, mx.exps) - x).abs().view(32, 16, 32)
    assert bool((err <= amax.unsqueeze(-1) * 2.0**-4 + 1e-30).all())


def test_quantiser_zero_block_and_errors():
    x = torch.zeros(2, 64)
    x[1, 40] = 3.0
    mx = O.quantize_mxfp8(x)
    assert mx.exps[0].tolist() == [127, 127] and mx.exps[1, 0].item() == 127
    with pytest.raises(ValueError, match="multiple of 32"):
        O.quantize_mxfp8(torch.ones(2, 48))
    with pytest.raises(ValueError, match="NaN or Inf"):
        O.quantize_mxfp8(torch.tensor([[float("nan")] * 32]))
    with pytest.raises(ValueError, match="does not match"):
        O.dequantize_mxfp8(mx.q, mx.exps[:, :1])


def test_oracle_error_is_only_bf16_rounding():
    a = O.quantize_mxfp8(_x((64, 512), seed=1, spread=False) * 3)
    b = O.quantize_mxfp8(_x((96, 512), seed=2) * 0.02)
    ref64 = O.dequantize_mxfp8(a.q, a.exps).double() @ O.dequantize_mxfp8(b.q, b.exps).double().t()
    c32 = O.mxfp8_gemm_fp32(a.q, a.exps, b.q, b.exps).double()
    c = O.mxfp8_gemm_oracle(a.q, a.exps, b.q, b.exps)
    assert c.dtype == torch.bfloat16 and c.shape == (64, 96)
    scale = ref64.abs().max()
    # fp32 accumulation: far below the bf16 step
    assert float(((c32 - ref64).abs() / scale).max()) < 1e-5
    # bf16 round-to-nearest: at most half an ulp, 2^-8 of the value, plus the fp32 residue
    bound = ref64.abs() * 2.0**-8 + 1e-5 * scale
    assert bool(((c.double() - ref64).abs() <= bound).all())
    # and it is the rounding of the fp32 product, not something coarser
    assert torch.equal(c, c32.float().to(torch.bfloat16))


def test_oracle_rejects_k_mismatch():
    a = O.quantize_mxfp8(torch.ones(2, 64))
    b = O.quantize_mxfp8(torch.ones(2, 96))
    with pytest.raises(ValueError, match="K mismatch"):
        O.mxfp8_gemm_oracle(a.q, a.exps, b.q, b.exps)

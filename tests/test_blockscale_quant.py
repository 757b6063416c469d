"""Quantiser, E8M0 rounding and input generation of the block-scale fp8 GEMM problem."""
from __future__ import annotations

import math

import pytest
import torch

from skill_kernels.flydsl_fp8_blockscale_gemm import inputs as bs_inputs
from skill_kernels.flydsl_fp8_blockscale_gemm.contract import ContractError, check_contract
from skill_kernels.flydsl_fp8_blockscale_gemm.quant import (
    FP8_E4M3_MAX,
    dequantize_activations,
    dequantize_weights,
    quantize_activations,
    quantize_weights,
    round_scales_pow2,
)
from skill_kernels.fp8_common.layouts import preshuffle_b


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_activation_scale_is_block_amax_over_448():
    x = torch.randn(8, 512, generator=_gen()) * torch.logspace(-3, 3, 8)[:, None]
    q, s = quantize_activations(x)
    amax = x.view(8, 4, 128).abs().amax(dim=2)
    assert q.dtype == torch.float8_e4m3fn and s.shape == (8, 4)
    torch.testing.assert_close(s, amax / FP8_E4M3_MAX, rtol=0, atol=0)
    # the largest element of every block lands on the top of the fp8 range
    top = q.float().view(8, 4, 128).abs().amax(dim=2)
    assert torch.all(top == FP8_E4M3_MAX)


def test_weight_scale_is_128x128_block_amax_over_448():
    w = torch.randn(256, 384, generator=_gen(1))
    w[128:, 256:] *= 50.0
    q, s = quantize_weights(w)
    amax = w.view(2, 128, 3, 128).abs().amax(dim=(1, 3))
    assert s.shape == (2, 3)
    torch.testing.assert_close(s, amax / FP8_E4M3_MAX, rtol=0, atol=0)
    assert s[1, 2] > 10 * s[0, 0]


@pytest.mark.parametrize("quantize,dequantize,shape,blocks", [
    (quantize_activations, dequantize_activations, (16, 1024), lambda s: s.repeat_interleave(128, 1)),
    (quantize_weights, dequantize_weights, (256, 512),
     lambda s: s.repeat_interleave(128, 0).repeat_interleave(128, 1)),
])
def test_round_trip_error_is_bounded_by_e4m3_rounding(quantize, dequantize, shape, blocks):
    x = torch.randn(*shape, generator=_gen(2)) * torch.exp(torch.randn(*shape, generator=_gen(3)))
    q, s = quantize(x)
    err = (dequantize(q, s) - x).abs()
    s_full = blocks(s)
    # e4m3: 3 mantissa bits -> half-ulp relative error 2**-4 for normals; subnormal
    # spacing 2**-9 (in scaled units) -> absolute error 2**-10 * scale
    bound = torch.maximum(x.abs() * 2.0**-4, s_full * 2.0**-10) * (1 + 1e-6)
    assert torch.all(err <= bound), float((err - bound).max())


def test_zero_block_gets_a_guarded_scale_and_stays_zero():
    x = torch.randn(4, 256, generator=_gen(4))
    x[1, :128] = 0.0
    q, s = quantize_activations(x)
    assert s[1, 0] == 1.0 and torch.isfinite(s).all()
    deq = dequantize_activations(q, s)
    assert torch.all(deq[1, :128] == 0) and torch.isfinite(deq).all()
    w = torch.zeros(128, 128)
    qw, sw = quantize_weights(w)
    assert sw.item() == 1.0 and torch.all(qw.float() == 0)


def test_quantiser_rejects_bad_shapes_and_nonfinite():
    with pytest.raises(ValueError, match="multiple of 128"):
        quantize_activations(torch.randn(4, 100))
    with pytest.raises(ValueError, match="both dims"):
        quantize_weights(torch.randn(100, 128))
    bad = torch.randn(2, 128)
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        quantize_activations(bad)


def test_pow2_rounding_gives_powers_of_two_within_sqrt2():
    s = torch.rand(1000, generator=_gen(5)) * 10 + 1e-4
    p = round_scales_pow2(s)
    exps = torch.log2(p.double())
    assert torch.all(exps == exps.round())
    ratio = (p / s).double()
    assert ratio.max() <= math.sqrt(2) * (1 + 1e-6) and ratio.min() >= 1 / math.sqrt(2) * (1 - 1e-6)
    assert torch.all(round_scales_pow2(s, "floor") <= s) and torch.all(round_scales_pow2(s, "ceil") >= s)
    # an exact power of two is untouched; almost nothing else is
    assert round_scales_pow2(torch.tensor([0.25])).item() == 0.25
    assert (p != s).float().mean() > 0.99
    with pytest.raises(ValueError, match="positive"):
        round_scales_pow2(torch.tensor([0.0, 1.0]))


def test_make_inputs_follows_the_contract_and_is_seeded():
    dims = {"M": 192, "N": 256, "K": 384}
    x0 = bs_inputs.make_inputs(dims, 0)
    assert check_contract(x0, bs_inputs.make_outputs(dims)) == dims
    torch.testing.assert_close(x0["a_scale_t"], x0["a_scale"].t())
    assert torch.equal(x0["b_shuffled"].view(torch.uint8), preshuffle_b(x0["b"]).view(torch.uint8))
    again = bs_inputs.make_inputs(dims, 0)
    other = bs_inputs.make_inputs(dims, 1)
    assert all(torch.equal(x0[n].view(torch.uint8) if x0[n].element_size() == 1 else x0[n],
                           again[n].view(torch.uint8) if again[n].element_size() == 1 else again[n]) for n in x0)
    assert not torch.equal(x0["a_scale"], other["a_scale"])


def test_make_inputs_is_realistic_not_degenerate():
    dims = {"M": 256, "N": 512, "K": 1024}
    x = bs_inputs.make_inputs(dims, 3)
    for name in ("a_scale", "b_scale"):
        s = x[name]
        assert torch.all(s > 0) and torch.all(s != 1.0), f"{name}: zero block or guard scale"
        # scales really vary across blocks (a constant scale would hide scale bugs)
        assert (s.max() / s.min()) > 4, name
    # outlier channels: some activation blocks need a much larger scale than the row's median
    row_ratio = x["a_scale"].max(dim=1).values / x["a_scale"].median(dim=1).values
    assert row_ratio.max() > 4
    for name in ("a", "b"):
        assert (x[name].float() == 0).float().mean() < 0.05, f"{name}: too many zeros"


def test_contract_errors_name_the_tensor():
    dims = {"M": 128, "N": 128, "K": 256}
    x = bs_inputs.make_inputs(dims, 0)
    out = bs_inputs.make_outputs(dims)
    with pytest.raises(ContractError, match="a_scale_t"):
        check_contract({**x, "a_scale_t": x["a_scale"]}, out)
    with pytest.raises(ContractError, match="b_scale.*dtype"):
        check_contract({**x, "b_scale": x["b_scale"].double()}, out)
    with pytest.raises(ContractError, match="missing"):
        check_contract({k: v for k, v in x.items() if k != "b_shuffled"}, out)
    with pytest.raises(ContractError, match="outputs\\['c'\\]"):
        check_contract(x, {"c": torch.empty(128, 128)})
    with pytest.raises(ValueError, match="multiples of 128"):
        bs_inputs.make_inputs({"M": 128, "N": 100, "K": 256}, 0)

"""Choosing the fp8 partial scale from the partial magnitude histogram."""
from __future__ import annotations

import math

import pytest
import torch

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import calibration, fp8_format, naming


@pytest.fixture(scope="module")
def partials() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(256, 512, generator=g) * torch.rand(256, 1, generator=g) * 0.05


def test_largest_partial_lands_at_half_the_e4m3_range(partials):
    r = calibration.choose_scale(partials)
    assert r.mapped_amax == pytest.approx(224.0, rel=1e-6)
    assert r.fractions.saturated == 0.0
    assert r.scale == fp8_format.as_f32(r.scale)  # the exact float32 both kernels get
    assert r.scale_hex == naming.scale_hex(r.scale) and len(r.scale_hex) == 8
    assert r.inverse == fp8_format.as_f32(1.0 / r.scale)
    assert sum(r.log2_histogram.values()) == int((partials != 0).sum())


def test_a_scale_too_large_saturates_and_one_too_small_flushes(partials):
    good = calibration.choose_scale(partials).scale
    big = calibration.fp8_fractions(partials, good * 8)
    expect_sat = float(((partials * fp8_format.as_f32(good * 8)).abs() > 448).float().mean())
    assert big.saturated == pytest.approx(expect_sat) and big.saturated > 0
    small = calibration.fp8_fractions(partials, good / 4096)
    assert small.flushed > 10 * calibration.fp8_fractions(partials, good).flushed
    assert small.rel_rms_error > calibration.fp8_fractions(partials, good).rel_rms_error


def test_lower_percentile_trades_saturation_for_headroom(partials):
    r = calibration.choose_scale(partials, percentile=99.0)
    assert r.percentile_value < r.amax and r.mapped_amax > 224.0
    assert r.fractions.saturated <= 0.01


def test_power_of_two_scale(partials):
    r = calibration.choose_scale(partials, power_of_two=True)
    assert math.log2(r.scale).is_integer()
    assert 112.0 <= r.mapped_amax <= 224.0


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan"), 1e-45])
def test_invalid_scales_are_rejected(bad):
    with pytest.raises(ValueError, match="finite positive"):
        fp8_format.check_scale(bad)


def test_bad_calibration_input_is_rejected():
    with pytest.raises(ValueError, match="percentile"):
        calibration.choose_scale(torch.ones(4), percentile=0.0)
    with pytest.raises(ValueError, match="finite"):
        calibration.choose_scale(torch.tensor([1.0, float("nan")]))
    with pytest.raises(ValueError, match="is 0"):
        calibration.choose_scale(torch.zeros(8))


def test_quantizer_clamps_instead_of_producing_nan_and_rounds_to_nearest_even():
    x = torch.tensor([1000.0, -1000.0, 448.0, 1.0625, 1.1875, 2.0**-10, 0.75 * 2.0**-9])
    q = fp8_format.quantize_e4m3(x, 1.0).float()
    assert q.tolist() == [448.0, -448.0, 448.0, 1.0, 1.25, 0.0, 2.0**-9]
    assert torch.equal(fp8_format.dequantize_e4m3(fp8_format.quantize_e4m3(x, 4.0), 4.0) * 4.0,
                       fp8_format.quantize_e4m3(x, 4.0).float())


def test_calibration_for_a_shape_uses_its_own_seed():
    d = {"M": 32, "N": 96, "K": 64, "E": 8, "top_k": 2}
    r = calibration.calibrate_for_dims(d)
    assert f"{calibration.CALIBRATION_SEED:#x}" in r.source
    assert calibration.CALIBRATION_SEED not in (0, 1, 2, 3)
    assert calibration.scale_for(d).scale == r.scale  # cached, deterministic
    assert r.fractions.saturated == 0.0 and r.fractions.flushed < 1e-2


@pytest.mark.parametrize("dims", [{"M": 24, "N": 96, "K": 64, "E": 8, "top_k": 2},
                                  {"M": 16, "N": 160, "K": 48, "E": 16, "top_k": 4}])
def test_the_scale_of_a_small_shape_covers_the_draws_of_other_seeds(dims):
    """The verifier draws a secret seed per run: a scale fitted to the largest partial of a
    24-token draw clamped the top of 2.3 % of other seeds' draws past 448 (and failed the
    honest fp8 arm's max-abs rule); fitted to a 2048-token draw it clamps none."""
    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import oracle

    s = calibration.scale_for(dims).scale
    mapped = [float(oracle.stage2_partials(oracle.make_inputs(dims, seed)).abs().max()) * s for seed in range(200)]
    assert max(mapped) < fp8_format.E4M3_MAX, sorted(mapped)[-5:]

"""FlyDSL compile (gfx950, compile-only) of the mxfp8 kernel and its static gates: the
scaled MFMA with real per-lane scale operands, no scratch, 8-byte swapped-A/B stores;
the deliberately wrong variants (scales pinned to 1.0, scales omitted) must fail."""
from __future__ import annotations

import pytest

from verifiers.gfx950 import check_kernel

pytestmark = pytest.mark.flydsl
FOLDER = "flydsl_mxfp8_8wave_gemm"


def _report(target):
    (report,) = check_kernel(FOLDER, target=target)
    if report.status == "SKIPPED":
        from tests.emulator_support import toolchain_missing

        toolchain_missing(f"gfx950 toolchain missing: {report.reason}")
    return report


def test_default_target_passes_every_gate():
    r = _report("bm128_bn128_k2048")
    assert r.status == "PASS", [(g.name, g.detail) for g in r.gates if g.status != "PASS"]
    assert r.gate("scaled_mfma").status == "PASS"
    # only the scaled MFMA: 16 per 128-K step, loop unrolled by two plus the peeled last pair
    assert r.mfma == {"v_mfma_scale_f32_16x16x128_f8f6f4": 64}
    (res,) = r.resources
    assert res["scratch_bytes"] == 0 and res["lds_bytes"] == 0 and res["vgpr_spill"] == 0
    assert r.occupancy[0].waves_per_simd >= 2


def test_pinned_scales_fail_the_real_scale_gate():
    r = _report("scales_pinned_1p0")
    assert r.negative and r.holds, r.failed
    assert r.failed == ["scaled_mfma"]  # everything else about it looks fine


def test_omitted_scales_fall_back_to_the_unscaled_mfma():
    r = _report("scales_omitted")
    assert r.negative and r.holds
    assert r.mfma == {"v_mfma_f32_16x16x128_f8f6f4": 64}


@pytest.mark.slow
@pytest.mark.parametrize("target", ["bm64_bn256_k1280", "bm256_bn64_k384"])
def test_other_tiles_pass(target):
    assert _report(target).status == "PASS"


def test_eight_wave_tile_widens_swap_ab_stores_to_64_byte_rows():
    """The PR's store path in the ISA: v_permlane16_swap, the ds_bpermute transpose, and
    per row one base address with 16-byte stores at +0/16/32/48; no narrower C store."""
    r = _report("8w_bm256_bn256_k2048")
    assert r.status == "PASS", [(g.name, g.detail) for g in r.gates if g.status != "PASS"]
    assert r.mfma == {"v_mfma_scale_f32_16x16x128_f8f6f4": 32}  # 4 A x 8 B tiles per wave per K step
    (res,) = r.resources
    assert res["workgroup_size"] == 512 and res["scratch_bytes"] == 0 and res["lds_bytes"] == 0
    stores = r.gate("required").evidence
    assert any("offset:48" in e for e in stores)


def test_eight_wave_narrow_tile_and_the_unwidened_stores():
    narrow = _report("8w_bm256_bn128_k1280")
    assert narrow.status == "PASS" and narrow.mfma == {"v_mfma_scale_f32_16x16x128_f8f6f4": 16}
    direct = _report("neg_8w_direct_stores")  # 8-byte stores: no permlane, no bpermute, no 64-byte rows
    assert direct.negative and direct.holds and set(direct.failed) == {"required", "forbidden"}
    assert any("buffer_store_dwordx2" in e for e in direct.gate("forbidden").evidence)

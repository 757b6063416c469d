"""FlyDSL gfx950 kernels of the MoE fp8-partial card: compile-only, then the static gates
(fp8 conversions on the store and load sides, exact s and 1/s constants, 16-byte memory
ops, no scratch, 8 waves/SIMD) through the project's gate machinery. A subset of the
folder's targets keeps CI time down; ``skill-server check-kernel`` runs them all."""
from __future__ import annotations

import pytest

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.gfx950_targets import REF_SCALE
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.naming import gemm_name, reduce_name, store_name

pytestmark = pytest.mark.flydsl
FOLDER = "flydsl_prefill_moe_stage2_fp8partial"


def _report(target):
    from verifiers.gfx950 import check_kernel
    from verifiers.gfx950.env import toolchain_problem

    problem = toolchain_problem()
    if problem:
        from tests.emulator_support import toolchain_missing

        toolchain_missing(problem)
    (report,) = check_kernel(FOLDER, target)
    return report


@pytest.mark.parametrize(
    "target, kernel",
    [
        ("reduce_infp8_k8_n7168", reduce_name(True, REF_SCALE)),
        ("store_pf8_n2880_f32acc", store_name(True, REF_SCALE)),
        ("gemm_cshuffle_pf8_n7168_k2048", gemm_name(True, REF_SCALE, flavour="cshuffle")),
    ],
)
def test_positive_targets_pass_every_gate(target, kernel):
    r = _report(target)
    assert r.status == "PASS", [(g.name, g.detail) for g in r.gates if g.status != "PASS"]
    assert [res["kernel"] for res in r.resources] == [kernel]
    if kernel.startswith("moe2_gemm_"):  # the fused GEMM: bf16 MFMAs, an LDS tile, no scratch
        assert set(r.mfma) == {"v_mfma_f32_16x16x32_bf16"} and r.resources[0]["lds_bytes"] > 0
        assert kernel.startswith("moe2_gemm_cshuffle_pf8_s") and all(o.waves_per_simd >= 2 for o in r.occupancy)
    else:
        assert all(o.waves_per_simd >= 8 for o in r.occupancy)


@pytest.mark.parametrize(
    "target, must_fail",
    [
        ("neg_reduce_mismatched_2s_k8_n7168", {"required_ir"}),
        ("neg_store_bf16_n7168", {"required", "required_ir"}),
        ("neg_gemm_pf8_mismatched_2s_n7168", {"required_ir"}),  # producer compiled with 2s, reducer s
        ("neg_gemm_pf8_dropped_scale_n7168", {"required_ir"}),  # the scale keyword dropped: no * s
        ("neg_gemm_bf16_n7168", {"required", "required_ir"}),
    ],
)
def test_negative_targets_are_caught(target, must_fail):
    r = _report(target)
    assert r.negative and r.holds, r.failed
    assert must_fail <= set(r.failed)


def test_the_scale_is_in_both_cache_identities():
    """One scale per build, a compile argument of the fused producer and of the infp8 reducer:
    each is cached per scale, and each kernel's name carries it (the runtime-signature check
    reads those tags); the 'dropped' variant keeps the producer's tag but not its arithmetic,
    which only the gates' exact-constant rule and parity can see."""
    pytest.importorskip("flydsl")
    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.flydsl_reduce import make_reduce
    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.flydsl_stage2_gemm import make_gemm
    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.naming import check_scale_consistency

    g1, g2 = make_gemm(7168, 2048, REF_SCALE), make_gemm(7168, 2048, 2 * REF_SCALE)
    r1, r2 = make_reduce(8, 7168, REF_SCALE), make_reduce(8, 7168, 2 * REF_SCALE)
    assert g1 is make_gemm(7168, 2048, REF_SCALE) and g1 is not g2 and r1 is not r2
    assert g1.kernel_name == gemm_name(True, REF_SCALE, flavour="cshuffle") != g2.kernel_name
    assert check_scale_consistency([g1.kernel_name, r1.kernel_name]) == []
    assert check_scale_consistency([g1.kernel_name, r2.kernel_name])  # producer/reducer mismatch
    assert make_gemm(7168, 2048, REF_SCALE, "dropped").kernel_name == g1.kernel_name

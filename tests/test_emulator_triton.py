"""gfx950 emulator acceptance: Triton kernels compiled for gfx950 (Triton's AMD backend is
tested on MI300/MI355 hardware upstream) run on the emulator and match torch.

The MFMA lane layouts, the scaled-MFMA scale layout, the buffer/global->LDS DMA
addressing, DPP reductions and the fp8 conversions are all confirmed here: a wrong one
gives O(1) errors, not rounding noise.
"""
from __future__ import annotations

import pytest

from tests.emulator_support import require_llvm


@pytest.fixture(autouse=True)
def _llvm():
    require_llvm()


@pytest.mark.parametrize(
    ("case", "opcode"),
    [
        ("fp8_gemm_16x16x128", "v_mfma_f32_16x16x128_f8f6f4"),
        ("fp8_gemm_32x32x64", "v_mfma_f32_32x32x64_f8f6f4"),
        ("bf8_gemm_16x16x128", "v_mfma_f32_16x16x128_f8f6f4"),  # cbsz:1 blgp:1 (e5m2 operands)
        ("bf16_gemm", "v_mfma_f32_32x32x16_bf16"),
        ("mxfp8_dot_scaled", "v_mfma_scale_f32_32x32x64_f8f6f4"),
        ("row_reduce", "v_add_f32_dpp"),
        ("fp8_cast", "v_cvt_scalef32_pk_fp8_f32"),
        ("fp8_upcast", "v_cvt_scalef32_pk_f32_fp8"),
    ],
)
def test_triton_kernel_matches_torch(case, opcode):
    from verifiers.gfx950.emulator.validation.triton_cases import run_case

    r = run_case(case)
    assert r.report.opcode_counts.get(opcode, 0) > 0, f"{case} no longer exercises {opcode}"
    assert not r.report.hazards, r.report.hazards
    assert r.ok, f"{case}: max error {r.max_error} above {r.bound}"
    if r.exact:
        assert all(v == 0 for v in r.max_error.values())


def test_fp8_gemm_other_shapes_and_seeds():
    """Several workgroups in both grid directions, more K iterations, another seed."""
    from verifiers.gfx950.emulator.validation.triton_cases import run_case

    for case in ("fp8_gemm_16x16x128", "fp8_gemm_32x32x64"):
        r = run_case(case, {"M": 192, "N": 128, "K": 512}, seed=3)
        assert r.ok and not r.report.hazards, (case, r.max_error)


def test_scaled_mfma_scales_are_applied_per_32_k_block():
    """Another shape and seed (3 K steps, 2 N tiles): the e8m0 scale of every 32-wide K
    block of every row and column is applied (the reference scales each block)."""
    from verifiers.gfx950.emulator.validation.triton_cases import run_case

    r = run_case("mxfp8_dot_scaled", {"M": 64, "N": 128, "K": 384}, seed=5)
    assert r.ok, r.max_error

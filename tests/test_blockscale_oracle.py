"""Oracle, the plain-torch and E8M0 arms, perturbations and the problem spec (CPU)."""
from __future__ import annotations

import re

import pytest
import torch

from skill_kernels.flydsl_fp8_blockscale_gemm import cublas_baseline, ck_baseline, e8m0_scaled, torch_dequant
from skill_kernels.flydsl_fp8_blockscale_gemm.inputs import PERTURBATIONS, make_inputs, make_outputs
from skill_kernels.flydsl_fp8_blockscale_gemm.oracle import oracle
from skill_kernels.flydsl_fp8_blockscale_gemm.parity import parity_figures
from skill_kernels.flydsl_fp8_blockscale_gemm.arms import FLYDSL_KERNEL, TWIN_KERNEL
from skill_kernels.flydsl_fp8_blockscale_gemm.problem import PROBLEM
from verifiers.problem import Problem, load_problem

DIMS = {"M": 256, "N": 384, "K": 768}


@pytest.fixture(scope="module")
def case():
    x = make_inputs(DIMS, 0)
    return x, oracle(x, DIMS)["c"]


def _fp64_reference(x: dict) -> torch.Tensor:
    m, k = x["a"].shape
    n = x["b"].shape[0]
    a = x["a"].double() * x["a_scale"].double().repeat_interleave(128, 1)
    b = x["b"].double() * x["b_scale"].double().repeat_interleave(128, 0).repeat_interleave(128, 1)
    return a @ b.t()


def _strict_pass(fig: dict) -> bool:
    p = PROBLEM.parity
    return (fig["mismatches"] <= p.max_mismatch and fig["cosine"] >= p.min_cosine
            and fig["rel_l2"] <= p.max_rel_l2 and fig["nonfinite"] == 0)


def test_oracle_matches_fp64_to_bf16_rounding(case):
    x, c = case
    assert c.dtype == torch.bfloat16 and c.shape == (DIMS["M"], DIMS["N"])
    ref = _fp64_reference(x)
    # bf16 keeps 8 significant bits: half a step of rounding (2**-8 relative), plus fp32
    # accumulation error (absolute, ~1e-7 of the summed magnitudes) near zero
    err = (c.double() - ref).abs()
    assert torch.all(err <= ref.abs() * 2.0**-8 + 1e-4), float((err - ref.abs() * 2.0**-8).max())
    assert _strict_pass(parity_figures(c, ref.to(torch.bfloat16)))


def test_oracle_is_immune_to_tf32(case):
    x, c = case
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        again = oracle(x, DIMS)["c"]
    finally:
        torch.set_float32_matmul_precision(previous)
    assert torch.equal(again, c) and torch.get_float32_matmul_precision() == previous


def test_torch_dequant_arm_equals_the_oracle_in_place(case):
    x, c = case
    out = make_outputs(DIMS)
    out["c"].fill_(float("nan"))
    ptr = out["c"].data_ptr()
    launch = torch_dequant.build(x, out)
    out["c"].fill_(float("nan"))
    launch()
    assert out["c"].data_ptr() == ptr and torch.equal(out["c"], c)


def test_e8m0_arm_fails_strict_parity_with_most_elements_out(case):
    x, c = case
    out = make_outputs(DIMS)
    e8m0_scaled.build(x, out)()
    fig = parity_figures(out["c"], c, PROBLEM.parity.rtol, PROBLEM.parity.atol)
    assert not _strict_pass(fig)
    assert fig["mismatch_fraction"] > 0.8, fig
    assert fig["cosine"] < 0.99 and fig["rel_l2"] > 0.1, fig
    assert fig["nonfinite"] == 0  # wrong, not broken: exactly the silent failure the card warns of


def test_perturbations_keep_inputs_valid_and_move_the_output(case):
    x, c = case
    before = {k: v.clone() for k, v in x.items()}
    flipped = PERTURBATIONS["a_sign_flip"](x)
    assert torch.equal(oracle(flipped, DIMS)["c"], -c)
    up = oracle(PERTURBATIONS["a_scales_x3"](x), DIMS)["c"]
    torch.testing.assert_close(up.float(), 3 * c.float(), rtol=2**-7, atol=1e-3)
    tiny = PERTURBATIONS["a_scales_x0.01"](x)
    torch.testing.assert_close(tiny["a_scale_t"], tiny["a_scale"].t())
    fig = parity_figures(oracle(tiny, DIMS)["c"], (0.01 * c.double()).to(torch.bfloat16))
    assert fig["cosine"] > 0.9999
    for k, v in before.items():  # perturbations never write into their input
        assert torch.equal(x[k].view(torch.uint8) if v.element_size() == 1 else x[k],
                           v.view(torch.uint8) if v.element_size() == 1 else v), k


def test_gpu_baselines_refuse_the_cpu_clearly(case):
    x, _ = case
    with pytest.raises(cublas_baseline.PlatformError, match="NVIDIA"):
        cublas_baseline.build(x, make_outputs(DIMS))
    with pytest.raises(ck_baseline.PlatformError, match="ROCm"):
        ck_baseline.build(x, make_outputs(DIMS))


def test_cublas_operands_pad_the_weight_scale_to_four_k_blocks(case):
    x, _ = case
    a, b_t, sa, sb = cublas_baseline.scaled_mm_operands(x)
    m, k = x["a"].shape
    n = x["b"].shape[0]
    assert b_t.shape == (k, n) and b_t.stride() == (1, k)
    assert sa.shape == (m, k // 128) and sa.stride() == (1, m)  # column major, no copy
    assert sa.data_ptr() == x["a_scale_t"].data_ptr()
    l4 = 8  # K/128 = 6 -> 8
    assert sb.shape == (l4, n // 128) and sb.stride() == (1, l4)
    torch.testing.assert_close(sb[:6].t(), x["b_scale"])
    assert torch.all(sb[6:] == 0)


def test_problem_spec_is_complete():
    assert isinstance(PROBLEM, Problem) and load_problem("flydsl_fp8_blockscale_gemm") is PROBLEM
    assert PROBLEM.card_id == PROBLEM.name == "flydsl_fp8_blockscale_gemm"
    assert PROBLEM.dim_names == ("M", "N", "K")
    assert [tuple(s.values()) for s in PROBLEM.shapes] == [
        (4096, 65536, 1536), (4096, 2048, 7168), (16384, 1536, 7168), (16384, 7168, 768)]
    assert all(s["M"] % 128 == 0 and s["N"] % 128 == 0 and s["K"] % 128 == 0 for s in PROBLEM.smoke_shapes)
    p = PROBLEM.parity
    assert (p.mode, p.rtol, p.atol, p.max_mismatch) == ("strict", 1e-2, 1e-2, 0)
    assert p.min_cosine >= 0.999 and p.max_rel_l2 is not None
    d = {"M": 4096, "N": 2048, "K": 7168}
    assert PROBLEM.flops(d) == 2 * 4096 * 2048 * 7168
    assert PROBLEM.min_bytes(d) == 4096 * 7168 + 2048 * 7168 + 4 * (4096 * 56 + 16 * 56) + 2 * 4096 * 2048
    assert set(PROBLEM.perturbations) == {"a_scales_x3", "a_scales_x0.01", "a_sign_flip"}
    assert all(s["N"] % 128 == 0 and s["K"] % 128 == 0 for s in PROBLEM.hidden_shapes)
    assert any(s["M"] % 128 for s in PROBLEM.hidden_shapes)  # a ragged M tile is checked
    # weights are static *together*: b and b_shuffled must never disagree between rounds
    assert set(PROBLEM.static_inputs) == {"b", "b_shuffled", "b_scale"}


def test_arms_platforms_roles_and_signatures():
    arms = PROBLEM.arms
    assert arms["cublas_blockscale"].role == "baseline" and arms["cublas_blockscale"].platforms == ("cuda",)
    assert arms["ck_blockscale"].role == "baseline" and arms["ck_blockscale"].platforms == ("rocm",)
    assert set(arms["triton_twin"].platforms) == {"cuda", "rocm", "cpu"}
    assert arms["flydsl_4wave"].platforms == ("rocm",) and arms["flydsl_4wave"].build == "flydsl_gemm:build"
    assert set(arms["torch_dequant"].platforms) == {"cuda", "rocm", "cpu"}
    assert arms["e8m0_scaled"].role == "ablation"
    for arm in arms.values():
        for rx in arm.signature.required + arm.signature.forbidden:
            re.compile(rx)
        if arm.name != "triton_twin":
            assert not any(re.search(rx, TWIN_KERNEL) for rx in arm.signature.required
                           if arm.name in ("flydsl_4wave", "flydsl_4wave_xcd0")), arm.name
    twin = arms["triton_twin"].signature
    assert any(re.search(rx, TWIN_KERNEL) for rx in twin.required)
    assert not any(re.search(rx, TWIN_KERNEL) for rx in twin.forbidden)
    cublas = arms["cublas_blockscale"].signature
    hopper_names = ["sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128_cublas", "nvjet_sm90_qqtst_128x128_64x4"]
    assert all(any(re.search(rx, k) for rx in cublas.required) for k in hopper_names)
    assert any(re.search(rx, TWIN_KERNEL) for rx in cublas.forbidden)  # a silent twin fallback is caught
    # a baseline's required pattern must not match an honest candidate's kernels (the verifier
    # forbids candidates to run the baseline's kernels)
    for base in ("cublas_blockscale", "ck_blockscale"):
        for rx in arms[base].signature.required:
            assert not re.search(rx, TWIN_KERNEL) and not re.search(rx, FLYDSL_KERNEL), (base, rx)
    assert any(re.search(rx, "kernel_gemm_xdl_cshuffle_v3_ab_scale_blockscale") for rx in arms["ck_blockscale"].signature.required)
    # every builder module resolves (the heavy ones import lazily)
    for name in ("cublas_blockscale", "ck_blockscale", "torch_dequant", "e8m0_scaled"):
        assert callable(PROBLEM.resolve_builder(arms[name].build))

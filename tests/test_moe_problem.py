"""The verifier problem for the MoE stage-2 fp8-partial card: dims, shapes, arms,
runtime signatures and the scored segment."""
from __future__ import annotations

import re

import torch

from verifiers.problem import load_problem

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import fp8_format, naming, oracle

NAME = "flydsl_prefill_moe_stage2_fp8partial"
BASE = ("moe2_gemm_bf16", "moe_reduce_inbf16")
FP8 = ("moe2_gemm_pf8_s3a378034", "moe_reduce_infp8_s3a378034")
FLY_STORE = ("moe2_store_pf8_s3a378034", "moe_reduce_infp8_s3a378034")


def _satisfies(spec, names) -> bool:
    return all(any(re.search(p, n) for n in names) for p in spec.required) and not any(
        re.search(p, n) for p in spec.forbidden for n in names
    ) and (spec.launches_per_iter in (None, len(names)))


def test_problem_loads_with_the_card_shapes():
    p = load_problem(NAME)
    assert p.card_id == NAME and p.dim_names == ("M", "N", "K", "E", "top_k")
    shapes = [dict(s) for s in p.shapes]
    assert {"M": 16384, "N": 2880, "K": 2880, "E": 128, "top_k": 4} in shapes
    assert {"M": 16384, "N": 7168, "K": 2048, "E": 256, "top_k": 8} in shapes
    assert p.parity.mode == "relaxed" and p.parity.max_rel_l2 is not None  # cosine alone is scale-blind
    for name, arm in p.arms.items():
        assert callable(p.resolve_builder(arm.build)), name


def test_signatures_tell_the_arms_apart():
    p = load_problem(NAME)
    base_sig, fp8_sig = p.arm("triton_bf16").signature, p.arm("triton_fp8").signature
    assert _satisfies(base_sig, BASE) and not _satisfies(base_sig, FP8)
    assert _satisfies(fp8_sig, FP8) and not _satisfies(fp8_sig, BASE)
    assert _satisfies(p.candidate_signature, FP8) and _satisfies(p.candidate_signature, FLY_STORE)
    # only one side switched to fp8 is a plumbing failure, never a valid candidate
    assert not _satisfies(fp8_sig, ("moe2_gemm_bf16", FP8[1]))
    assert not _satisfies(fp8_sig, (FP8[0], "moe_reduce_inbf16"))
    assert p.arm("flydsl_fp8").platforms == ("rocm",)
    epi = p.arm("flydsl_fp8_epilogue").signature
    assert _satisfies(epi, ("moe2_gemm_accf32", FLY_STORE[0], FLY_STORE[1]))
    assert not _satisfies(epi, FP8)


def test_segment_covers_both_kernels_of_every_arm():
    p = load_problem(NAME)
    for names in (BASE, FP8, FLY_STORE, ("moe2_gemm_accf32", *FLY_STORE)):
        for n in names:
            assert any(re.search(k, n) for k in p.segment.kernels), n
        for k in p.segment.kernels:
            assert any(re.search(k, n) for n in names), (k, names)
        assert not any(re.search(p.segment.flush_pattern, n) for n in names)


def test_perturbations_keep_inputs_valid():
    p = load_problem(NAME)
    dims = dict(p.smoke_shapes[0])
    inputs = p.make_inputs(dims, 0, "cpu")
    out = p.oracle(inputs, dims)["out"]
    for name, f in p.perturbations.items():
        new = f(inputs)
        assert oracle.dims_of(new) == dims, name
    assert torch.equal(p.oracle(p.perturbations["sign_flip"](inputs), dims)["out"], -out)


def test_physical_bounds():
    p = load_problem(NAME)
    d = dict(p.shapes[1])
    assert p.flops(d) == 2 * 16384 * 8 * 7168 * 2048
    assert 0 < p.min_bytes(d) < oracle.segment_min_bytes(d) + oracle.partial_bytes(d, fp8=True)


def test_scale_tags_round_trip():
    for s in (0.0007, 1.0, 123.456, 2.0**-20):
        tag = naming.scale_hex(s)
        assert naming.scale_from_hex(tag) == fp8_format.as_f32(s)
        assert re.fullmatch(naming.REDUCE_INFP8, naming.reduce_name(True, s))
        assert re.search(naming.GEMM_PF8, naming.gemm_name(True, s))


def test_the_full_emulated_arm_is_the_fused_stage2_at_the_cards_first_shape():
    """``check-kernel --emulate --full`` runs the fused FlyDSL stage 2 (cshuffle_pf8 GEMM + infp8
    reduce, both fp8, one calibrated scale) at the card's first real shape, against the torch
    baseline (a CPU arm: the emulated run's relative rules need one), with a budget past
    launch's default (418 M wave-instructions there). Importing the targets is cheap (no
    torch, no flydsl), so this runs without the toolchain."""
    from verifiers.gfx950.targets import load_targets

    p = load_problem(NAME)
    (arm,) = load_targets(NAME).full
    assert dict(arm.dims) == dict(p.shapes[0]) == {"M": 16384, "N": 2880, "K": 2880, "E": 128, "top_k": 4}
    assert arm.arm == "flydsl_fp8" and arm.expect_parity and arm.build == "flydsl_arms:build_fused_emulated"
    assert arm.baseline == "torch_bf16" and "cpu" in p.arm(arm.baseline).platforms
    assert {r: dict(k.config) for r, k in arm.kernels.items()} == {
        "gemm": {"kernel": "gemm", "N": 2880, "K": 2880, "fp8": True, "scale_factor": 1.0, "scale_mode": "scaled"},
        "reduce": {"kernel": "reduce", "top_k": 4, "N": 2880, "fp8": True, "scale_factor": 1.0},
    }
    assert arm.budget.max_instructions >= 600_000_000 and arm.budget.max_seconds >= 1800
    # never an emulation-sized verify shape: the verifier's emulated platform does not offer it
    from verifiers.gfx950.emulator.verifier_arms import declared_dims

    assert dict(arm.dims) not in declared_dims(NAME)

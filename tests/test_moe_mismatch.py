"""A producer/reducer scale mismatch cannot pass silently: a gross one fails parity and
the scale-tag check, a subtle one passes parity and is still caught by the tags."""
from __future__ import annotations

import pytest
import torch

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import mismatched_scale, naming, oracle, triton_arms
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.problem import PARITY, SMOKE_SHAPES, check_kernel_names


def test_consistency_rule_on_names():
    ok = ("moe2_gemm_pf8_s3a378034", "moe_reduce_infp8_s3a378034")
    assert naming.check_scale_consistency(ok) == []
    assert naming.check_scale_consistency(("moe2_gemm_bf16", "moe_reduce_inbf16")) == []
    assert naming.check_scale_consistency(("moe2_gemm_cshuffle_pf8_s3a378034", "moe_reduce_infp8_s3a378034")) == []
    bad = naming.check_scale_consistency(("moe2_gemm_pf8_s3a378034", "moe_reduce_infp8_s3ab78034"))
    assert len(bad) == 1 and "differ" in bad[0] and "0.0007" in bad[0] and "0.0014" in bad[0]
    assert "without any fp8-partial producer" in naming.check_scale_consistency(("moe2_gemm_bf16", "moe_reduce_infp8_s3a378034"))[0]
    assert "without any infp8 reducer" in naming.check_scale_consistency(("moe2_gemm_pf8_s3a378034", "moe_reduce_inbf16"))[0]


@pytest.fixture(scope="module")
def runs():
    from verifiers.judge.metrics import output_metrics
    from verifiers.judge.parity import output_eps, parity_failures, rules_from

    dims = dict(SMOKE_SHAPES[0])
    inputs = oracle.make_inputs(dims, 3)
    ref = oracle.oracle(inputs, dims)["out"]
    rules = rules_from(PARITY)
    eps = output_eps(ref.to(torch.bfloat16))
    results = {}
    for name, build in (
        ("baseline", triton_arms.build_bf16),
        ("fp8", triton_arms.build_fp8),
        ("gross", mismatched_scale.build),
        ("subtle", mismatched_scale.build_subtle),
    ):
        outs = oracle.make_outputs(dims)
        launch = build(inputs, outs)
        launch()
        results[name] = (launch, output_metrics(outs["out"], ref, rules.rtol, rules.atol))
    base = results["baseline"][1]
    return {n: (l, m, parity_failures(rules, m, base, eps)) for n, (l, m) in results.items()}


def test_the_honest_fp8_arm_passes_both_checks(runs):
    launch, _, failures = runs["fp8"]
    assert failures == [] and check_kernel_names(launch.kernel_names) == []


def test_a_reducer_with_twice_the_scale_fails_parity_and_the_tags(runs):
    launch, m, failures = runs["gross"]
    assert launch.reducer_scale == pytest.approx(2 * launch.producer_scale)
    assert m.cosine > 0.999  # cosine alone is blind to a uniformly scaled output ...
    assert m.norm_ratio == pytest.approx(0.5, rel=0.02)
    assert any("relative L2" in f for f in failures)  # ... the relative-L2 bound is not
    assert check_kernel_names(launch.kernel_names)


def test_a_subtle_mismatch_passes_parity_but_not_the_tags(runs):
    launch, m, failures = runs["subtle"]
    assert failures == []  # inside every parity bound
    errors = check_kernel_names(launch.kernel_names)
    assert len(errors) == 1 and "differ" in errors[0]
    prod, red = launch.kernel_names
    assert prod.rsplit("_s", 1)[1] != red.rsplit("_s", 1)[1]

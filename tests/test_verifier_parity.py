"""Parity stage: every cheat that can be staged on CPU is caught, honest rewrites pass.

The candidates run in real arm processes (forked by the zygote); the judge's parity code
runs in the test process (``LocalJudge``), comparing what it reads from shared memory."""
from __future__ import annotations

import sys

import pytest
import torch
from verifier_support import PROBLEM_FILE, LocalJudge, failures

from verifiers.judge import parity
from verifiers.judge import tensors
from verifiers.problem import ParitySpec, load_problem

PROBLEM = load_problem(PROBLEM_FILE)
make_problem = sys.modules[PROBLEM.make_inputs.__module__].make_problem


@pytest.fixture(scope="module")
def judge():
    j = LocalJudge()
    yield j
    j.close()


def check(judge, name, problem=None, seeds=(0, 1), secret=None, rules=None):
    return judge.parity(name, problem=problem, seeds=seeds, secret=secret, rules=rules)


def test_honest_rewrite_passes_with_both_arms_recorded(judge):
    result = check(judge, "honest_bmm", seeds=(0, 1, 2, 3), secret=987654)
    assert result.status == "PASS", failures(result)
    # 4 visible seeds + the secret seed + 3 perturbations of the secret seed
    assert len(result.cases) == 8
    secret_cases = [c for c in result.cases if c.secret]
    assert len(secret_cases) == 4 and all(c.seed is None for c in secret_cases)
    assert {c.perturbation for c in result.cases} == {None, "a_x3", "a_x0.01", "b_neg"}
    out = result.cases[0].outputs[0]
    assert out.candidate.mismatches == 0 and out.baseline.mismatches == 0
    assert out.candidate.rel_l2 < 1e-6 and out.baseline.rel_l2 < 1e-6
    assert out.runs_agree


def test_reading_the_references_leftover_output_fails(judge):
    # the baseline and the oracle live in other processes: nothing right to steal here
    result = check(judge, "leftover_reader")
    assert result.status == "FAIL"
    first = result.cases[0].outputs[0]
    assert first.candidate.nonfinite > 0 or first.candidate.mismatches > 0
    assert "candidate run 1" in failures(result)


def test_constant_output_inside_atol_fails_on_rel_l2_and_cosine(judge):
    tiny = make_problem(scale=0.01, parity=ParitySpec(mode="strict", rtol=1e-2, atol=1e-2))
    result = check(judge, "constant_zero", problem=tiny)
    assert result.status == "FAIL"
    out = result.cases[0].outputs[0]
    assert out.candidate.mismatches == 0  # allclose alone would have passed it
    assert out.candidate.rel_l2 == pytest.approx(1.0)
    text = failures(result)
    assert "cosine" in text and "relative L2" in text


def test_writing_into_the_inputs_fails(judge):
    result = check(judge, "input_writer")
    assert result.status == "FAIL"
    assert "modified its inputs ['b']" in failures(result)


def test_caching_by_shape_fails_on_fresh_inputs_per_seed(judge):
    result = check(judge, "cache_by_shape", seeds=(0, 1))
    assert result.cases[0].status == "PASS"  # first seed computed honestly...
    assert result.cases[1].status == "FAIL"  # ...the second gets the first seed's answer
    assert "elements outside" in failures(result)


def test_side_thread_finishing_after_return_fails(judge):
    result = check(judge, "side_thread")
    assert result.status == "FAIL"
    assert "changed after the arm reported the call done" in failures(result)


def test_a_tensor_subclass_handed_back_instead_of_written_fails(judge):
    # the judge reads its own shared memory: a replaced dict entry is never seen
    result = check(judge, "subclass_output")
    assert result.status == "FAIL" and "NaN" in failures(result)


def test_what_counts_is_the_memory_not_the_arms_objects(judge):
    # swapping the class of the arm's own view changes nothing the judge reads
    assert check(judge, "subclass_class_swap").status == "PASS"


def test_precision_downgrade_fails_even_inside_tolerance(judge):
    loose = make_problem(parity=ParitySpec(mode="strict", rtol=0.2, atol=0.2, min_cosine=0.99))
    result = check(judge, "precision_bf16", problem=loose)
    assert result.status == "FAIL"
    out = result.cases[0].outputs[0]
    assert out.candidate.mismatches == 0 and out.candidate.cosine > 0.9999
    assert "precision downgrade" in failures(result)


def test_scaled_output_passes_cosine_but_fails(judge):
    result = check(judge, "scaled_2y")
    assert result.status == "FAIL"
    out = result.cases[0].outputs[0]
    assert out.candidate.cosine > 0.999999  # a cosine-only harness would accept 2*y
    assert out.candidate.norm_ratio == pytest.approx(2.0)
    assert "elements outside" in failures(result)


def test_nondeterministic_runs_fail_unless_a_tolerance_is_declared(judge):
    result = check(judge, "nondeterministic", seeds=(0,))
    assert result.status == "FAIL" and "disagree" in failures(result)
    rules = parity.rules_from(PROBLEM.parity, determinism_atol=1e-3)
    relaxed = check(judge, "nondeterministic", seeds=(0,), rules=rules)
    assert "disagree" not in failures(relaxed)


def test_nan_output_fails(judge):
    result = check(judge, "writes_nan", seeds=(0,))
    assert result.status == "FAIL" and "NaN/Inf" in failures(result)


def test_unwritten_elements_fail(judge):
    result = check(judge, "unwritten_row", seeds=(0,))
    assert result.status == "FAIL" and "NaN" in failures(result)


def test_degenerate_oracle_is_an_error_not_a_pass(judge):
    flat = make_problem(constant=True)
    result = check(judge, "honest_bmm", problem=flat, seeds=(0,))
    assert result.status == "ERROR"
    assert "degenerate" in result.reason


def test_relaxed_mode_bounds_are_relative_to_the_baseline(judge):
    spec = ParitySpec(mode="relaxed", max_cosine_drop=1e-3, max_rel_l2_ratio=1e5, min_cosine=0.999)
    relaxed = make_problem(parity=spec)
    ok = check(judge, "precision_bf16", problem=relaxed, seeds=(0,))
    assert ok.status == "PASS", failures(ok)
    strict_ratio = make_problem(parity=ParitySpec(mode="relaxed", max_rel_l2_ratio=10.0))
    bad = check(judge, "precision_bf16", problem=strict_ratio, seeds=(0,))
    assert bad.status == "FAIL" and "x max(baseline" in failures(bad)


def test_integer_outputs_use_two_sentinels_to_find_unwritten_elements():
    first = torch.empty(4, dtype=torch.int32)
    second = torch.empty(4, dtype=torch.int32)
    tensors.poison({"x": first}, 0)
    tensors.poison({"x": second}, 1)
    first[:2] = 7
    second[:2] = 7
    assert tensors.count_unwritten_pair(first, second) == 2
    flags = torch.empty(3, dtype=torch.bool)
    tensors.poison({"f": flags}, 0)
    assert bool(flags.all())


def test_poison_fills_fp8_and_bf16_with_nan():
    for dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float16):
        t = torch.zeros(8, dtype=dtype)
        tensors.poison({"t": t}, 0)
        assert tensors.count_nan(t) == 8


def test_precision_downgrade_on_bf16_outputs_fails_the_relative_l2_rule():
    """Dequantising to bf16 and running a bf16 GEMM: ~3e-3 relative L2 on the card's bf16
    output, 3.5-4.5x the baseline's (cuBLAS' fp8 MMA ~9e-4 on the H200; 0 for the exact
    torch arm here). A floor of eps(bf16) = 7.8e-3 let it through; eps/64 does not, and an
    honest reordering of the fp32 sums (~5e-5) still passes."""
    from skill_kernels.flydsl_fp8_blockscale_gemm.problem import PROBLEM as BLOCKSCALE
    from skill_kernels.flydsl_fp8_blockscale_gemm.quant import dequantize_activations, dequantize_weights

    from verifiers.judge.metrics import output_metrics

    dims = {"M": 256, "N": 384, "K": 768}
    x = BLOCKSCALE.make_inputs(dims, 0, "cpu")
    oracle = BLOCKSCALE.oracle(x, dims)["c"]
    a, b = dequantize_activations(x["a"], x["a_scale"]), dequantize_weights(x["b"], x["b_scale"])
    downgrade = (a.bfloat16() @ b.bfloat16().t()).bfloat16()
    reordered = sum(a[:, i:i + 128] @ b[:, i:i + 128].t() for i in range(0, dims["K"], 128)).bfloat16()
    rules = parity.rules_from(BLOCKSCALE.parity).model_copy(update={"max_mismatch": 10**9, "max_rel_l2": None})
    eps = parity.output_eps(oracle)
    fig = {name: output_metrics(t, oracle, rules.rtol, rules.atol) for name, t in
           (("exact", oracle.clone()), ("downgrade", downgrade), ("reordered", reordered))}
    cublas_like = fig["exact"].model_copy(update={"rel_l2": 9.0e-4})
    assert 2.5e-3 < fig["downgrade"].rel_l2 < 4.5e-3 and fig["reordered"].rel_l2 < 1e-4
    for base in (fig["exact"], cublas_like):
        assert any("precision downgrade" in f for f in parity.parity_failures(rules, fig["downgrade"], base, eps))
        assert parity.parity_failures(rules, fig["reordered"], base, eps) == []

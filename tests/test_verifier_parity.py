"""Parity stage: every cheat that can be staged on CPU is caught, honest rewrites pass."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from verifiers import parity, tensors
from verifiers.device import open_device
from verifiers.problem import ParitySpec, load_problem

FIXTURES = Path(__file__).parent / "fixtures"
PROBLEM = load_problem(str(FIXTURES / "cpu_matmul_problem.py"))
make_problem = sys.modules[PROBLEM.make_inputs.__module__].make_problem
DEVICE = open_device("cpu")
SHAPE = ("64x48x32", {"M": 64, "N": 48, "K": 32})


def candidate(name: str):
    path = FIXTURES / "candidates" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_parity_cand_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build


def check(cand, problem=PROBLEM, seeds=(0, 1), secret=None, rules=None):
    rules = rules or parity.rules_from(problem.parity)
    baseline = problem.resolve_builder(problem.arm("torch_mm").build)
    return parity.run_parity(problem, [SHAPE], cand, baseline, DEVICE, rules, list(seeds), secret, settle_s=0.02)


def failures(result) -> str:
    return " | ".join(f for c in result.cases for f in c.failures)


def test_honest_rewrite_passes_with_both_arms_recorded():
    result = check(candidate("honest_bmm"), seeds=(0, 1, 2, 3), secret=987654)
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


def test_reading_the_references_leftover_output_fails():
    result = check(candidate("leftover_reader"))
    assert result.status == "FAIL"
    first = result.cases[0].outputs[0]
    # run 1 happens before the reference exists: there is nothing right to steal yet
    assert first.candidate.nonfinite > 0 or first.candidate.mismatches > 0
    assert "candidate run 1" in failures(result)


def test_constant_output_inside_atol_fails_on_rel_l2_and_cosine():
    tiny = make_problem(scale=0.01, parity=ParitySpec(mode="strict", rtol=1e-2, atol=1e-2))
    result = check(candidate("constant_zero"), problem=tiny)
    assert result.status == "FAIL"
    out = result.cases[0].outputs[0]
    assert out.candidate.mismatches == 0  # allclose alone would have passed it
    assert out.candidate.rel_l2 == pytest.approx(1.0)
    text = failures(result)
    assert "cosine" in text and "relative L2" in text


def test_writing_into_the_inputs_fails():
    result = check(candidate("input_writer"))
    assert result.status == "FAIL"
    assert "modified its inputs ['b']" in failures(result)


def test_caching_by_shape_fails_on_fresh_inputs_per_seed():
    result = check(candidate("cache_by_shape"), seeds=(0, 1))
    assert result.cases[0].status == "PASS"  # first seed computed honestly...
    assert result.cases[1].status == "FAIL"  # ...the second gets the first seed's answer
    assert "elements outside" in failures(result)


def test_side_thread_finishing_after_return_fails():
    result = check(candidate("side_thread"))
    assert result.status == "FAIL"
    text = failures(result)
    assert "threads running after it returned" in text or "changed after launch returned" in text


@pytest.mark.parametrize("name", ["subclass_output", "subclass_class_swap"])
def test_tensor_subclass_outputs_fail(name):
    result = check(candidate(name))
    assert result.status == "FAIL"
    text = failures(result)
    assert "plain torch.Tensor" in text or "replaced outputs['c']" in text


def test_precision_downgrade_fails_even_inside_tolerance():
    loose = make_problem(parity=ParitySpec(mode="strict", rtol=0.2, atol=0.2, min_cosine=0.99))
    result = check(candidate("precision_bf16"), problem=loose)
    assert result.status == "FAIL"
    out = result.cases[0].outputs[0]
    assert out.candidate.mismatches == 0 and out.candidate.cosine > 0.9999
    assert "precision downgrade" in failures(result)


def test_scaled_output_passes_cosine_but_fails():
    result = check(candidate("scaled_2y"))
    assert result.status == "FAIL"
    out = result.cases[0].outputs[0]
    assert out.candidate.cosine > 0.999999  # a cosine-only harness would accept 2*y
    assert out.candidate.norm_ratio == pytest.approx(2.0)
    assert "elements outside" in failures(result)


def test_nondeterministic_runs_fail_unless_a_tolerance_is_declared():
    result = check(candidate("nondeterministic"), seeds=(0,))
    assert result.status == "FAIL" and "disagree" in failures(result)
    rules = parity.rules_from(PROBLEM.parity, determinism_atol=1e-3)
    relaxed = check(candidate("nondeterministic"), seeds=(0,), rules=rules)
    assert "disagree" not in failures(relaxed)


def test_nan_output_fails():
    def build(inputs, outputs):
        a, b, c = inputs["a"], inputs["b"], outputs["c"]

        def launch():
            torch.mm(a, b, out=c)
            c[3, 3] = float("nan")

        return launch

    result = check(build, seeds=(0,))
    assert result.status == "FAIL" and "NaN/Inf" in failures(result)


def test_unwritten_elements_fail():
    def build(inputs, outputs):
        a, b, c = inputs["a"], inputs["b"], outputs["c"]
        return lambda: c[:-1].copy_(torch.mm(a, b)[:-1])  # last row never written

    result = check(build, seeds=(0,))
    assert result.status == "FAIL" and "NaN" in failures(result)


def test_degenerate_oracle_is_an_error_not_a_pass():
    flat = make_problem(constant=True)
    result = check(candidate("honest_bmm"), problem=flat, seeds=(0,))
    assert result.status == "ERROR"
    assert "degenerate" in result.reason


def test_relaxed_mode_bounds_are_relative_to_the_baseline():
    spec = ParitySpec(mode="relaxed", max_cosine_drop=1e-3, max_rel_l2_ratio=1e5, min_cosine=0.999)
    relaxed = make_problem(parity=spec)
    ok = check(candidate("precision_bf16"), problem=relaxed, seeds=(0,))
    assert ok.status == "PASS", failures(ok)
    strict_ratio = make_problem(parity=ParitySpec(mode="relaxed", max_rel_l2_ratio=10.0))
    bad = check(candidate("precision_bf16"), problem=strict_ratio, seeds=(0,))
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

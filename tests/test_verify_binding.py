"""The card's verifier binding decides the baseline per platform (issue 24, item 1): the
judge's choice, unit by unit; the front ends pass the binding (tests/test_verify_loop_cards.py
runs them end to end)."""
from __future__ import annotations

import pytest

from skill_server.service.facade import SkillService
from verifiers.judge.process import pick_baseline
from verifiers.problem import load_problem

BLOCKSCALE = "flydsl_fp8_blockscale_gemm"


@pytest.fixture(scope="module")
def problem():
    return load_problem(BLOCKSCALE)


def test_the_binding_names_the_baseline_for_the_platform(problem):
    binding = SkillService(check_interval=3600.0).binding_of(BLOCKSCALE).baseline
    assert pick_baseline(problem, None, binding, "cpu").name == binding["cpu"] == "torch_dequant"
    assert pick_baseline(problem, None, binding, "rocm").name == "ck_blockscale"
    # the problem alone has no arm with the baseline role on CPU: without the binding, no baseline
    with pytest.raises(ValueError, match="no baseline arm for cpu"):
        pick_baseline(problem, None, {}, "cpu")


def test_an_explicit_baseline_overrides_the_binding(problem):
    assert pick_baseline(problem, "triton_twin", {"cpu": "torch_dequant"}, "cpu").name == "triton_twin"


def test_a_binding_without_the_platform_is_bad_input_naming_it(problem):
    with pytest.raises(ValueError, match="binding names no baseline arm for cpu.*--baseline"):
        pick_baseline(problem, None, {"rocm": "ck_blockscale"}, "cpu")
    with pytest.raises(ValueError, match="runs on \\['rocm'\\], not on cpu"):
        pick_baseline(problem, None, {"cpu": "ck_blockscale"}, "cpu")


@pytest.mark.parametrize("name", ["flydsl_fp8_blockscale_gemm", "flydsl_prefill_moe_stage2_fp8partial"])
def test_on_cpu_the_hidden_shapes_are_cpu_sized_and_gpus_keep_theirs(name):
    import math

    from verifiers.problem import for_platform

    problem = load_problem(name)

    def size(d):
        return math.prod(d[n] for n in problem.dim_names)

    cpu = for_platform(problem, "cpu")
    assert cpu.hidden_shapes == problem.cpu_hidden_shapes and cpu.hidden_shapes
    assert max(map(size, cpu.hidden_shapes)) <= max(map(size, problem.smoke_shapes)) < min(map(size, problem.hidden_shapes))
    for d in cpu.hidden_shapes:  # valid inputs for the problem
        problem.parse_shape(",".join(f"{n}={d[n]}" for n in problem.dim_names))
    assert for_platform(problem, "cuda").hidden_shapes == problem.hidden_shapes

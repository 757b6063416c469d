"""Timing stage on CPU: A/A control, a known slowdown, result caches, a cold baseline.

No absolute times are asserted: only verdicts and interval containment. Work sizes are large
next to the per-call overhead and the CPU timer is the process's CPU time, so a loaded
two-core box still gives stable per-round medians.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from verifiers import bounds, parity, stats, timing
from verifiers.device import Flusher, open_device
from verifiers.problem import load_problem

FIXTURES = Path(__file__).parent / "fixtures"
PROBLEM = load_problem(str(FIXTURES / "cpu_matmul_problem.py"))
RULES = parity.rules_from(PROBLEM.parity)


@pytest.fixture(scope="module")
def device():
    torch.set_num_threads(1)
    return open_device("cpu")


def run(device, baseline: str, candidate, shape: str, rounds: int = 9, min_calls: int = 5, **cfg):
    config = timing.TimingConfig(rounds=rounds, block_ms=10.0, min_calls_per_block=min_calls, **cfg)
    session = timing.TimingSession(
        PROBLEM, PROBLEM.parse_shape(shape), device, Flusher(device, 1 << 20), RULES, config, [101, 102, 103, 104]
    )
    base = PROBLEM.resolve_builder(PROBLEM.arm(baseline).build)
    cand = candidate if callable(candidate) else PROBLEM.resolve_builder(PROBLEM.arm(candidate).build)
    return timing.run_timing(session, base, cand, baseline, "candidate")


def test_aa_run_gives_no_difference(device):
    result = run(device, "torch_mm", "torch_mm", "192x192x192", rounds=7)
    assert result.status == "PASS", result.failures
    assert result.verdict == "NO_DIFFERENCE"
    assert result.aa is not None and [r.order for r in result.aa.rounds][:2] == ["ABBA", "BAAB"]
    assert result.ab.ci_low <= 1.0 + result.noise_floor


def test_arm_doing_the_work_one_and_a_half_times_is_slower_by_that_factor(device):
    result = run(device, "mm_x2", "mm_x3", "384x384x384")
    assert result.status == "PASS", result.failures
    assert result.verdict == "SLOWER"
    factor = 2.0 / 3.0  # speedup = baseline time / candidate time
    # the interval must contain the factor; 2 % slack covers the fixed per-call overhead
    # (Python call, output cache misses) that makes the true ratio slightly above 2/3
    assert result.ab.ci_low * 0.98 <= factor <= result.ab.ci_high * 1.02, (result.ab.ci_low, result.ab.ci_high)


def test_result_cache_keyed_by_pointer_is_caught_by_the_timed_rechecks(device):
    path = FIXTURES / "candidates" / "cache_by_pointer.py"
    spec = importlib.util.spec_from_file_location("_timing_cache_by_pointer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = run(device, "torch_mm", module.build, "64x64x64", rounds=5, min_calls=2)
    assert result.status == "FAIL"
    assert any("cached by pointer" in f for f in result.failures)


def test_cold_started_baseline_is_warmed_like_the_candidate(device):
    # a harness that timed the baseline once, cold, would report a large speedup here
    result = run(device, "mm_coldstart", "torch_mm", "192x192x192", rounds=7)
    assert result.status == "PASS", result.failures
    assert result.verdict == "NO_DIFFERENCE"
    assert all(w.calls >= 10 and w.elapsed_ms >= 25 for w in result.warmup)
    assert result.flush_bytes == 1 << 20 and result.rotating_sets == 3 and result.changing_inputs == ["a", "b"]


def test_bootstrap_interval_is_seeded_and_brackets_the_median():
    ratios = [1.02, 1.05, 1.03, 1.04, 1.06, 1.01, 1.05]
    a = stats.bootstrap_median_ci(ratios, 2000, seed=7)
    b = stats.bootstrap_median_ci(ratios, 2000, seed=7)
    assert a == b
    assert a[0] <= stats.median(ratios) <= a[1]


@pytest.mark.parametrize(
    "lo,hi,floor,verdict",
    [(1.06, 1.10, 0.05, "FASTER"), (1.04, 1.10, 0.05, "NO_DIFFERENCE"), (0.80, 0.94, 0.05, "SLOWER"),
     (0.98, 1.02, 0.01, "NO_DIFFERENCE")],
)
def test_verdict_against_the_noise_floor(lo, hi, floor, verdict):
    assert stats.decide(lo, hi, floor) == verdict


def test_aa_spread_sets_the_floor():
    assert stats.aa_spread(0.97, 1.01) == pytest.approx(0.03)
    assert stats.aa_spread(1.0, 1.0) == 0.0


def test_speedup_beyond_the_physical_bound_is_flagged():
    dims = {"M": 1024, "N": 1024, "K": 1024}
    b = bounds.physical_bound(PROBLEM, dims, peak_flops=1e12, bandwidth=1e11, bandwidth_source="declared", margin=0.2)
    assert b.bound_ms == pytest.approx(2 * 1024**3 / 1e12 * 1e3)
    assert bounds.check(b, 10.0).status == "ok"
    assert bounds.check(b, b.bound_ms * 0.9).status == "below_bound"
    assert bounds.check(b, b.bound_ms * 0.5).status == "impossible"

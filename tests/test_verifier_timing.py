"""Timing across arm processes on CPU: the A/A control, a known slowdown, a cold baseline,
a baseline that drifts once the candidate runs, calls shorter than the timer floor; and
the statistics underneath.

No absolute times are asserted: only verdicts and interval containment. The timed runs whose
assertions need a decided, undisturbed verdict are ``alone`` (tests/box_share.py): no other
pytest worker's test runs beside them; the A/A runs that accept a verdict the box's load
explains, and the tripled baseline (far past any bound load moves), run beside the other worker. The judge reads
each arm's CPU time from its own process (every thread of the arm), so a loaded two-core
box still gives stable per-round medians at these sizes.
"""
from __future__ import annotations

import pytest
from verifier_support import PROBLEM_FILE, fast_options

from verifiers.hw import bounds
from verifiers.judge import stats
from verifiers.api import verify
from verifiers.problem import load_problem

PROBLEM = load_problem(PROBLEM_FILE)


def timed(candidate_arm: str, baseline: str, shape: str, **options):
    report = verify(PROBLEM_FILE, f"arm:{candidate_arm}", baseline=baseline, shapes=[shape],
                    options=fast_options(profile=False, **options))
    return report, report.shape_reports[0].timing


def test_aa_run_gives_no_difference():
    report, t = timed("torch_mm", "torch_mm", "192x192x192", rounds=7)
    assert t.status == "PASS", t.failures
    if report.verdict == "INCONCLUSIVE":  # a busy box is not a cheat: allowed only when the box is named
        assert "loaded" in (t.inconclusive or ""), (t.inconclusive, t.box_load)
    else:
        assert report.verdict == "NO_DIFFERENCE" and t.verdict == "NO_DIFFERENCE"
    assert [r.order for r in t.aa.rounds][:2] == ["ABBA", "BAAB"]
    assert t.ab.ci_low <= 1.0 + t.noise_floor
    # every arm warmed in batches until one was no faster than 0.9x the last (a first batch of 3
    # calls, then batches of 10 for calls this fast); blocks sized on the last
    assert len(t.warmup) == 3 and all(w.batches >= 2 and w.calls == 3 + 10 * (w.batches - 1) for w in t.warmup), t.warmup


@pytest.mark.alone
def test_slow_calls_warm_up_in_small_batches_and_fast_ones_in_full_batches():
    """A call of ~110 ms (Triton's CPU interpreter is 0.4-1.5 s) warms up in batches sized to half
    a second, not 10 calls each, and its blocks hold 2 calls, not 3: a smoke verification spent
    most of its time warming up and in long blocks."""
    report, t = timed("mm_slow_call", "torch_mm", "128x128x128", rounds=5)
    assert t is not None, (report.verdict, {k: v.reason[:200] for k, v in report.shape_reports[0].stages.items()})
    slow = [w for w in t.warmup if w.wall_per_call_ms > 60]
    assert slow, [(w.arm, w.wall_per_call_ms) for w in t.warmup]
    for w in slow:  # 3 calls, then ceil(500 ms / cost) each: fewer than 10 per batch
        assert w.batches >= 2 and w.calls < 10 * w.batches and w.calls >= 6, w
    fast = [w for w in t.warmup if w.wall_per_call_ms < 5]
    assert fast and all(w.calls == 3 + 10 * (w.batches - 1) for w in fast), t.warmup
    assert t.ab.calls_per_block == 2 and t.aa.calls_per_block > 2, (t.ab.calls_per_block, t.aa.calls_per_block)


def test_the_baseline_side_can_alternate_between_its_two_processes():
    """``ab_baselines=2``: the A/B rounds take the baseline from A and A' in turn (an ablation of
    per-process bias); the drift is measured against both processes' solo figures."""
    report, t = timed("torch_mm", "torch_mm", "192x192x192", ab_baselines=2)
    assert t.status == "PASS" and report.verdict in ("NO_DIFFERENCE", "INCONCLUSIVE"), (t.reason, t.failures)
    assert any("alternated between processes A and A'" in n for n in t.notes), t.notes
    assert t.solo_baseline_ms == pytest.approx((t.aa.median_a_ms + t.aa.median_b_ms) / 2)


@pytest.mark.alone
def test_arm_doing_three_times_the_work_is_slower_and_its_interval_sits_near_that_factor():
    # Three times the work against once, not 1.5x against 2x: on a shared two-core VM a 7-round A/A
    # spread (the noise floor) reached 0.3, which hid a 1.5x slowdown in CI. The pure-work factor is
    # 1/3; each call also pays a cold-cache start (fresh values, flushed), one per call in both arms,
    # which moves the measured ratio up a little, never below the factor.
    report, t = timed("mm_x3", "torch_mm", "384x384x384", rounds=7, block_ms=30.0)
    assert t.status == "PASS", t.failures
    assert report.verdict == "SLOWER" and t.primary_verdict == "SLOWER" and t.cross_verdict == "SLOWER"
    factor = 1.0 / 3.0  # speedup = baseline time / candidate time, both less the timer floor
    assert t.ab.ci_low >= factor * 0.85 and t.ab.ci_high <= 0.6, (t.ab.ci_low, t.ab.ci_high)


@pytest.mark.alone
def test_cold_started_baseline_is_warmed_like_the_candidate():
    # a harness that timed the baseline once, cold, would report a large speedup here
    report, t = timed("torch_mm", "mm_coldstart", "192x192x192", rounds=7)
    assert t.status == "PASS", t.failures
    assert report.verdict == "NO_DIFFERENCE"
    assert all(w.calls >= 10 and w.elapsed_ms >= 25 for w in t.warmup)
    assert t.flush_bytes == 1 << 20 and t.rotating_sets == 3 and t.changing_inputs == ["a", "b"]


def test_a_baseline_that_slows_down_once_the_candidate_exists_fails_the_run():
    """The solo figure is taken before any candidate process exists; a baseline three times
    slower in the A/B rounds would hand the candidate a FASTER verdict."""
    report = verify(PROBLEM_FILE, "arm:torch_mm", baseline="mm_slows_after_profile", shapes=["192x192x192"],
                    options=fast_options(forbid_baseline_kernels=False))
    t = report.shape_reports[0].timing
    assert t.baseline_drift > 0.5
    assert report.verdict == "FAIL" and t.status == "FAIL"
    assert "slower with the candidate resident than alone" in t.reason and "the baseline was slowed" in t.reason


@pytest.mark.parametrize("solo_ms,floor_ms,fails", [(1.0, 0.01, True), (0.012, 0.01, False), (1.0, 0.01, None),
                                                   (0.098, 0.048, False), (0.15, 0.07, False)])
def test_a_hard_drift_fails_an_undecided_run_unless_its_calls_sit_at_the_timer_floor(solo_ms, floor_ms, fails):
    """No verdict (here: the A/A's clocks disagreed) leaves no verdict to buy, but a baseline
    four times slower with the candidate resident is named anyway; at the timer floor the
    drift is a ratio of two overheads and only noted. ``fails`` None: a small drift, noted."""
    from verifiers.judge.timing import Comparison, TimingResult, TimingStage

    slow = 4.0 if fails is not None else 1.2
    result = TimingResult(status="PASS", timer_floor_ms=floor_ms, solo_baseline_ms=solo_ms, noise_floor=0.05,
                          inconclusive="A/A: two runs of the same baseline disagree",
                          ab=Comparison(name="A/B", arm_a="a", arm_b="b", calls_per_block=4,
                                        median_a_ms=solo_ms * slow, median_b_ms=solo_ms, ci_low=0.9, ci_high=1.1))
    stage = TimingStage.__new__(TimingStage)  # the rule reads the result alone (and notes what load may excuse)
    stage.soft = []
    stage._drift(result)
    assert bool(result.failures) == bool(fails), (result.failures, result.notes)
    if fails:
        assert "the baseline was slowed" in result.failures[0]
    else:
        assert result.notes and "no verdict was given" in result.notes[0]


@pytest.mark.alone
def test_no_arm_is_timed_after_it_ran_the_profiler():
    """Profiling runs after the A/B rounds: an arm that slows once profiled (as every kernel does
    on a GPU with CUPTI left loaded) is timed at its own speed, and still profiled."""
    # 256^3 (~0.3 ms a call on one core): well above the CPU timer floor (~0.07 ms), where the
    # drift check's floor-corrected ratio is steady (at 192^3 a CI run once read +78 % raw, +144 % corrected)
    report = verify(PROBLEM_FILE, "arm:mm_slows_once_profiled", baseline="torch_mm", shapes=["256x256x256"],
                    options=fast_options(forbid_baseline_kernels=False))
    t = report.shape_reports[0].timing
    assert report.shape_reports[0].stages["signature"].status == "PASS"
    assert t.status == "PASS" and t.ab.speedup > 0.6, (t.ab.speedup, t.reason)  # 0.33 if timed after profiling


@pytest.mark.alone
def test_with_several_shapes_no_timed_process_ever_ran_the_profiler():
    """The baseline process A serves every shape: had it been profiled after the first shape's
    rounds, it would be timed at the next shape with the profiler's after-effects (three times
    slower here, the A/B reading ~3x FASTER for an A/A). Profiles come from processes of their
    own, never timed (``verifiers.judge.profiler_arms``), and each shape's signature still sees
    both arms."""
    report = verify(PROBLEM_FILE, "arm:mm_slows_once_profiled", baseline="mm_slows_once_profiled",
                    shapes=["192x192x192", "160x160x160"], options=fast_options())
    for s in report.shape_reports:
        assert s.stages["signature"].status == "PASS", (s.shape, s.stages["signature"].reason)
        assert [c.arm.split()[0] for c in s.signature] == ["baseline", "candidate"]
        t = s.timing
        assert t.status == "PASS" and 0.6 < t.ab.speedup < 1.6, (s.shape, t.ab.speedup, t.reason)


@pytest.mark.alone
def test_calls_shorter_than_the_timer_floor_are_inconclusive():
    report, t = timed("torch_mm", "torch_mm", "4x4x4", floor_calls=40)  # the default: a steadier floor median
    assert t.status == "PASS" and t.verdict is None and report.verdict == "INCONCLUSIVE", (t.reason, t.failures)
    assert "timer floor" in t.reason and t.timer_floor_ms > 0
    assert "timing: PASS - INCONCLUSIVE: " in report.summary()  # the summary says why there is no verdict


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


def test_the_judges_preparation_is_compared_across_arms_in_the_chained_protocol():
    """The same preparation work for every arm: one stretched by the arm's device work is named."""
    from verifiers.judge.timing import PREP_GAP_MS, prep_gap

    assert prep_gap("A/B", 0.120, 0.125, "candidate x") is None  # within the bound
    assert prep_gap("A/B", 0.120, 0.100, "candidate x") is None  # faster is not a violation
    text = prep_gap("A/B", 0.120, 0.120 + PREP_GAP_MS + 0.013, "candidate x")
    assert text is not None and "candidate x" in text and "0.12 ms" in text
    assert prep_gap("A/B", 1.0, 1.09, "c") is None and prep_gap("A/B", 1.0, 1.11, "c") is not None  # 10 % of a long one
    assert prep_gap("A/B", 0.1, float("nan"), "c") is None
    # the A/A's own disagreement widens the A/B's bound (H200: A 0.224, A' 0.262, candidate 0.263 ms)
    assert prep_gap("A/B", 0.224, 0.263, "c") is not None
    assert prep_gap("A/B", 0.224, 0.263, "c", noise=0.262 - 0.224) is None
    assert prep_gap("A/B", 0.224, 0.224 + 2.5 * 0.038, "c", noise=0.038) is not None
    # two runs of one baseline: half the preparation apart either way is no calibration
    assert prep_gap("A/A", 0.333, 0.535, "A'", rel=0.5, either_way=True) is not None
    assert prep_gap("A/A", 0.535, 0.333, "A'", rel=0.5, either_way=True) is not None
    assert prep_gap("A/A", 0.224, 0.262, "A'", rel=0.5, either_way=True) is None


def test_buffer_sets_per_arm_fit_half_the_free_device_memory():
    """The MoE card's DeepSeek shape: a set (shared inputs and outputs plus the judge's private
    copy of the inputs) is ~15 GiB; nine sets ran the H200 out of memory with ~125 GiB free."""
    from verifiers.judge.timing import MEMORY_SHARE, TIMED_ARMS, sets_that_fit

    gib = 1 << 30
    assert sets_that_fit(3, 1 * gib, 120 * gib) == 3  # small sets: the options' count
    n = sets_that_fit(3, 15 * gib, 125 * gib)
    assert n == 1 and TIMED_ARMS * n * 15 * gib <= MEMORY_SHARE * 125 * gib
    assert sets_that_fit(3, 10 * gib, 125 * gib) == 2
    assert sets_that_fit(3, 200 * gib, 125 * gib) == 1  # never none: the shape says it ran out

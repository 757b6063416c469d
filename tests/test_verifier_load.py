"""Load is not blame: on a box that other processes keep busy an honest candidate is never
FAIL (at worst INCONCLUSIVE, naming the box), while a candidate whose own clock lies is
still FAIL -- its violation is many times the bound, more than any load explains.

``busy_box`` is the CI load generator: two busy-loop processes (the two cores of the CI box)
for the duration of a test: the other pytest worker's tests only add to it. The test that reads
which processes are the busiest is ``alone`` (tests/box_share.py): the busiest are its own.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from verifier_support import PROBLEM_FILE, candidate, fast_options

from verifiers.api import verify
from verifiers.hw.boxload import BoxLoad, BoxLoadReading
from verifiers.judge.timing import GROSS, TimingConfig, TimingResult, TimingStage

BUSY = "import os\nwhile True:\n    os.getpid()\n"


@pytest.fixture
def busy_box():
    procs = [subprocess.Popen([sys.executable, "-c", BUSY], start_new_session=True) for _ in range(2)]
    time.sleep(0.3)
    try:
        yield procs
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@pytest.mark.alone
def test_the_box_load_names_processes_outside_the_verifier(busy_box):
    box = BoxLoad(roots=set())  # the busy processes are this test's children: nothing is "the verifier" here
    box.start()
    time.sleep(1.0)
    report = box.reading()
    assert report is not None and report.loaded, report
    assert report.foreign_cores >= 0.5
    assert any(f"pid {p.pid} " in b for p in busy_box for b in report.busiest), report.busiest
    ours = BoxLoad()  # seen from this process, its own children are the verifier's, not load
    ours.start()
    time.sleep(0.5)
    mine = ours.reading()
    assert mine is not None and not any(f"pid {p.pid} " in b for p in busy_box for b in mine.busiest), mine.busiest


def _stage(loaded: bool, neighbours: list[str] | None = None) -> tuple[TimingStage, TimingResult]:
    stage = TimingStage.__new__(TimingStage)  # the rule reads these fields only
    stage.cfg, stage.gated, stage.pad, stage.soft = TimingConfig(), False, None, []
    stage.box = stage.box_ab = None
    result = TimingResult(status="PASS", verdict="FASTER", neighbours=neighbours or [])
    result.box_load = BoxLoadReading(seconds=5.0, cores=2, foreign_cores=1.8 if loaded else 0.0, loaded=loaded,
                                    busiest=["pid 7 (python): 0.90 cores"])
    return stage, result


@pytest.mark.parametrize("loaded,how_far,blamed", [(True, 1.5, False), (True, GROSS * 2, True), (False, 1.5, True)])
def test_a_check_failed_by_what_load_explains_is_inconclusive_not_fail(loaded, how_far, blamed):
    stage, result = _stage(loaded)
    text = "A/B: candidate's own clock and the judge's differ ..."
    result.failures.append(text)
    stage.soft.append((text, how_far))
    stage._load_is_not_blame(result, [])
    assert bool(result.failures) == blamed, (result.failures, result.inconclusive)
    if not blamed:
        assert result.verdict is None and "the box was loaded" in result.inconclusive and "pid 7" in result.inconclusive


def test_a_neighbour_on_the_gpu_excuses_the_same_checks():
    stage, result = _stage(False, neighbours=["pid 9 (spinner) 500 MiB"])
    result.failures.append("after the candidate was suspended the device stayed busy ...")
    stage.soft.append((result.failures[-1], 2.0))
    stage._load_is_not_blame(result, [])
    assert not result.failures and "pid 9" in result.inconclusive


def test_failures_load_cannot_explain_stay_fail():
    stage, result = _stage(True)
    result.failures.append("candidate: c: 3 of 64 sampled elements are NaN")  # not a timing-consistency check
    stage._load_is_not_blame(result, [])
    assert result.failures


def test_an_honest_run_on_a_loaded_box_is_never_fail(busy_box):
    report = verify(PROBLEM_FILE, "arm:torch_mm", baseline="torch_mm", shapes=["192x192x192"],
                    options=fast_options(profile=False, rounds=7))
    t = report.shape_reports[0].timing
    assert report.verdict in ("NO_DIFFERENCE", "INCONCLUSIVE"), (report.verdict, t.reason, t.failures)
    assert t.box_load is not None and t.box_load.foreign_cores > 0.3, t.box_load
    if report.verdict == "INCONCLUSIVE":
        assert t.inconclusive, t.reason


def test_a_lying_clock_is_still_fail_on_a_loaded_box(busy_box):
    report = verify(PROBLEM_FILE, candidate("timing_patcher"), shapes=["256x256x256"],
                    options=fast_options(profile=False))
    t = report.shape_reports[0].timing
    assert report.verdict == "FAIL", report.summary()
    assert "not what the judge observed" in t.reason and t.box_load is not None


def _clocks(primary: float, cross: float):
    """A TimingResult whose two clocks give ``primary`` / ``cross`` as speedups, tight intervals."""
    from verifiers.judge.timing import ArmRoundStats, Comparison, RoundResult

    def comp(name, sp, width=0.01):
        r = ArmRoundStats(n=10, median_ms=1.0, q1_ms=1.0, q3_ms=1.0, min_ms=1.0, max_ms=1.0, host_median_ms=1.0)
        return Comparison(name=name, arm_a="a", arm_b="b", calls_per_block=10, speedup=sp, ci_low=sp - width,
                          ci_high=sp + width, rounds=[RoundResult(index=0, order="ABBA", a=r, b=r, ratio=sp)],
                          timer_floor_ms=0.01)

    return TimingResult(status="PASS", aa=comp("A/A", 1.0), aa_cross=comp("A/A", 1.0), ab=comp("A/B", primary),
                        ab_cross=comp("A/B", cross), timer_floor_ms=0.01, cross_timer_floor_ms=0.01)


@pytest.mark.parametrize("primary,cross,blamed", [(1.2, 0.85, False), (0.585, 5.475, True)])
def test_clocks_of_opposite_direction_are_excused_by_load_only_when_close(primary, cross, blamed):
    """Two honest clocks blurred by load can straddle the floor in opposite directions; a clock
    that lies (timing_patcher: 10x) lands far from the other, beyond what load explains."""
    stage, _ = _stage(True)
    stage.gpu = True
    stage.s = type("S", (), {"device": type("D", (), {"platform": "cuda"})()})()
    result = _clocks(primary, cross)
    result.box_load = _stage(True)[1].box_load
    stage._decide(result)
    assert result.failures and "clock" in result.failures[0]
    stage._load_is_not_blame(result, [])
    assert bool(result.failures) == blamed, (result.failures, result.inconclusive)


def test_a_claim_several_times_short_of_what_the_judge_saw_is_gross_whatever_the_load():
    """The loaded-box rule excuses a clock check failed by less than GROSS x its bound; a claim ten
    times short of the judge's observation (timing_patcher) is gross by its ratio, whatever the
    bound under load (both clocks count the same process's work)."""
    from verifiers.judge.session import CallTiming
    from verifiers.judge.timing import GROSS, RoundCalls, _claim_shortfall

    def calls(judge, claim):
        return [CallTiming(arm_ms=claim, judge_ms=judge, wall_ms=judge, prep_ms=0.1) for _ in range(8)]

    honest = [RoundCalls("ABBA", calls(1.1, 1.0), calls(2.2, 2.0))]
    lying = [RoundCalls("ABBA", calls(1.1, 1.0), calls(3.3, 0.3))]
    assert _claim_shortfall(honest) == pytest.approx(1.0)
    assert _claim_shortfall(lying) == pytest.approx(10.0) and _claim_shortfall(lying) > GROSS
    assert _claim_shortfall([RoundCalls("ABBA", calls(1.1, 1.0), calls(2.0, None))]) == 0.0


@pytest.mark.parametrize("solo,ab_ms,floor_ms,hard", [(0.158, 0.278, 0.103, False), (1.0, 2.5, 0.1, True)])
def test_a_doubled_baseline_fails_hard_only_when_its_calls_are_above_the_timer_floor(solo, ab_ms, floor_ms, hard):
    """A CPU box's busy moment read a 0.16 ms baseline call (0.10 ms of it the timer floor) as +220 %
    once the floor was taken off; that ratio of two small remainders is no evidence. A baseline
    call of 1 ms that became 2.5 ms is (the drift attack's DRIFT_HARD rule)."""
    from verifiers.judge.timing import ArmRoundStats, Comparison, RoundResult

    stage, result = _stage(False)
    r = ArmRoundStats(n=10, median_ms=ab_ms, q1_ms=ab_ms, q3_ms=ab_ms, min_ms=ab_ms, max_ms=ab_ms, host_median_ms=ab_ms)
    result.ab = Comparison(name="A/B", arm_a="a", arm_b="b", calls_per_block=10, speedup=1.0, ci_low=0.98, ci_high=1.02,
                           rounds=[RoundResult(index=0, order="ABBA", a=r, b=r, ratio=1.0)], timer_floor_ms=floor_ms,
                           median_a_ms=ab_ms, median_b_ms=ab_ms)
    result.solo_baseline_ms, result.timer_floor_ms, result.noise_floor = solo, floor_ms, 0.05
    result.verdict, result.primary_verdict = "NO_DIFFERENCE", "NO_DIFFERENCE"
    stage._drift(result)
    assert any("more than 100%" in f for f in result.failures) == hard, result.failures


@pytest.mark.alone
def test_load_that_arrives_only_in_the_ab_rounds_is_read_over_the_ab_rounds():
    """The drift rule compares the baseline's A/B figure with its solo one: load that starts only
    with the A/B rounds explains a drift, and is read over the A/B window alone (averaged from the
    solo phase on, one busy core over ~40 % of the window read ~0.4 cores: below LOADED_CORES)."""
    procs: list[subprocess.Popen] = []

    def progress(_done, _total, message: str) -> None:
        if "A/B rounds" in message and not procs:
            procs.append(subprocess.Popen([sys.executable, "-c", BUSY], start_new_session=True))

    try:
        report = verify(PROBLEM_FILE, "arm:torch_mm", baseline="torch_mm", shapes=["192x192x192"],
                        options=fast_options(forbid_baseline_kernels=False, seeds=[0], rounds=15), progress=progress)
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    t = report.shape_reports[0].timing
    assert procs and t is not None and t.box_load is not None, report.summary()
    phases = report.shape_reports[0].phase_seconds
    assert t.box_load.seconds < phases["solo"] + phases["timing"] - 0.5, (t.box_load, phases)
    assert t.box_load.foreign_cores >= 0.5 and t.box_load.loaded, t.box_load
    assert report.verdict != "FAIL", report.summary()

"""End to end: verify() through the judge process and the arm processes, the report, the
plot, the CLI's argument handling, hidden shapes, bad input."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from verifier_support import (FIXTURES, HIDDEN_FILE, PARITY_ONLY, PROBLEM_FILE, candidate, fast_options, verifier_processes,
                              verify_decided)

from verifiers.api import resolve_shapes, verify
from pydantic import ValidationError

from skill_server.cli.entry import build_parser
from skill_server.cli.verify_support import VerifyArgs, exit_code
from skill_server.settings import settings
from verifiers.options import VerifyOptions
from verifiers.problem import load_problem
from verifiers.report import VerificationReport

HONEST = candidate("honest_bmm")


@pytest.fixture(scope="module")
def honest_report(tmp_path_factory) -> VerificationReport:
    """The honest rewrite on the fixture problem with a hidden shape, every stage on."""
    plot = tmp_path_factory.mktemp("plot") / "rounds.png"
    seen: list[tuple[int, int, str]] = []
    report = verify_decided(HIDDEN_FILE, HONEST, shapes=["192x192x192"], options=fast_options(seeds=[0, 1, 2, 3]),
                            progress=lambda d, t, m: seen.append((d, t, m)), plot_path=plot)
    report._seen = seen  # type: ignore[attr-defined]
    return report


def test_honest_candidate_passes_every_stage_and_the_run_is_complete(honest_report):
    r = honest_report
    assert r.verdict in ("FASTER", "SLOWER", "NO_DIFFERENCE"), r.summary()
    # a card problem with hidden shapes: hidden shapes skip signature/segment/timing by design
    assert r.complete, r.summary()
    assert all(s.status == "PASS" for s in r.stages.values())
    shape, hidden = r.shape_reports
    assert shape.secret_seed is not None and hidden.hidden and hidden.dims is None
    assert any(c.secret for c in shape.parity.cases) and hidden.stages["parity"].status == "PASS"
    assert hidden.stages["timing"].reason == "hidden shape: parity only"
    assert {c.arm.split()[0] for c in shape.signature} == {"baseline", "candidate"}
    t = shape.timing
    assert t.aa is not None and len(t.ab.rounds) == 5 and t.ab_cross is not None
    assert t.ab.ci_low <= t.ab.speedup <= t.ab.ci_high
    assert r.speedup == t.ab.speedup and r.baseline == "torch_mm"


def test_every_timed_call_was_checked_and_the_timer_floor_is_reported(honest_report):
    t = honest_report.shape_reports[0].timing
    base, cand = t.sampled
    assert base.calls > 20 and cand.calls > 20 and not cand.failures
    assert cand.outputs["c"].numel == cand.calls * 64  # 64 sampled elements per call
    assert t.timer_floor_ms is not None and t.timer_floor_ms > 0 and t.cross_timer_floor_ms is not None
    assert t.ab.timer_floor_ms == t.timer_floor_ms
    assert t.solo_baseline_ms == t.aa.median_a_ms and t.baseline_drift is not None
    assert all(c.ok for c in t.clock_checks) and len(t.clock_checks) == 4
    assert t.checked_calls == t.value_sets and t.checked_calls > 60


def test_report_provenance_plot_and_json_roundtrip(honest_report):
    r = honest_report
    p = r.provenance
    assert p.platform == "cpu" and p.torch_version and p.hostname and p.time_utc and p.harness_digest
    assert Path(r.plot_path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = VerificationReport.model_validate_json(r.model_dump_json())
    assert again.verdict == r.verdict and again.shape_reports[0].timing.ab.speedup == r.speedup


def test_progress_is_streamed(honest_report):
    seen = honest_report._seen
    assert len(seen) > 5
    assert any("parity" in m for _, _, m in seen) and any("A/B" in m for _, _, m in seen)
    assert any("candidate's code is not loaded yet" in m for _, _, m in seen)
    assert seen[-1][0] == seen[-1][1]


def test_no_verifier_process_outlives_a_run(honest_report):
    assert verifier_processes() == []


def verify_args(argv: list[str]) -> VerifyArgs:
    """The verify command's typed arguments, as the CLI builds them."""
    return VerifyArgs.from_namespace(build_parser().parse_args(["verify", "a_card", *argv]), settings())


def test_cli_options_and_json_round_trip_a_failed_candidate():
    args = verify_args([
        "--candidate", candidate("writes_nan"), "--shape", "32x32x32",
        "--json", "--no-timing", "--no-profile", "--seed", "0", "--no-secret-seed", "--quiet",
    ])
    report = verify(PROBLEM_FILE, args.candidate, shapes=args.shapes, options=args.verify_options())
    out = json.loads(report.model_dump_json())
    assert exit_code(report.verdict) == 1
    assert out["verdict"] == "FAIL" and out["stages"]["parity"]["status"] == "FAIL"
    assert out["stages"]["timing"]["status"] == "SKIPPED"
    # non-finite figures survive the judge -> caller -> JSON round trip
    metrics = out["shape_reports"][0]["parity"]["cases"][0]["outputs"][0]["candidate"]
    assert metrics["nonfinite"] == 1 and metrics["max_abs"] == float("inf")


def _refusal(argv: list[str]) -> str:
    """What the verify command's argument handling refuses (before any process starts)."""
    try:
        args = verify_args(argv)
        verify(PROBLEM_FILE, args.candidate, baseline=args.baseline, shapes=args.shapes, options=args.verify_options())
    except (ValueError, KeyError, ValidationError) as exc:
        return str(exc)
    raise AssertionError(f"accepted: {args}")


def test_cli_arguments_reject_bad_input_before_any_process():
    for argv, message in (
        (["--candidate", HONEST, "--shape", "32x32"], "expected 3 values"),
        (["--candidate", HONEST, "--shape", "32x32x32x"], "stray separator; expected MxNxK"),
        (["--candidate", "no_function_given.py"], "expected FILE.py:FUNCTION"),
        (["--candidate", HONEST, "--baseline", "nope"], "no arm 'nope'"),
        (["--candidate", HONEST, "--rounds", "2"], "rounds"),
        (["--candidate", HONEST, "--options", '{"python": "/bin/sh"}'], "python"),
        (["--candidate", HONEST, "--options", '{"plot_path": "/etc/x.png"}'], "plot_path"),
    ):
        assert message in _refusal(argv + ["--quiet"])


def test_problem_loads_from_a_path_and_shapes_resolve():
    problem = load_problem(PROBLEM_FILE)
    assert problem.name == "cpu_matmul"
    assert resolve_shapes(problem, None) == ["96x96x96"]
    with pytest.raises(ValueError, match="K"):
        resolve_shapes(problem, ["M=1,N=2"])


def test_hidden_shapes_catch_a_candidate_tuned_to_the_shown_shape():
    options = VerifyOptions(**{**PARITY_ONLY, "hidden_shapes": True})
    report = verify(HIDDEN_FILE, candidate("tuned_to_shape"), options=options)
    visible, hidden = report.shape_reports
    assert visible.shape == "96x96x96" and visible.stages["parity"].status == "PASS"
    assert hidden.hidden and hidden.shape == "hidden-1" and hidden.dims is None
    assert hidden.stages["parity"].status == "FAIL"
    assert hidden.stages["timing"].status == "SKIPPED"
    assert report.verdict == "FAIL" and not report.complete


@pytest.mark.parametrize("name,function,reason", [
    ("no_such_file", "build", "does not exist"),
    ("no_such_function", "build", "has no function 'build'"),
    ("does_not_import", "build", "a_module_that_does_not_exist"),
])
def test_a_candidate_that_cannot_be_loaded_fails_fast_with_the_reason(name, function, reason):
    t0 = time.monotonic()
    report = verify(PROBLEM_FILE, candidate(name, function), shapes=["32x32x32"], options=fast_options())
    assert time.monotonic() - t0 < 10.0
    assert report.verdict == "FAIL" and report.stages["load"].status == "FAIL"
    assert reason in report.stages["load"].reason
    assert verifier_processes() == []


def test_a_candidate_that_raises_at_import_fails_in_the_probe_before_anything_is_timed():
    report = verify(PROBLEM_FILE, candidate("raises_at_import"), shapes=["32x32x32"], options=fast_options())
    assert report.verdict == "FAIL" and report.stages["load"].status == "FAIL"
    assert "broken at import" in report.stages["load"].reason and "probe" in report.stages["load"].reason
    assert report.shape_reports[0].timing is None and verifier_processes() == []


def test_the_candidate_is_profiled_in_a_process_that_gets_its_code_only_after_the_timing():
    """Profiling runs in processes that are never timed (``verifiers.judge.profiler_arms``): each
    shape's candidate profiler process is forked early with trusted code only and imports the
    candidate only once that shape's A/B rounds are over; the timed candidate process is another
    one, and the verdict is an ordinary one."""
    import re

    seen: list[tuple[float, str]] = []
    report = verify_decided(PROBLEM_FILE, candidate("honest_says_when_loaded"), shapes=["192x192x192", "128x128x128"],
                            options=fast_options(seeds=[0]), progress=lambda d, t, m: seen.append((time.monotonic(), m)))
    assert report.verdict in ("FASTER", "SLOWER", "NO_DIFFERENCE"), report.summary()
    assert all(s.status == "PASS" for s in report.stages.values()), report.summary()
    loads = [(label, float(t), int(pid)) for label, t, pid in re.findall(
        r"\[(candidate [^\]]*)\] candidate module loaded at ([0-9.]+) in pid (\d+)", report.shape_reports[0].log_tail)]
    profiled = [(t, pid) for label, t, pid in loads if label.endswith("(profiler)")]
    timed = [(t, pid) for label, t, pid in loads if not label.endswith("(profiler)") and "probe" not in label]
    assert len(profiled) == 2 and len(timed) == 2, loads
    assert not {pid for _, pid in profiled} & {pid for _, pid in timed}
    for shape, (t_loaded, _) in zip(("192x192x192", "128x128x128"), sorted(profiled)):
        # the message is read here after the judge sent it: its time here is an upper bound of the rounds' start
        rounds = max(t for t, m in seen if m.startswith(shape) and "A/B rounds" in m)
        assert rounds < t_loaded, (shape, rounds, t_loaded)
    for s in report.shape_reports:
        assert "profile_candidate_load" in s.phase_seconds and "profile_wait" in s.phase_seconds

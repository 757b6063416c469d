"""End to end: verify() in worker subprocesses, the report, the plot, the CLI glue."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from verifiers.api import resolve_shapes, verify
from verifiers.cli_support import add_verify_arguments, run_verify_command
from verifiers.options import VerifyOptions
from verifiers.problem import load_problem
from verifiers.report import VerificationReport

FIXTURES = Path(__file__).parent / "fixtures"
PROBLEM = str(FIXTURES / "cpu_matmul_problem.py")
HONEST = f"{FIXTURES / 'candidates' / 'honest_bmm'}.py:build"


@pytest.fixture(scope="module")
def honest_report(tmp_path_factory) -> VerificationReport:
    plot = tmp_path_factory.mktemp("plot") / "rounds.png"
    options = VerifyOptions(rounds=5, flush_bytes=1 << 20, plot_path=str(plot), time_limit_s=400)
    seen: list[tuple[int, int, str]] = []
    report = verify(PROBLEM, HONEST, shapes=["128x128x128"], options=options, progress=lambda d, t, m: seen.append((d, t, m)))
    report._seen = seen  # type: ignore[attr-defined]
    return report


def test_honest_candidate_passes_every_stage(honest_report):
    r = honest_report
    assert r.verdict in ("FASTER", "SLOWER", "NO_DIFFERENCE"), r.summary()
    assert r.complete, r.summary()
    assert all(s.status == "PASS" for s in r.stages.values())
    shape = r.shape_reports[0]
    assert shape.secret_seed is not None  # drawn per run, revealed afterwards
    assert any(c.secret for c in shape.parity.cases)
    assert {c.arm.split()[0] for c in shape.signature} == {"baseline", "candidate"}
    assert shape.timing.aa is not None and len(shape.timing.ab.rounds) == 5
    assert shape.timing.ab.ci_low <= shape.timing.ab.speedup <= shape.timing.ab.ci_high
    assert r.speedup == shape.timing.ab.speedup and r.baseline == "torch_mm"


def test_report_provenance_plot_and_json_roundtrip(honest_report):
    r = honest_report
    p = r.provenance
    assert p.platform == "cpu" and p.torch_version and p.hostname and p.time_utc and p.harness_digest
    assert p.python_version
    assert Path(r.plot_path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = VerificationReport.model_validate_json(r.model_dump_json())
    assert again.verdict == r.verdict and again.shape_reports[0].timing.ab.speedup == r.speedup


def test_progress_is_streamed(honest_report):
    seen = honest_report._seen
    assert len(seen) > 5
    assert any("parity" in m for _, _, m in seen) and any("A/B" in m for _, _, m in seen)
    assert seen[-1][0] == seen[-1][1]


def test_cli_prints_json_and_exits_1_on_a_failed_candidate(capsys):
    parser = argparse.ArgumentParser()
    add_verify_arguments(parser)
    args = parser.parse_args([
        "--candidate", f"{FIXTURES / 'candidates' / 'writes_nan'}.py:build", "--shape", "32x32x32",
        "--json", "--no-timing", "--no-profile", "--seed", "0", "--no-secret-seed", "--quiet",
    ])
    code = run_verify_command(args, PROBLEM)
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert out["verdict"] == "FAIL" and out["stages"]["parity"]["status"] == "FAIL"
    assert out["stages"]["timing"]["status"] == "SKIPPED"
    # non-finite figures survive the worker -> parent -> JSON round trip
    metrics = out["shape_reports"][0]["parity"]["cases"][0]["outputs"][0]["candidate"]
    assert metrics["nonfinite"] == 1 and metrics["max_abs"] == float("inf")


def test_cli_rejects_bad_input_with_exit_2(capsys):
    parser = argparse.ArgumentParser()
    add_verify_arguments(parser)
    for argv, message in (
        (["--candidate", HONEST, "--shape", "32x32"], "expected 3 values"),
        (["--candidate", "no_function_given.py"], "expected FILE.py:FUNCTION"),
        (["--candidate", HONEST, "--baseline", "nope"], "no arm 'nope'"),
        (["--candidate", HONEST, "--rounds", "2"], "rounds"),
    ):
        assert run_verify_command(parser.parse_args(argv + ["--quiet"]), PROBLEM) == 2
        assert message in capsys.readouterr().err


def test_problem_loads_from_a_path_and_shapes_resolve():
    problem = load_problem(PROBLEM)
    assert problem.name == "cpu_matmul"
    assert resolve_shapes(problem, None) == ["96x96x96"]
    with pytest.raises(ValueError, match="K"):
        resolve_shapes(problem, ["M=1,N=2"])


def test_hidden_shapes_catch_a_candidate_tuned_to_the_shown_shape():
    options = VerifyOptions(timing=False, profile=False, seeds=[0], secret_seed=False, time_limit_s=300)
    hidden_problem = str(FIXTURES / "cpu_matmul_hidden.py")
    report = verify(hidden_problem, f"{FIXTURES / 'candidates' / 'tuned_to_shape'}.py:build", options=options)
    visible, hidden = report.shape_reports
    assert visible.shape == "96x96x96" and visible.stages["parity"].status == "PASS"
    assert hidden.hidden and hidden.shape == "hidden-1" and hidden.dims is None
    assert hidden.stages["parity"].status == "FAIL"
    assert hidden.stages["timing"].status == "SKIPPED"
    assert report.verdict == "FAIL"

"""Public entry point: ``verify(problem, candidate, ...) -> VerificationReport``.

Runs one worker subprocess per shape (visible shapes: every stage; the problem's hidden
shapes: parity only), merges their reports, and draws the per-round timing plot. The parent
process never imports torch or the candidate.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from verifiers.candidate import check_candidate_file, parse_candidate
from verifiers.options import VerifyOptions
from verifiers.problem import Problem, is_problem_path, load_problem
from verifiers.provenance import git_state, host_and_time
from verifiers.report import (
    ShapeReport,
    VerificationReport,
    aggregate_stages,
    overall_verdict,
    plot_rounds,
)
from verifiers.runner import run_worker

__all__ = ["VerifyOptions", "VerificationReport", "verify", "resolve_shapes"]

Progress = Callable[[int, int, str], None]


def resolve_shapes(problem: Problem, shapes: list[str] | None) -> list[str]:
    """Shape strings to verify: the given ones (validated), else the problem's own."""
    if shapes:
        for s in shapes:
            problem.parse_shape(s)  # raises ValueError naming the shape and the expected form
        return list(shapes)
    if not problem.shapes:
        raise ValueError(f"problem {problem.name!r} declares no shapes; pass --shape")
    return ["x".join(str(d[n]) for n in problem.dim_names) for d in problem.shapes]


def verify(
    problem_name: str,
    candidate: str,
    baseline: str | None = None,
    shapes: list[str] | None = None,
    options: VerifyOptions | None = None,
    progress: Progress | None = None,
) -> VerificationReport:
    """Verify ``candidate`` (``FILE.py:FUNC``, ``package.module:FUNC`` or ``arm:NAME``) against
    the problem's baseline arm (or ``baseline``) on ``shapes`` (default: the problem's shapes).

    Raises ValueError for bad input (unknown problem, arm, shape, candidate syntax) before any
    subprocess starts; everything that happens inside a run is recorded in the report.
    """
    options = options or VerifyOptions()
    t0 = time.perf_counter()
    spec = parse_candidate(candidate)
    check_candidate_file(spec)
    problem = load_problem(problem_name)  # imports the problem file: cheap, no torch work
    if baseline is not None:
        problem.arm(baseline)  # KeyError lists the arms
    if spec.kind == "arm":
        problem.arm(spec.target)
    shape_list = resolve_shapes(problem, shapes)
    hidden = list(problem.hidden_shapes) if options.hidden_shapes else []
    worker_problem = str(Path(problem_name).resolve()) if is_problem_path(problem_name) else problem_name
    worker_candidate = candidate
    if spec.kind == "file":
        worker_candidate = f"{Path(spec.target).expanduser().resolve()}:{spec.function}"
    digest_files = [Path(problem_name).resolve()] if is_problem_path(problem_name) else []

    jobs: list[tuple[str, str, bool]] = [(s, s, False) for s in shape_list]
    jobs += [("x".join(str(d[n]) for n in problem.dim_names), f"hidden-{i + 1}", True) for i, d in enumerate(hidden)]
    n_jobs = len(jobs)
    reports: list[ShapeReport] = []
    for index, (shape, label, is_hidden) in enumerate(jobs):
        def shape_progress(done: int, total: int, message: str, _i: int = index) -> None:
            if progress:
                frac = done / total if total else 0.0
                progress(_i * 100 + int(100 * frac), n_jobs * 100, message)

        reports.append(
            run_worker(worker_problem, worker_candidate, shape, baseline, options, shape_progress,
                       label=label, hidden=is_hidden, extra_digest_files=digest_files)
        )
    report = _merge(problem, candidate, baseline, shape_list, reports, options)
    if options.plot_path:
        path = plot_rounds(report, options.plot_path)
        report.plot_path = str(path) if path else None
    report.seconds = time.perf_counter() - t0
    if progress:
        progress(n_jobs * 100, n_jobs * 100, f"done: {report.verdict}")
    return report


def _merge(
    problem: Problem, candidate: str, baseline: str | None, shapes: list[str],
    reports: list[ShapeReport], options: VerifyOptions,
) -> VerificationReport:
    report = VerificationReport(
        problem=problem.name, card_id=problem.card_id, candidate=candidate, shapes=shapes,
        shape_reports=reports, options=options.model_dump(),
    )
    report.baseline = baseline or next((r.baseline_arm for r in reports if r.baseline_arm), None)
    report.verdict = overall_verdict(reports)
    report.stages = aggregate_stages(reports)
    report.complete = bool(reports) and all(st.status == "PASS" for st in report.stages.values())
    report.flags = [f for r in reports for f in r.flags]
    timed = [r for r in reports if r.timing and r.timing.ab and r.timing.ab.speedup is not None]
    if len(timed) == 1:
        t = timed[0].timing
        assert t is not None and t.ab is not None
        report.speedup, report.ci_low, report.ci_high, report.noise_floor = t.ab.speedup, t.ab.ci_low, t.ab.ci_high, t.noise_floor
    base = next((r.provenance for r in reports if r.provenance.platform), None)
    if base is not None:
        report.provenance = base.model_copy()
    revision, dirty = git_state()
    report.provenance.git_revision, report.provenance.git_dirty = revision, dirty
    for key, value in host_and_time().items():
        setattr(report.provenance, key, value)
    return report

"""Public entry point: ``verify(problem, candidate, ...) -> VerificationReport``.

Runs one judge process for the whole verification (``verifiers.launch.runner``): every visible
shape in turn, the problem's hidden shapes' parity cases interleaved with the first
one's. The calling process never imports torch or the candidate. A candidate file that
does not exist, does not parse, or visibly lacks the function FAILs here at once; one that
imports a package that is not installed FAILs at once as well; any other import failure FAILs in
the judge's probe, seconds later.
"""
from __future__ import annotations

import ast
import threading
import time
from collections.abc import Callable
from pathlib import Path

from verifiers.arms.candidate import CandidateSpec, parse_candidate
from verifiers.gfx950.emulator import verifier_arms
from verifiers.launch.runner import VerifyCancelled, failed_report, run_judge
from verifiers.options import VerifyOptions
from verifiers.problem import EMULATED_PLATFORM, Problem, for_platform, is_problem_path, load_problem
from verifiers.provenance import git_state, host_and_time
from verifiers.report import (
    ShapeReport,
    VerificationReport,
    aggregate_stages,
    overall_verdict,
    plot_rounds,
)

__all__ = ["VerifyCancelled", "VerifyOptions", "VerificationReport", "verify", "resolve_shapes"]

Progress = Callable[[int, int, str], None]
_DYNAMIC = ("__getattr__", "globals", "exec", "setattr", "sys.modules", "import *")


def resolve_shapes(problem: Problem, shapes: list[str] | None) -> list[str]:
    """Shape strings to verify: the given ones (validated, then written the one canonical way,
    e.g. ``4096x2048x7168`` for ``M=4096,N=2048,K=7168``), else the problem's own."""
    if shapes:
        # raises ShapeTextError (a ValueError) naming the shape and the expected form
        parsed = [problem.parse_shape(s) for s in shapes]
        return ["x".join(str(d[n]) for n in problem.dim_names) for d in parsed]
    if not problem.shapes:
        raise ValueError(f"problem {problem.name!r} declares no shapes; pass --shape")
    return ["x".join(str(d[n]) for n in problem.dim_names) for d in problem.shapes]


def check_emulated(problem: Problem, spec: CandidateSpec, shapes: list[str]) -> None:
    """Bad input for the gfx950-emulated platform, before any process starts: a box that
    cannot compile or emulate says what is missing; shapes must be emulation-sized; an
    ``arm:NAME`` candidate must have an emulated arm at every shape."""

    missing = verifier_arms.toolchain_problem()
    if missing:
        raise ValueError(f"device {EMULATED_PLATFORM}: this box cannot compile and emulate FlyDSL kernels: {missing}")
    allowed = [dict(d) for d in (*problem.shapes, *problem.hidden_shapes, *verifier_arms.declared_dims(problem.name))]
    dims = [problem.parse_shape(s) for s in shapes]
    for text, d in zip(shapes, dims):
        if d not in allowed:
            shown = ", ".join("x".join(str(a[n]) for n in problem.dim_names) for a in allowed)
            raise ValueError(f"shape {text}: not emulation-sized for {problem.name} (the emulator runs seconds per "
                             f"launch); {EMULATED_PLATFORM} shapes: {shown}")
    if spec.kind == "arm":
        verifier_arms.check_candidate(problem.name, spec.target, problem.arms, dims)


def candidate_file_problem(spec: CandidateSpec) -> str | None:
    """Why a candidate file cannot be the candidate, when that is visible without running it."""
    if spec.kind != "file":
        return None
    path = Path(spec.target).expanduser()
    if not path.is_file():
        return f"candidate file {spec.target!r} does not exist"
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
    except (OSError, UnicodeDecodeError) as exc:
        return f"candidate file {spec.target!r} cannot be read: {type(exc).__name__}"
    except SyntaxError as exc:
        return f"candidate file {spec.target!r} does not parse: line {exc.lineno}: {exc.msg}"
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    if spec.function not in names and not any(word in source for word in _DYNAMIC):
        return f"candidate file {spec.target!r} has no function {spec.function!r}"
    missing = _missing_top_level_imports(tree, path.parent)
    if missing:
        return (f"candidate file {spec.target!r} does not import: it imports {missing[0]!r} at module level, "
                "which is not installed here")
    return None


def _missing_top_level_imports(tree: ast.Module, folder: Path) -> list[str]:
    """Top-level packages the module imports unconditionally that cannot be found. Only the
    import system's search runs (``find_spec`` of a top-level name executes no module code);
    imports inside ``try`` blocks or functions may be optional and are left to the import."""
    import importlib.util
    import sys

    names = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module.split(".")[0])
    missing = []
    for name in dict.fromkeys(names):
        if name in sys.builtin_module_names or (folder / name).exists() or (folder / f"{name}.py").exists():
            continue
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except (ImportError, ValueError):
            missing.append(name)
    return missing


def verify(
    problem_name: str,
    candidate: str,
    baseline: str | None = None,
    shapes: list[str] | None = None,
    options: VerifyOptions | None = None,
    progress: Progress | None = None,
    plot_path: str | Path | None = None,
    *,
    baselines: dict[str, str] | None = None,
    cancel: threading.Event | None = None,
) -> VerificationReport:
    """Verify ``candidate`` (``FILE.py:FUNC``, ``package.module:FUNC`` or ``arm:NAME``) against
    a baseline arm on ``shapes`` (default: the problem's shapes).

    The baseline: ``baseline`` when given, else ``baselines[platform]`` (the card's verifier
    binding, platform -> arm; the platform is the device the judge opens), else the
    problem's own baseline arm for that platform. ``plot_path``: where the caller wants the
    per-round plot (a caller's choice, never a client-settable option). ``cancel`` set
    while it runs stops every process of the run and raises ``VerifyCancelled``. Raises
    ValueError / KeyError for bad input (unknown problem, arm, shape, candidate syntax)
    before any process starts; everything that happens inside a run, a candidate that
    cannot be loaded included, is recorded in the report.
    """
    options = options or VerifyOptions()
    t0 = time.perf_counter()
    spec = parse_candidate(candidate)
    problem = load_problem(problem_name)  # imports the problem file: cheap, no torch work
    emulated = options.device.strip().lower() == EMULATED_PLATFORM
    if baseline is not None:
        problem.arm(baseline)  # KeyError lists the arms
    for arm in (baselines or {}).values():
        problem.arm(arm)  # a binding naming an arm the problem lacks (lint says so too)
    if emulated:
        problem = for_platform(problem, EMULATED_PLATFORM)  # ValueError: the problem declares no emulation
    elif spec.kind == "arm":
        problem.arm(spec.target)
    shape_list = resolve_shapes(problem, shapes)
    if emulated:
        check_emulated(problem, spec, shape_list)
    hidden = [f"hidden-{i + 1}" for i in range(len(problem.hidden_shapes))] if options.hidden_shapes else []
    worker_problem = str(Path(problem_name).resolve()) if is_problem_path(problem_name) else problem_name
    bad = candidate_file_problem(spec)
    if bad:
        reports = [failed_report(s, False, "FAIL", "load", "FAIL", bad) for s in shape_list]
        reports += [failed_report(h, True, "FAIL", "load", "FAIL", bad) for h in hidden]
    else:
        if spec.kind == "file":
            spec = CandidateSpec("file", str(Path(spec.target).expanduser().resolve()), spec.function)
        reports = run_judge(worker_problem, spec, shape_list, baseline, dict(baselines or {}), options, progress,
                            hidden, cancel)
    report = _merge(problem, candidate, baseline, shape_list, reports, options)
    if plot_path:
        path = plot_rounds(report, plot_path)
        report.plot_path = str(path) if path else None
    report.seconds = time.perf_counter() - t0
    if progress:
        progress(1, 1, f"done: {report.verdict}")
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
    report.provenance.sandbox = next((r.provenance.sandbox for r in reports if r.provenance.sandbox), None)
    revision, dirty = git_state()
    report.provenance.git_revision, report.provenance.git_dirty = revision, dirty
    for key, value in host_and_time().items():
        setattr(report.provenance, key, value)
    return report

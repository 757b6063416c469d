"""``check_kernel``: compile a card folder's gfx950 targets and run their static gates.

The one place that puts the three parts together: the declarations (``targets``), the compile
(``compile``, cached, in subprocesses) and the gate rules (``gates``), which know nothing of
either.
"""
from __future__ import annotations

from verifiers.gfx950.compile import compile_targets
from verifiers.gfx950.gates import TargetGates, run_gates
from verifiers.gfx950.targets import CompileTarget, load_targets


def _finish(report: TargetGates, t: CompileTarget, negative: bool) -> TargetGates:
    report.description = t.description
    report.config = dict(t.config)
    report.negative = negative
    if negative:
        report.expect_fail = list(t.expect_fail)
        if report.status != "SKIPPED":
            failed = set(report.failed)
            report.holds = (set(t.expect_fail) <= failed) if t.expect_fail else bool(failed)
            if "compiled" in failed:
                report.holds = False  # a variant that does not even compile proves nothing
    return report


def check_kernel(
    folder: str,
    target: str | None = None,
    use_cache: bool = True,
    *,
    include_negative: bool = False,
    jobs: int | None = None,
) -> list[TargetGates]:
    """Compile (cached, in a subprocess) and gate the targets of ``kernels/<folder>``.

    target: one target name (positive or negative); None: every TARGETS entry, plus the
      NEGATIVE_TARGETS when ``include_negative``.
    jobs: compiles run in parallel subprocesses (default: min(2, CPUs)).
    Returns one TargetGates per target; a missing flydsl / ld.lld yields SKIPPED reports.
    Raises NoTargetsError when the folder has no gfx950_targets.py, KeyError for an unknown
    target name.
    """
    decl = load_targets(folder)
    if target is not None:
        t, neg = decl.get(target)
        todo = [(t, neg)]
    else:
        todo = [(t, False) for t in decl.targets]
        if include_negative:
            todo += [(t, True) for t in decl.negative]
    arts = compile_targets(folder, [t.name for t, _ in todo], use_cache=use_cache, jobs=jobs)
    return [_finish(run_gates(arts[t.name], t.gates), t, neg) for t, neg in todo]

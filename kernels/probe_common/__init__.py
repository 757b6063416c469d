"""Helpers shared by the cards' capability probes (``kernels/<card>/probes.py``).

Import as ``skill_kernels.probe_common``. A probe is a function ``probe(ctx) -> dict``
registered in its card folder's ``PROBES`` mapping under the capability name the card's
``prerequisites`` use; ``skill-server reverify`` finds it there by convention. ``ctx``
has ``project_root`` (Path), ``card_id``, ``capability`` and ``gate_reports`` (the static
gfx950 gate reports of this run, possibly empty). The dict says ``met`` (True, False, or
None when it could not be checked), ``detail``, and optionally ``found`` and ``evidence``.
"""
from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def flydsl_sources() -> tuple[str | None, tuple[Path, ...]]:
    """The installed flydsl's version and Python files (from its distribution record)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("flydsl")
    except PackageNotFoundError:
        return None, ()
    files = tuple(Path(dist.locate_file(f)) for f in (dist.files or ()) if str(f).endswith(".py"))
    return dist.version, files


def flydsl_checkout_kernels(project_root: Path) -> list[Path]:
    """A FlyDSL source checkout's ``kernels`` package on the import path (the cards advise
    people to put one there); the project's own ``kernels/`` folder is not one."""
    try:
        spec = importlib.util.find_spec("kernels")
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    from skill_kernels import KERNELS_DIR

    own = {(Path(project_root) / "kernels").resolve(), Path(KERNELS_DIR).resolve()}  # a copy's and the package's
    return [Path(p) for p in dict.fromkeys(spec.submodule_search_locations or [])
            if Path(p).resolve() not in own and _is_flydsl_kernels(Path(p))]


_FLYDSL_IMPORT = re.compile(r"^\s*(?:from|import)\s+flydsl\b", re.MULTILINE)


def _is_flydsl_kernels(folder: Path) -> bool:
    """A ``kernels`` folder is FlyDSL's when it is not a copy of this project's (which has
    ``probe_common``) and one of its first few hundred Python files imports flydsl; any
    other package that happens to be called ``kernels`` is not searched."""
    if (folder / "probe_common" / "__init__.py").is_file():
        return False
    for n, path in enumerate(sorted(folder.rglob("*.py"))):
        if n >= 400:
            return False
        try:
            if _FLYDSL_IMPORT.search(path.read_text(encoding="utf-8", errors="replace")[:200_000]):
                return True
        except OSError:
            continue
    return False


def search_flydsl(project_root: Path, path_regex: str | None, text_regex: str | None,
                  extra_roots: Iterable[Path] = ()) -> tuple[str | None, int, list[str]]:
    """Search the installed flydsl (and any FlyDSL ``kernels`` checkout on the path) for
    files whose path matches ``path_regex`` or whose text matches ``text_regex``.
    Returns (flydsl version, files searched, hits as 'path: why')."""
    version, files = flydsl_sources()
    candidates = list(files)
    for root in [*flydsl_checkout_kernels(project_root), *extra_roots]:
        candidates += sorted(Path(root).rglob("*.py"))
    prx = re.compile(path_regex, re.IGNORECASE) if path_regex else None
    trx = re.compile(text_regex, re.IGNORECASE) if text_regex else None
    hits: list[str] = []
    for path in candidates:
        if prx and prx.search(path.as_posix()):
            hits.append(f"{path}: file name")
            continue
        if trx:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")[:2_000_000]
            except OSError:
                continue
            m = trx.search(text)
            if m:
                hits.append(f"{path}: {m.group(0)!r}")
    return version, len(candidates), hits


def result(met: bool | None, detail: str, found: str | None = None, evidence: list[str] | None = None) -> dict:
    """A probe's answer in the form the server reads."""
    return {"met": met, "detail": detail, "found": found, "evidence": list(evidence or [])[:10]}


def _project_flydsl_arm(report, only: "set[str] | None" = None) -> bool:  # noqa: ANN001
    """The report's candidate is one of the project's FlyDSL arms of its problem (an arm an
    ``EmulatedArm`` that must pass stands for), not a CPU arm, a Triton arm or a rewrite;
    with ``only``, one of those arms."""
    from verifiers.gfx950.targets import NoTargetsError, load_targets

    if not report.candidate.startswith("arm:"):
        return False
    try:
        arms = {a.arm for a in load_targets(report.problem).emulated if a.expect_parity}
    except (NoTargetsError, ImportError, ValueError, TypeError):
        return False
    name = report.candidate[4:]
    return name in arms and (only is None or name in only)


def _parity_held(report) -> bool:  # noqa: ANN001
    """Every shape of the report (hidden ones included) passed parity."""
    shapes = report.shape_reports
    return bool(shapes) and all(s.stages.get("parity") is not None and s.stages["parity"].status == "PASS" for s in shapes)


def _parity_reason(report) -> str:  # noqa: ANN001
    bad = [s for s in report.shape_reports if s.stages.get("parity") is None or s.stages["parity"].status != "PASS"]
    if not bad:
        return "no shape ran"
    st = bad[0].stages.get("parity")
    return f"{bad[0].shape}: {st.status}: {st.reason[:200]}" if st is not None else f"{bad[0].shape}: not run"


def _gfx950_hardware(report) -> bool:  # noqa: ANN001 - verifiers.report.VerificationReport
    prov = report.provenance
    return prov.platform == "rocm" and str(prov.device_properties.get("gcnArchName", "")).startswith("gfx950")


def reference_kernel_evidence(ctx, arms: "set[str] | None" = None,  # noqa: ANN001 - ProbeContext
                              gate_targets: "str | None" = None) -> tuple[bool, str, list[str]]:
    """Whether this box can run the card's recipe with the project's own reference kernel:
    its FlyDSL arm passed parity on a real gfx950 device in this run, or it passed its
    static gfx950 gates *and* its parity on the gfx950 emulator (``gfx950-emulated``).

    arms: the problem arms that are the capability (None: any FlyDSL arm of the problem);
    gate_targets: a regex over gate target names, at least one of which must have run and
    passed (None: the folder's gates as a whole). A capability about one kernel names both,
    so a run of another of the card's FlyDSL arms is no evidence for it.
    Returns (met, detail, evidence); the detail names what is missing when not met."""
    from verifiers.gfx950.emulator.verifier_arms import toolchain_problem

    runs = [r for r in ctx.verifier_reports if r.card_id == ctx.card_id and _project_flydsl_arm(r, arms)]
    for r in runs:
        if _gfx950_hardware(r) and _parity_held(r):
            return True, (f"the project's reference kernel ({r.candidate}) passed parity on this gfx950 device "
                          f"({r.provenance.device_name})"), [f"{r.candidate} on {r.provenance.device_name}: {s.shape} "
                                                             f"parity {s.stages['parity'].status}" for s in r.shape_reports]
    missing = toolchain_problem()
    if missing:
        return False, f"FlyDSL kernels cannot be compiled and emulated here: {missing}", []
    gated = [g for g in ctx.gate_reports if not getattr(g, "negative", False)]
    gate_fail = [g.target for g in gated if g.status == "FAIL"]
    emulated = [r for r in runs if r.provenance.platform == "gfx950-emulated"]
    why = []
    if not gated or all(g.status == "SKIPPED" for g in gated):
        why.append("its static gfx950 gates did not run in this run")
    elif gate_fail:
        why.append(f"its static gfx950 gates fail ({', '.join(gate_fail)})")
    elif gate_targets is not None and not any(re.search(gate_targets, g.target) and g.status == "PASS" for g in gated):
        why.append(f"no gate target matching {gate_targets!r} passed in this run")
    if not emulated:
        which = f" ({', '.join(f'arm:{a}' for a in sorted(arms))})" if arms else ""
        why.append(f"its gfx950-emulated parity{which} did not run in this run")
    else:
        bad = [r for r in emulated if not _parity_held(r)]
        if bad:
            why.append(f"its gfx950-emulated parity does not hold ({_parity_reason(bad[0])})")
    if why:
        return False, "the project's reference kernel is not confirmed here: " + "; ".join(why), []
    r = emulated[0]
    shapes = [s.shape for s in r.shape_reports]
    passed = sum(1 for g in gated if g.status == "PASS")
    evidence = [f"gate target {g.target}: {g.status}" for g in gated][:5]
    evidence += [f"{r.candidate} on gfx950-emulated: {s.shape} parity {s.stages['parity'].status}" for s in r.shape_reports]
    return True, (f"the project's reference kernel ({r.candidate}) passes its {passed} static gfx950 gate target(s) and "
                  f"parity on gfx950-emulated ({', '.join(shapes)}; CPU emulation, not an MI355X run)"), evidence

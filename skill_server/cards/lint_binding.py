"""Lint step "binding": a card's ``verifier`` block agrees with the problem it names.

The problem (``kernels/<folder>/problem.py``) executes; the card declares. They must not
drift apart: the problem's card id, the parity mode and every tolerance the card states,
each arm the card names per platform (it exists and runs on that platform), the
runtime signatures the card states (a subset of the problem's), the scored segment's
kernels, and the card's verifier shapes (the problem parses them).

Checking needs the problem module imported. The seed problems import only the verifier
interfaces (no torch); a problem that needs more is reported as a warning naming what is
missing ("binding not checked: ... needs torch"), never as a pass.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import math
import sys
from pathlib import Path
from typing import Any

from skill_server.cards.schema import CardProblem, ParsedCard
from skill_server.reverify.probes import ProbeLoadError, card_probes, probes_path
from verifiers import card_folder
from verifiers.problem import Problem, load_problem

PARITY_FIELDS = ("rtol", "atol", "max_mismatch", "min_cosine", "max_cosine_drop", "max_abs")


def load_project_problem(project_root: Path, folder: str) -> Any:
    """``PROBLEM`` of ``<project>/kernels/<folder>/problem.py``. The project's own kernels
    import as ``skill_kernels.<folder>``; another project's folder is imported as a
    package of its own so that its relative imports work."""
    path = card_folder.project_folder(project_root, folder).resolve()
    if card_folder.is_installed(path):
        return load_problem(path.name)
    name = "_lint_kernels_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    if name not in sys.modules:
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(path)]
        sys.modules[name] = importlib.util.module_from_spec(spec)
    module = importlib.import_module(f"{name}.problem")
    problem = getattr(module, "PROBLEM", None)
    if not isinstance(problem, Problem):
        raise TypeError(f"kernels/{folder}/problem.py must define PROBLEM: verifiers.problem.Problem "
                        f"(got {type(problem).__name__})")
    return problem


def binding_problems(parsed: ParsedCard, project_root: Path, kernels_dir: Path | None = None) -> list[CardProblem]:
    """``kernels_dir``: the folder holding the problem, when not ``kernels/<verifier.problem>``
    (a draft's)."""
    card, file = parsed.card, str(parsed.path)
    vb = card.verifier
    if vb is None:
        return []
    out: list[CardProblem] = []

    def err(message: str, *loc: Any, severity: str = "error") -> None:
        out.append(CardProblem(file=file, line=parsed.line_of("verifier", *loc), field=".".join(map(str, ("verifier", *loc))),
                               message=message, severity=severity))

    problem_file = (kernels_dir or card_folder.project_folder(project_root, vb.problem)) / f"{card_folder.PROBLEM}.py"
    if not problem_file.is_file():
        return []  # lint_card reports the missing file
    try:
        if kernels_dir is not None:
            problem = load_problem(str(problem_file))
        else:
            problem = load_project_problem(project_root, vb.problem)
    except ModuleNotFoundError as exc:
        err(f"binding not checked: importing kernels/{vb.problem}/problem.py needs the module {exc.name!r} "
            f"({exc}); install it and lint again", "problem", severity="warning")
        return out
    except Exception as exc:  # noqa: BLE001 - card code; reported with its file
        err(f"kernels/{vb.problem}/problem.py does not load: {type(exc).__name__}: {exc}", "problem")
        return out

    if problem.card_id != card.id:
        err(f"kernels/{vb.problem}/problem.py declares card_id {problem.card_id!r}, not {card.id!r}", "problem")
    for role, per_platform in (("baseline", vb.baseline), ("reference", vb.reference)):
        for platform, arm in per_platform.items():
            if arm not in problem.arms:
                err(f"{role} arm {arm!r} for {platform} is not an arm of the problem; arms: {sorted(problem.arms)}",
                    role, platform)
            elif platform not in problem.arms[arm].platforms:
                err(f"{role} arm {arm!r} runs on {list(problem.arms[arm].platforms)}, not on {platform}", role, platform)
    if vb.parity is not None:
        if vb.parity.mode != problem.parity.mode:
            err(f"parity mode {vb.parity.mode!r}, but the problem checks {problem.parity.mode!r}", "parity", "mode")
        for key in PARITY_FIELDS:
            declared, actual = getattr(vb.parity, key), getattr(problem.parity, key, None)
            if declared is None:
                continue
            if actual is None or not math.isclose(float(declared), float(actual), rel_tol=1e-9, abs_tol=0.0):
                err(f"parity {key} {declared} in the card, {actual} in the problem", "parity", key)
    for arm, sig in vb.signatures.items():
        if arm not in problem.arms:
            err(f"signature for {arm!r}, which is not an arm of the problem", "signatures", arm)
            continue
        spec = problem.arms[arm].signature
        for kind in ("required", "forbidden"):
            extra = sorted(set(getattr(sig, kind)) - set(getattr(spec, kind)))
            if extra:
                err(f"{kind} kernels {extra} of arm {arm!r} are not in the problem's signature "
                    f"{list(getattr(spec, kind))}", "signatures", arm, kind)
    if vb.segment_kernels and tuple(vb.segment_kernels) != tuple(problem.segment.kernels):
        err(f"segment kernels {vb.segment_kernels} differ from the problem's {list(problem.segment.kernels)}",
            "segment_kernels")
    for i, shape in enumerate(vb.shapes):
        try:
            problem.parse_shape(shape)
        except ValueError as exc:
            err(f"verifier shape {shape!r}: {exc}", "shapes", i)
    return out


def probe_problems(parsed: ParsedCard, project_root: Path, kernels_dir: Path | None = None) -> list[CardProblem]:
    """Every capability prerequisite has a probe in the card folder's ``probes.py``."""

    card, file = parsed.card, str(parsed.path)
    capabilities = [(i, p) for i, p in enumerate(card.prerequisites) if p.kind == "capability"]
    if not capabilities:
        return []
    where = kernels_dir / "probes.py" if kernels_dir is not None else probes_path(project_root, card)
    try:
        probes = card_probes(project_root, card, kernels_dir)
    except ProbeLoadError as exc:
        return [CardProblem(file=file, line=parsed.line_of("prerequisites"), field="prerequisites", message=str(exc))]
    return [CardProblem(file=file, line=parsed.line_of("prerequisites", i, "name"), field=f"prerequisites.{i}.name",
                        severity="warning",
                        message=f"capability {p.name!r} has no probe in {where} (PROBES): re-verification cannot "
                                "confirm it and reports it missing")
            for i, p in capabilities if p.name not in probes]

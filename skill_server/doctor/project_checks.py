"""Doctor checks of the project itself: where it is installed and whether it can write its
state, and each card's prerequisites on this box.

The prerequisites go through the re-verification's own checks (``reverify.check_prerequisite``
with its probe registry), so doctor says what ``skill-server reverify`` will decide;
:func:`prerequisite_checks` is the one call into them (the probes are moving to
``kernels/<card>/probes.py``; only that function follows them). Nothing here writes: the
catalog is read without its parse cache, and writability is asked, never tried.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from skill_server.cards.catalog import Catalog
from skill_server.doctor.context import CheckContext
from skill_server.doctor.result import CardDetails, CheckResult, PrerequisiteLine, result
from skill_server.locations import STATE_ENV, state_dir
from skill_server.reverify.probes import ProbeContext, ProbeLoadError, card_probes, check_prerequisite
from skill_server.settings import settings
from verifiers import locations


def _skills_dir(ctx: CheckContext) -> Path:
    return Path(ctx.skills_dir or settings().skills_dir or locations.SKILLS_DIR)


def _writable(path: Path) -> tuple[bool, Path]:
    """Whether ``path`` (or, when it does not exist yet, its nearest existing parent) is writable."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return os.access(probe, os.W_OK | os.X_OK), probe


def check_install(ctx: CheckContext) -> CheckResult:
    title = "project install"
    skills = _skills_dir(ctx)
    layout = "installed package" if locations.INSTALLED else "checkout"
    if not (skills.is_dir() and any(skills.glob("*/SKILL.md"))):
        return result("install", title, "missing", f"{layout} at {locations.CODE_ROOT}: no cards in {skills}",
                      "pass --skills-dir DIR (a folder of <card>/SKILL.md) or set SKILL_SERVER_SKILLS_DIR")
    project_root = skills.resolve().parent
    state, cache = state_dir(project_root), locations.cache_dir()
    problems = []
    for what, where, env in (("ledger/state", state, STATE_ENV), ("cache", cache, locations.CACHE_ENV)):
        ok, probe = _writable(where)
        if not ok:
            problems.append((f"the {what} folder {where} is not writable ({probe})", env))
    finding = f"{layout} at {locations.CODE_ROOT}; cards {skills}; state {state}; caches {cache}"
    if problems:
        return result("install", title, "warn", finding + "; " + "; ".join(p for p, _ in problems),
                      "set " + " and ".join(f"{env} to a writable folder" for _, env in problems))
    return result("install", title, "ok", finding)


# ------------------------------------------------------------------------------ cards
def prerequisite_checks(parsed: Any, project_root: Path) -> list[Any]:
    """The re-verification's prerequisite checks of one card (``reverify.PrerequisiteCheck``)."""

    card = parsed.card
    try:
        probes = card_probes(project_root, card)
    except ProbeLoadError:
        probes = {}  # every capability then reads "no probe": lint names the broken file
    ctx = ProbeContext(project_root=project_root, card_id=card.id)
    return [check_prerequisite(p, ctx, probes) for p in card.prerequisites]


def _fix_for(check: Any, card_id: str) -> str:
    if check.kind == "package":
        return f"pip install '{check.name}{check.required or ''}'"
    if check.fallback and check.fallback_present:
        return f"{check.name}: check that the project's fallback compiles here: `skill-server check-kernel {card_id}`"
    return f"{check.name}: install what provides it ({check.detail[:120]})"


def card_result(card_id: str, checks: list[Any]) -> CheckResult:
    lines = [PrerequisiteLine(name=c.name, kind=c.kind, met=c.met, detail=c.detail, fallback=c.fallback,
                              fallback_present=c.fallback_present) for c in checks]
    details = CardDetails(card_id=card_id, prerequisites=lines)
    title = f"card {card_id}"
    unmet = [c for c in checks if c.met is not True]
    if not checks:
        return result(f"card:{card_id}", title, "ok", "the card declares no prerequisites", None, details)
    if not unmet:
        return result(f"card:{card_id}", title, "ok", f"all {len(checks)} prerequisite(s) met: "
                      + "; ".join(c.detail for c in checks)[:400], None, details)
    covered = all(c.kind == "capability" and c.fallback_present for c in unmet)
    finding = ("; ".join(f"{c.name}: {c.detail}" for c in unmet))[:600]
    status = "warn" if covered else "missing"
    what = ("reverify reports PREREQUISITE_MISSING; the project's fallback kernels are present" if covered
            else "reverify reports PREREQUISITE_MISSING")
    return result(f"card:{card_id}", title, status, f"{what}: {finding}", "; ".join(_fix_for(c, card_id) for c in unmet)[:400],
                  details)


def check_cards(ctx: CheckContext) -> list[CheckResult]:

    skills = _skills_dir(ctx)
    catalog = Catalog.load(skills, use_cache=False)  # the parse cache writes; doctor only reads
    out = []
    for card_id in sorted(catalog.cards):
        out.append(card_result(card_id, prerequisite_checks(catalog.cards[card_id], skills.resolve().parent)))
    if catalog.problems:
        first = catalog.problems[0]
        out.append(result("cards", "card files", "failed", f"{len(catalog.problems)} card file problem(s); first: "
                          f"{first.file}: {first.message}"[:400], "run `skill-server lint` and fix what it names"))
    if not out:
        out.append(result("cards", "card files", "missing", f"no cards in {skills}",
                          "pass --skills-dir DIR or set SKILL_SERVER_SKILLS_DIR"))
    return out

"""Ledger records -> a card skeleton in the drafts area, for a person to finish and promote.

Drafts are not knowledge yet: they live in ``<project>/drafts/<id>/`` (or
``$SKILL_SERVER_DRAFTS_DIR``), outside the skills folder, so matching, listing and the
resources never serve them. ``skill-server drafts`` lists them with their lint findings;
``skill-server promote ID`` (a person, never an agent) moves one into the skills folder
once it passes lint: schema, artifacts, verifier binding, overlap (no duplicate of an
existing card) and no TODO placeholder left.

The draft claims only what the records show: its generations are the ones the records
were measured on, its speedup floor the lowest FASTER speedup recorded, its status
``experimental``; the match space and verifier binding start from the source card the
records belong to. The records also go beside it as a ``ledger_export`` artifact.
"""
from __future__ import annotations

import math
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from skill_server import is_embedded, state_dir
from skill_server.cards.lint import TODO_MESSAGE, lint_card
from skill_server.cards.lint_binding import binding_problems, probe_problems
from skill_server.cards.schema import CardParseError, CardProblem, ParsedCard, parse_card_file, parse_card_text
from skill_server.cards.vocabulary import VocabularyError, vocabulary
from skill_server.ledger.export import DEFAULT_EXPORT_NAME, artifact_from_results, dump_artifact, write_text_atomic
from skill_server.ledger.results import LedgerError, StoredResult
from skill_server.matching.overlap import Subject, check
from skill_server.settings import settings

TODO = "TODO"
DRAFTS_ENV = "SKILL_SERVER_DRAFTS_DIR"
CARD_ID = re.compile(r"[a-z0-9][a-z0-9_]*")
SECTIONS = (
    ("When to use", "TODO: the problem signature this recipe triggers on (operator, generation, dtype, scale format, "
                    "regime, shapes), and when it does NOT apply."),
    ("Mechanism", "TODO: why the candidate is faster and why it stays correct."),
    ("Procedure", "TODO: the steps to reproduce the candidate, in order."),
    ("Knobs & pitfalls", "TODO: the knobs that matter, and what silently breaks."),
    ("Do-no-harm notes", "TODO: what must not change (parity rule, dispatch, scales)."),
)


class DraftResult(BaseModel):
    card_id: str
    path: str = Field(description="the SKILL.md written")
    artifact: str = Field(description="the ledger_export artifact written beside it")
    records: list[int]
    source_card: str
    gens: list[str]
    speedup_floor: float
    todo_count: int
    problems: list[str] = Field(default_factory=list, description="lint findings on the draft besides its TODOs")
    overlap: dict = Field(default_factory=dict, description="check_overlap of the draft against the catalog")
    promote: str = Field("", description="what a person does next")


class DraftSummary(BaseModel):
    card_id: str
    path: str
    errors: list[str] = Field(default_factory=list, description="lint errors: block promotion")
    warnings: list[str] = Field(default_factory=list)
    todo_count: int = 0
    promotable: bool = Field(description="passes lint with no TODO left: `skill-server promote ID` will accept it")


class PromoteResult(BaseModel):
    card_id: str
    path: str = Field(description="the card's SKILL.md in the skills folder")


def default_drafts_dir(project_root: Path) -> Path:
    """``$SKILL_SERVER_DRAFTS_DIR``, else ``<project>/drafts``; for the read-only cards of an
    installed package, ``drafts/`` in the user's state folder."""

    explicit = settings().drafts_dir
    if explicit:
        return Path(explicit).expanduser().resolve()
    if is_embedded(project_root):
        return (state_dir(project_root) / "drafts").resolve()
    return (Path(project_root) / "drafts").resolve()


def _floor2(x: float) -> float:
    return math.floor(x * 100) / 100


def build_draft(new_id: str, source: ParsedCard, results: Sequence[StoredResult], project_root: Path,
                card_dir: Path, ledger_path: Path | str, gens: Sequence[str] | None = None,
                title: str | None = None, final_dir: Path | None = None) -> tuple[str, str]:
    """Return (SKILL.md text, artifact text); raises LedgerError when the records cannot support a card."""
    if not results:
        raise LedgerError("no ledger records selected: nothing to draft from")
    src = source.card
    faster = [r for r in results if r.verdict == "FASTER" and r.speedup]
    if not faster:
        raise LedgerError("none of the selected records has verdict FASTER: a card needs measured evidence of a win "
                          f"(verdicts: {sorted({r.verdict for r in results})})")
    vocab = vocabulary()
    if gens:
        try:
            gen_list = sorted({vocab.generation(g) for g in gens})
        except VocabularyError as exc:
            raise LedgerError(str(exc)) from None
    else:
        gen_list = sorted({r.platform.generation for r in faster if r.platform.generation and vocab.is_known_generation(r.platform.generation)})
        if not gen_list:
            raise LedgerError("the FASTER records carry no GPU generation (measured on cpu?): give the generations "
                              "the card should claim (--gens)")
    floor = _floor2(min(r.speedup for r in faster))  # type: ignore[type-var]
    if floor <= 0:
        raise LedgerError(f"lowest FASTER speedup {min(r.speedup for r in faster)} rounds to 0")
    dates = sorted(r.recorded_at.date().isoformat() for r in results)
    ids = sorted(r.id for r in results)
    # the artifact path the card names is where promotion puts it (skills/<id>/)
    home = (final_dir or card_dir) / DEFAULT_EXPORT_NAME
    artifact_rel = home.resolve().relative_to(project_root.resolve()).as_posix()

    match = src.match.model_dump(mode="json", exclude_none=True)
    match["gens"] = gen_list
    measured_iso = "; ".join(f"{r.speedup:.4g}x at {r.shape_text} ({r.candidate.name} vs {r.baseline.name}, "
                             f"{r.platform.device}, {r.evidence.level})" for r in sorted(faster, key=lambda r: r.id))
    parity_bits = sorted({("passed" if r.parity_passed else "failed" if r.parity_passed is False else "not stated")
                          for r in results})
    verifier = src.verifier.model_dump(mode="json", exclude_none=True) if src.verifier else None
    if verifier is not None:
        verifier["shapes"] = list(dict.fromkeys(r.shape_text for r in results))
        verifier["problem"] = new_id  # its own problem folder: a wrapper of the source's (kernel_files)
    front = {
        "id": new_id,
        "title": title or f"TODO: one-line title ({src.id} measured on {', '.join(gen_list)})",
        "kind": "expert_skill",
        "authors": sorted({r.recorded_by for r in results}),
        "scope": src.scope,
        "match": match,
        "expects": {k: v for k, v in {
            "isolated_speedup_min": floor,
            "isolated_scope": src.expects.isolated_scope,
            "parity": src.expects.parity,
            "noise_floor": src.expects.noise_floor,
        }.items() if v is not None},
        "validation": {
            "status": "experimental",
            "last_verified": dates[-1],
            "gpu": "; ".join(sorted({r.platform.device for r in results})),
            "model": f"TODO: the model / workload measured; figures from ledger records #{', #'.join(map(str, ids))}",
            "measured": {"isolated": measured_iso, "e2e_pct": "", "parity": f"verifier parity {', '.join(parity_bits)}"},
            "artifact": artifact_rel,
            "notes": f"Drafted from the results ledger (source card {src.id}) by skill-server draft-card. "
                     "TODO: a person reviews every TODO, then promotes the draft (skill-server promote).",
        },
        "role": "advisory_prior",
        "supersedes": [],
    }
    if src.prerequisites:
        front["prerequisites"] = [p.model_dump(mode="json", exclude_none=True) for p in src.prerequisites]
    if verifier is not None:
        front["verifier"] = verifier
    fm = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=110)
    body = [f"## {name}\n{text}\n" for name, text in SECTIONS]
    body.append("## Evidence (from the results ledger)\n" + _evidence_table(results) + "\n")
    text = f"---\n{fm}---\n\n" + "\n".join(body)
    artifact = artifact_from_results(new_id, results, ledger_path)
    art_text = dump_artifact(artifact, header=f"Exported from the results ledger for the draft card {new_id}.")
    try:
        parse_card_text(text, str(card_dir / "SKILL.md"))
    except CardParseError as exc:  # a bug here, not the user's: say so plainly
        raise LedgerError(f"the generated draft does not parse: {exc}") from None
    return text, art_text


def _evidence_table(results: Sequence[StoredResult]) -> str:
    rows = ["| record | evidence | shape | baseline | candidate | speedup | verdict | platform | date |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: r.id):
        def t(a) -> str:  # noqa: ANN001
            return f"{a.name} ({a.time_ms:.4g} ms)" if a.time_ms else a.name
        sp = f"{r.speedup:.4g}x" if r.speedup else "-"
        if r.interval:
            sp += f" [{r.interval[0]:.4g}, {r.interval[1]:.4g}]"
        rows.append(f"| #{r.id} | {r.evidence.level} | {r.shape_text} | {t(r.baseline)} | {t(r.candidate)} | {sp} | {r.verdict} | "
                    f"{r.platform.key} ({r.platform.device}) | {r.recorded_at.date().isoformat()} |")
    return "\n".join(rows)


KERNELS_SUBDIR = "kernels"


def kernel_files(new_id: str, source: ParsedCard, project_root: Path) -> dict[str, str]:
    """The draft's own kernels folder (``kernels/<new_id>/`` after promotion): a problem
    that is the source card's problem declaring the new card, and the source's probes.
    Every card binds a problem that names it, so verified reports of the new card are the
    new card's, never the source's."""
    if source.card.verifier is None:
        return {}
    folder = source.card.verifier.problem
    problem = "\n".join([
        f'"""Verifier problem of the drafted card ``{new_id}``: the problem of ``{source.card.id}``',
        f"(kernels/{folder}/problem.py) declaring this card. Drafted by skill-server draft-card; replace it",
        'with the card\'s own problem when its inputs, arms or parity differ."""',
        "import dataclasses",
        "",
        f"from skill_kernels.{folder}.problem import PROBLEM as _SOURCE",
        "",
        f'PROBLEM = dataclasses.replace(_SOURCE, card_id="{new_id}")',
        ""])
    out = {"problem.py": problem}
    if (Path(project_root) / "kernels" / folder / "probes.py").is_file():
        out["probes.py"] = "\n".join([
            f'"""Capability probes of the drafted card ``{new_id}``: those of ``{source.card.id}``."""',
            f"from skill_kernels.{folder}.probes import PROBES  # noqa: F401", ""])
    return out


def write_draft(card_dir: Path, text: str, artifact_text: str, kernels: dict[str, str] | None = None
                ) -> tuple[Path, Path]:
    skill = card_dir / "SKILL.md"
    if skill.exists():
        raise LedgerError(f"{skill} already exists: drafts never overwrite a card; choose a new id")
    artifact = card_dir / DEFAULT_EXPORT_NAME
    for name, code in (kernels or {}).items():
        write_text_atomic(card_dir / KERNELS_SUBDIR / name, code)
    write_text_atomic(artifact, artifact_text)
    write_text_atomic(skill, text)
    return skill, artifact


def count_todos(text: str) -> int:
    return text.count(TODO)


# ------------------------------------------------------------------------ drafts area
def draft_from_records(new_id: str, results: Sequence[StoredResult], catalog: Any, project_root: Path,
                       drafts_dir: Path, ledger_path: Path | str, gens: Sequence[str] | None = None,
                       title: str | None = None) -> DraftResult:
    """Write ``drafts/<new_id>/`` from ledger records of one card and lint it."""

    if not CARD_ID.fullmatch(new_id or ""):
        raise LedgerError(f"card id {new_id!r}: lower-case letters, digits and '_' (as folder names)")
    if new_id in catalog.cards:
        raise LedgerError(f"card id {new_id!r} is taken by {catalog.cards[new_id].path}")
    sources = sorted({r.card_id for r in results})
    if len(sources) > 1:
        raise LedgerError(f"the selected records belong to several cards ({sources}): draft from one at a time")
    if not sources:
        raise LedgerError("no ledger records match the selection")
    if sources[0] not in catalog.cards:
        raise LedgerError(f"the records belong to card {sources[0]!r}, which is not in the catalog")
    source = catalog.cards[sources[0]]
    card_dir = Path(drafts_dir) / new_id
    final_dir = catalog.skills_dir / new_id
    text, artifact_text = build_draft(new_id, source, results, project_root, card_dir, ledger_path, gens=gens,
                                      title=title, final_dir=final_dir)
    if (Path(project_root) / "kernels" / new_id).exists():
        raise LedgerError(f"kernels/{new_id} already exists: choose another id for the draft")
    skill_path, artifact_path = write_draft(card_dir, text, artifact_text, kernel_files(new_id, source, project_root))
    parsed = parse_card_text(text, str(skill_path))
    problems = [str(p) for p in lint_draft(parsed, catalog, project_root) if TODO_MESSAGE not in p.message]
    overlap = check(Subject.of(parsed.card), [Subject.of(p.card) for p in catalog.cards.values()], f"draft {new_id}")
    return DraftResult(card_id=new_id, path=str(skill_path), artifact=str(artifact_path),
                       records=sorted(r.id for r in results), source_card=source.card.id,
                       gens=list(parsed.card.match.gens), speedup_floor=parsed.card.expects.isolated_speedup_min,
                       todo_count=count_todos(text), problems=problems, overlap=overlap.model_dump(mode="json"),
                       promote=f"not served until a person replaces the TODOs, `skill-server lint` passes and "
                               f"`skill-server promote {new_id}` moves it into {final_dir}")


def lint_draft(parsed: ParsedCard, catalog: Any, project_root: Path) -> list[CardProblem]:
    """Everything promotion requires: the card's own checks (its artifact in the draft
    folder), the verifier binding and probes, and no duplicate of a catalog card."""

    kernels = parsed.folder / KERNELS_SUBDIR
    problems = lint_card(parsed, project_root, catalog, artifact_dir=parsed.folder, kernels_dir=kernels)
    problems += binding_problems(parsed, project_root, kernels_dir=kernels)
    problems += probe_problems(parsed, project_root, kernels_dir=kernels)
    overlap = check(Subject.of(parsed.card), [Subject.of(p.card) for p in catalog.cards.values()],
                    f"draft {parsed.card.id}")
    for dup in overlap.duplicates:
        problems.append(CardProblem(file=str(parsed.path), line=parsed.line_of("match"), field="match",
                                    message=f"match space duplicates card {dup!r}: narrow the match before promoting"))
    return problems


def list_drafts(drafts_dir: Path, catalog: Any, project_root: Path) -> list[DraftSummary]:
    out = []
    if not Path(drafts_dir).is_dir():
        return out
    for folder in sorted(p for p in Path(drafts_dir).iterdir() if p.is_dir()):
        skill = folder / "SKILL.md"
        if not skill.is_file():
            continue
        try:
            parsed = parse_card_file(skill)
        except CardParseError as exc:
            out.append(DraftSummary(card_id=folder.name, path=str(skill), errors=[str(p) for p in exc.problems],
                                    promotable=False))
            continue
        problems = lint_draft(parsed, catalog, project_root)
        errors = [str(p) for p in problems if p.severity == "error"]
        warnings = [str(p) for p in problems if p.severity != "error"]
        todos = count_todos(skill.read_text(encoding="utf-8"))
        out.append(DraftSummary(card_id=parsed.card.id, path=str(skill), errors=errors, warnings=warnings,
                                todo_count=todos, promotable=not errors and todos == 0))
    return out


def promote(draft_id: str, drafts_dir: Path, skills_dir: Path, catalog: Any, project_root: Path) -> PromoteResult:
    """Move ``drafts/<id>/`` into the skills folder when it passes lint with no TODO left."""
    if not CARD_ID.fullmatch(draft_id or ""):
        raise LedgerError(f"draft id {draft_id!r}: lower-case letters, digits and '_'")
    folder = Path(drafts_dir) / draft_id
    skill = folder / "SKILL.md"
    if not skill.is_file():
        known = ", ".join(d.card_id for d in list_drafts(drafts_dir, catalog, project_root)) or "none"
        raise LedgerError(f"no draft {draft_id!r} in {drafts_dir}; drafts: {known}")
    target = Path(skills_dir) / draft_id
    if target.exists() or draft_id in catalog.cards:
        raise LedgerError(f"{target} already exists: a draft never replaces a card")
    kernels_target = Path(project_root) / "kernels" / draft_id
    if (folder / KERNELS_SUBDIR).is_dir() and kernels_target.exists():
        raise LedgerError(f"{kernels_target} already exists: a draft never replaces a card's kernels")
    try:
        parsed = parse_card_file(skill)
    except CardParseError as exc:
        raise LedgerError("the draft does not parse: " + "; ".join(str(p) for p in exc.problems)) from None
    if parsed.card.id != draft_id:
        raise LedgerError(f"{skill}: id {parsed.card.id!r} differs from its folder name {draft_id!r}")
    errors = [str(p) for p in lint_draft(parsed, catalog, project_root) if p.severity == "error"]
    todos = count_todos(skill.read_text(encoding="utf-8"))
    if todos:
        errors.append(f"{skill}: {todos} TODO placeholder(s) left: a person replaces each first")
    if errors:
        raise LedgerError(f"draft {draft_id!r} is not promoted: " + "; ".join(errors))
    if (folder / KERNELS_SUBDIR).is_dir():  # the problem first: a served card always finds its binding
        _move(folder / KERNELS_SUBDIR, kernels_target)
    _move(folder, target)
    return PromoteResult(card_id=draft_id, path=str(target / "SKILL.md"))


def _move(source: Path, target: Path) -> None:
    """One rename on one file system (the folder appears whole or not at all); across file
    systems a copy to a hidden name, then one rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(source, target)
    except OSError:
        staging = target.with_name(f".{target.name}.promoting")
        shutil.copytree(source, staging)
        os.rename(staging, target)
        shutil.rmtree(source)

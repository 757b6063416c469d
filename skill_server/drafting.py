"""Ledger records -> a lint-clean card skeleton for a person to finish.

The draft claims only what the records show: its generations are the ones the records
were measured on, its speedup floor the lowest FASTER speedup recorded, its status
``experimental``; the match space and verifier binding start from the source card the
records belong to. Prose sections are TODO placeholders (lint warns about each draft
until a person replaces them). The records also go beside it as a ``ledger_export``
validation artifact.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import yaml
from pydantic import BaseModel, Field

from .cards import CardParseError, ParsedCard, parse_card_text
from .ledger import LedgerError, StoredResult
from .ledger_export import DEFAULT_EXPORT_NAME, artifact_from_results, dump_artifact, write_text_atomic
from .vocabulary import VocabularyError, vocabulary

TODO = "TODO"
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


def _floor2(x: float) -> float:
    return math.floor(x * 100) / 100


def build_draft(new_id: str, source: ParsedCard, results: Sequence[StoredResult], project_root: Path,
                card_dir: Path, ledger_path: Path | str, gens: Sequence[str] | None = None,
                title: str | None = None) -> tuple[str, str]:
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
    artifact_rel = (card_dir / DEFAULT_EXPORT_NAME).resolve().relative_to(project_root.resolve()).as_posix()

    match = src.match.model_dump(mode="json", exclude_none=True)
    match["gens"] = gen_list
    measured_iso = "; ".join(f"{r.speedup:.4g}x at {r.shape_text} ({r.candidate.name} vs {r.baseline.name}, "
                             f"{r.platform.device})" for r in sorted(faster, key=lambda r: r.id))
    parity_bits = sorted({("passed" if r.parity_passed else "failed" if r.parity_passed is False else "not stated")
                          for r in results})
    verifier = src.verifier.model_dump(mode="json", exclude_none=True) if src.verifier else None
    if verifier is not None:
        verifier["shapes"] = list(dict.fromkeys(r.shape_text for r in results))
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
                     "TODO: a person reviews every TODO before the status moves past experimental.",
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
    rows = ["| record | shape | baseline | candidate | speedup | verdict | platform | date |",
            "|---|---|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: r.id):
        def t(a) -> str:  # noqa: ANN001
            return f"{a.name} ({a.time_ms:.4g} ms)" if a.time_ms else a.name
        sp = f"{r.speedup:.4g}x" if r.speedup else "-"
        if r.interval:
            sp += f" [{r.interval[0]:.4g}, {r.interval[1]:.4g}]"
        rows.append(f"| #{r.id} | {r.shape_text} | {t(r.baseline)} | {t(r.candidate)} | {sp} | {r.verdict} | "
                    f"{r.platform.key} ({r.platform.device}) | {r.recorded_at.date().isoformat()} |")
    return "\n".join(rows)


def write_draft(card_dir: Path, text: str, artifact_text: str) -> tuple[Path, Path]:
    skill = card_dir / "SKILL.md"
    if skill.exists():
        raise LedgerError(f"{skill} already exists: drafts never overwrite a card; choose a new id or folder")
    artifact = card_dir / DEFAULT_EXPORT_NAME
    write_text_atomic(artifact, artifact_text)
    write_text_atomic(skill, text)
    return skill, artifact


def count_todos(text: str) -> int:
    return text.count(TODO)

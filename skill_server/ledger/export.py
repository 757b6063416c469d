"""Ledger records -> a validation artifact (``source.kind: ledger_export``) beside the card.

The export never overwrites an artifact of another origin (the one transcribed from the
card's prose): it refuses and asks for another path. An earlier ledger export is replaced
only when asked (``force``). Files are validated before they are written and replaced
atomically.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import yaml

from skill_server.cards.artifacts import ArmFigure, ArtifactSource, Measurement, ValidationArtifact, parse_artifact
from skill_server.ledger.results import LedgerError, StoredResult

DEFAULT_EXPORT_NAME = "validation_ledger.yaml"
TIME_AGREEMENT = 0.01  # the artifact format's own tolerance between times and speedup


def artifact_from_results(card_id: str, results: Sequence[StoredResult], ledger_path: Path | str) -> ValidationArtifact:
    if not results:
        raise LedgerError(f"the ledger holds no results for card {card_id!r}: nothing to export")
    measurements = [measurement_from(r) for r in sorted(results, key=lambda r: r.id)]
    devices = sorted({r.platform.device for r in results})
    software: dict[str, set[str]] = {}
    for r in results:
        for name, version in r.platform.libraries.items():
            software.setdefault(name, set()).add(version)
    stamp = datetime.now(UTC).date().isoformat()
    return ValidationArtifact(
        card_id=card_id,
        source=ArtifactSource(kind="ledger_export",
                              note=f"{len(results)} ledger record(s) (#{', #'.join(str(r.id) for r in sorted(results, key=lambda r: r.id))}) "
                                   f"exported from {ledger_path} on {stamp}"),
        gpu=devices[0] if len(devices) == 1 else "; ".join(devices),
        software={name: " / ".join(sorted(v)) for name, v in sorted(software.items())},
        measurements=measurements,
        limitations=["Exported from the results ledger: figures as recorded; the full verifier reports live at each "
                     "measurement's report path when one was given."],
    )


def measurement_from(r: StoredResult) -> Measurement:
    b, c = r.baseline, r.candidate
    agree = bool(r.speedup and b.time_ms and c.time_ms
                 and abs(b.time_ms / c.time_ms - r.speedup) / r.speedup <= TIME_AGREEMENT)

    def arm(a) -> ArmFigure:  # noqa: ANN001
        if a.time_ms is None or agree or r.speedup is None:
            return ArmFigure(name=a.name, time_ms=a.time_ms)
        # the speedup is a median of per-round ratios; the medians' ratio differs by more
        # than the artifact format allows, so the time goes in the note, not the checked field
        return ArmFigure(name=a.name, note=f"median {a.time_ms:.6g} ms")

    text = None
    if r.interval:
        text = f"{r.speedup:.4g}x (95% interval {r.interval[0]:.4g}-{r.interval[1]:.4g})" if r.speedup else None
    parity = dict(r.parity)
    if r.parity_passed is not None:
        parity["passed"] = r.parity_passed
    return Measurement(
        scope=r.scope, what=f"{c.name} vs {b.name}", shape=dict(r.shape), baseline=arm(b), candidate=arm(c),
        speedup=r.speedup, speedup_text=text, parity=parity, verdict=r.verdict,
        date=r.recorded_at.date().isoformat(), gpu=r.platform.device,
        method=f"{r.evidence.level} {r.source}, recorded by {r.recorded_by} on {r.platform.key} "
               f"(ledger #{r.id}, git {r.git_rev or 'unknown'})"
               + (f"; report {r.report_path}" if r.report_path else ""),
        notes=r.notes,
    )


def dump_artifact(artifact: ValidationArtifact, header: str | None = None) -> str:
    data = artifact.model_dump(mode="json", exclude_none=True)
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110)
    lines = [f"# {line}" for line in (header or "").splitlines()]
    return ("\n".join(lines) + "\n" if lines else "") + text


def check_export_target(path: Path, project_root: Path, card_id: str, force: bool) -> bool:
    """Refuse a target the export must not write; return True when it replaces an earlier export."""
    root = project_root.resolve()
    path = path.resolve()
    if not path.is_relative_to(root):
        raise LedgerError(f"export path {path} lies outside the project {root}; write inside it")
    if path.suffix not in (".yaml", ".yml"):
        raise LedgerError(f"export path {path}: a validation artifact is a .yaml file")
    sibling_card = path.parent / "SKILL.md"
    if sibling_card.is_file() and path.parent.name != card_id:
        raise LedgerError(f"export path {path} lies in the folder of another card ({path.parent.name}); "
                          f"lint would reject an artifact for {card_id!r} there")
    if not path.exists():
        return False
    existing, problems = parse_artifact(path)
    if existing is None:
        raise LedgerError(f"{path} exists and is not a valid artifact ({'; '.join(map(str, problems))}); "
                          "choose another path")
    if existing.source.kind != "ledger_export":
        raise LedgerError(f"{path} is the card's {existing.source.kind} artifact: the export never replaces it; "
                          "give another path (the default is a new file beside the card)")
    if not force:
        raise LedgerError(f"{path} holds an earlier ledger export; pass force (--force) to replace it, or give another path")
    return True


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_artifact(artifact: ValidationArtifact, path: Path, project_root: Path, force: bool = False) -> bool:
    replaced = check_export_target(path, project_root, artifact.card_id, force)
    text = dump_artifact(artifact, header="Exported from the results ledger by `skill-server export`; regenerate rather than edit.")
    ValidationArtifact.model_validate(yaml.safe_load(text))  # what is written parses back
    write_text_atomic(path, text)
    return replaced

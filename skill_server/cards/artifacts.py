"""Validation artifacts: the measured numbers behind a card, as YAML beside SKILL.md.

One format for both origins: figures transcribed from a card's prose (``source.kind:
transcribed_from_card``) and figures exported from the results ledger
(``source.kind: ledger_export``).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from skill_server.cards.schema import CardProblem, _DuplicateKey, _problem_from_error, load_yaml, yaml_field_lines
from skill_server.ledger.models import shape_text
from skill_server.reverify.claims import Figure

if TYPE_CHECKING:  # pragma: no cover
    from skill_server.reverify.claims import Figure


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ArtifactSource(_Strict):
    kind: Literal["transcribed_from_card", "ledger_export", "measured"]
    note: str | None = None


class ArmFigure(_Strict):
    name: str
    time_ms: float | None = Field(None, gt=0)
    note: str | None = None


class Measurement(_Strict):
    scope: Literal["isolated", "segment", "kernel", "e2e"]
    what: str = Field(description="what was measured, e.g. the kernel or segment")
    shape: dict[str, int] = Field(default_factory=dict, description="e.g. {M: 4096, N: 2048, K: 7168}")
    label: str | None = Field(None, description="model-side label; provenance only")
    baseline: ArmFigure | None = None
    candidate: ArmFigure | None = None
    speedup: float | None = Field(None, gt=0)
    speedup_text: str | None = Field(None, description="the figure as quoted when it is a range or several figures")
    parity: dict[str, float | str | int | bool] = Field(default_factory=dict)
    verdict: str | None = None
    date: str | None = None
    gpu: str | None = None
    method: str | None = None
    notes: str | None = None

    @model_validator(mode="after")
    def _consistent_speedup(self) -> "Measurement":
        b, c = self.baseline, self.candidate
        if self.speedup and b and c and b.time_ms and c.time_ms:
            implied = b.time_ms / c.time_ms
            if abs(implied - self.speedup) / self.speedup > 0.01:
                raise ValueError(
                    f"speedup {self.speedup} disagrees with baseline/candidate times "
                    f"({b.time_ms} / {c.time_ms} = {implied:.4f})"
                )
        return self


class ValidationArtifact(_Strict):
    card_id: str
    source: ArtifactSource
    gpu: str | None = None
    software: dict[str, str] = Field(default_factory=dict)
    measurements: list[Measurement] = Field(default_factory=list)
    conclusions: list[str] = Field(default_factory=list)
    limitations: list[str] = Field(default_factory=list)


def parse_artifact(path: Path) -> tuple[ValidationArtifact | None, list[CardProblem]]:
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = load_yaml(text)
    except _DuplicateKey as exc:
        return None, [CardProblem(file=file, line=exc.line + 1, field=exc.key, message="duplicate key: YAML would keep only the last value")]
    except (OSError, UnicodeDecodeError) as exc:
        return None, [CardProblem(file=file, message=f"cannot read artifact: {exc}")]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        return None, [CardProblem(file=file, line=(mark.line + 1) if mark else None, message=f"malformed YAML: {getattr(exc, 'problem', exc)}")]
    try:
        return ValidationArtifact.model_validate(data), []
    except ValidationError as exc:
        lines = yaml_field_lines(text, 1)
        return None, [_problem_from_error(e, file, lines) for e in exc.errors()]


def figures_of(artifact: ValidationArtifact, file_name: str) -> list["Figure"]:
    """An artifact's measurements as served figures: always ``transcribed``."""

    out = []
    for m in artifact.measurements:
        if m.speedup is None and not m.speedup_text:
            continue
        shape = shape_text(dict(m.shape)) if m.shape else None
        out.append(Figure(level="transcribed", speedup=m.speedup, text=m.speedup_text, verdict=m.verdict, shape=shape,
                          scope=m.scope, platform=m.gpu or artifact.gpu, date=m.date, source=file_name))
    return out

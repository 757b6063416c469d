"""What a re-verification reports: per prerequisite, per stage, per shape, per card.

Pure data. Statuses (CONFIRMED / DRIFTED / FAILED / PREREQUISITE_MISSING /
NOT_APPLICABLE_HERE) are defined in ``claims.py``.
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from skill_server.reverify.claims import ReverifyStatus
from skill_server.ledger.models import PlatformInfo

StageStatus = Literal["PASS", "FAIL", "MISSING", "SKIPPED", "NOT_APPLICABLE", "CONFIRMED", "DRIFTED"]


class PrerequisiteCheck(BaseModel):
    kind: Literal["package", "capability"]
    name: str
    required: str | None = Field(None, description="the card's version specifier")
    met: bool | None = Field(description="None: could not be checked (counts as not met)")
    found: str | None = Field(None, description="installed version, or what the probe found")
    detail: str
    evidence: list[str] = Field(default_factory=list)
    fallback: str | None = None
    fallback_present: bool | None = Field(None, description="the fallback's project files exist here")


class StageResult(BaseModel):
    name: Literal["prerequisites", "gates", "verifier", "claims"]
    status: StageStatus
    reason: str
    detail: list[dict[str, Any]] = Field(default_factory=list)


class ShapeOutcome(BaseModel):
    shape: str
    verdict: str | None = None
    speedup: float | None = None
    interval: tuple[float, float] | None = None
    floor: float | None = None
    recorded_speedup: float | None = Field(None, description="the card's figure for this shape, when it has one")
    holds: bool | None = Field(None, description="None: not compared on this platform")
    reason: str = ""


class CardReverification(BaseModel):
    card_id: str
    platform: str
    status: ReverifyStatus
    reason: str
    prerequisites: list[PrerequisiteCheck] = Field(default_factory=list)
    stages: list[StageResult] = Field(default_factory=list)
    shapes: list[ShapeOutcome] = Field(default_factory=list)
    report_id: str | None = Field(None, description="the verifier report of this card's run (report://{id})")


class ReverifyRun(BaseModel):
    platform: PlatformInfo
    git_rev: str | None = None
    started_at: datetime
    finished_at: datetime
    cards: list[CardReverification]
    ledger: str | None = Field(None, description="where the statuses were recorded; None: not recorded")

    def table(self) -> str:
        rows = [("card", "platform", "status", "reason")]
        rows += [(c.card_id, c.platform, c.status, short(c.reason, 90)) for c in self.cards]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        lines = [f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}" for r in rows[:1]]
        for card, row in zip(self.cards, rows[1:]):
            lines.append(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}")
            # a shape without a speed verdict says why under its card (the box, or the arms?)
            lines += [f"  {o.shape}: {o.verdict or 'no result'}: {short(o.reason, 110)}" for o in card.shapes if o.reason]
        return "\n".join(lines)


class ReverifyProgress(BaseModel):
    index: int
    total: int
    card_id: str
    stage: str
    message: str


ProgressFn = Callable[[ReverifyProgress], None]


def short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."

"""The doctor's report: every check's result and a summary; the JSON and the human text both
come from this one model (``DoctorFindings.text()``)."""
from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from skill_server.doctor.result import BLOCKING, CheckResult, CheckStatus

STATUSES: tuple[CheckStatus, ...] = ("ok", "warn", "missing", "failed", "not_applicable")
_LABEL = {"ok": "ok", "warn": "WARN", "missing": "MISSING", "failed": "FAILED", "not_applicable": "n/a"}


class DoctorSummary(BaseModel):
    counts: dict[CheckStatus, int]
    to_fix: list[str] = Field(default_factory=list, description="ids of the checks that are missing or failed")
    line: str


class DoctorFindings(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")

    host: str
    python: str
    generated_at: datetime
    wall_s: float
    budget_s: float
    checks: list[CheckResult]
    summary: DoctorSummary

    def check(self, check_id: str) -> CheckResult:
        for c in self.checks:
            if c.id == check_id:
                return c
        raise KeyError(f"no doctor check {check_id!r} in this report")

    def text(self) -> str:
        width = max((len(c.id) for c in self.checks), default=8)
        lines = [f"skill-server doctor on {self.host} (Python {self.python}), {self.generated_at:%Y-%m-%d %H:%M:%S}"]
        for c in self.checks:
            fix = f"  -> fix: {c.fix}" if c.fix and c.status not in ("ok", "not_applicable") else ""
            lines.append(f"{_LABEL[c.status]:<8} {c.id:<{width}}  {c.finding}{fix}")
        lines.append(self.summary.line)
        return "\n".join(lines)


def summarise(checks: list[CheckResult], wall_s: float) -> DoctorSummary:
    counts = {s: sum(1 for c in checks if c.status == s) for s in STATUSES}
    to_fix = [c.id for c in checks if c.status in BLOCKING]
    shown = ", ".join(f"{counts[s]} {s.replace('_', ' ')}" for s in STATUSES)
    tail = f"; fix first: {', '.join(to_fix)}" if to_fix else ""
    return DoctorSummary(counts=counts, to_fix=to_fix, line=f"doctor: {shown} ({len(checks)} checks, {wall_s:.1f} s){tail}")

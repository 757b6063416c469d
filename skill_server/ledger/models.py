"""The results ledger's models: what a record is, what is refused, and what comes back.

Pure data and validation, no I/O. ``ResultRecord`` is what a caller submits (one A/B
result for one card, shape and platform); ``StoredResult`` adds what the ledger assigns
(id, time) and the record's ``Evidence`` (level, digests, signature), which callers never
set. The platform model is the verifier's own (``verifiers.provenance.PlatformInfo``):
one model of a machine for reports and records alike; here its generation is resolved
against the vocabulary (MI355X -> gfx950) and unknown GPU generations are refused.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from skill_server.cards.shapes import parse_shape_text  # the server's one shape parser
from skill_server.cards.vocabulary import VocabularyError, vocabulary
from skill_server.ledger.signing import Evidence
from skill_server.reverify.claims import ReverifyStatus
from skill_server.settings import settings
from verifiers.provenance import PlatformInfo

MAX_PAYLOAD_BYTES = 256 * 1024
FUTURE_SLACK = timedelta(minutes=5)

# Validation context of a row read back from a store. Such a row passed every rule below
# when it was written; read back it is checked against the types and bounds of the
# models (pydantic's own, in Rust), not the write-time rules again, which cost most of a
# history query (~0.1 ms a row). Tampering is caught where it matters: a verified row's
# signature covers its stored payload, and one that fails reads as reported (ledger.py).
STORED_ROW: dict[str, Any] = {"stored_row": True}


def _stored(info: ValidationInfo | None) -> bool:
    return bool(info is not None and info.context and info.context.get("stored_row"))


def median_ratio(a: list[float], b: list[float]) -> float | None:
    """The speedup statistic the verifier reports: the median of per-round ratios a_i / b_i."""
    if not a or len(a) != len(b):
        return None
    ratios = sorted(x / y for x, y in zip(a, b))
    n = len(ratios)
    return ratios[n // 2] if n % 2 else (ratios[n // 2 - 1] + ratios[n // 2]) / 2

Verdict = Literal["FASTER", "SLOWER", "NO_DIFFERENCE", "FAIL"]
Source = Literal["verifier_report", "manual", "reverify"]
Scope = Literal["isolated", "segment", "kernel", "e2e"]
Metric = float | int | str | bool

__all__ = ["ArmResult", "Evidence", "LedgerError", "MAX_PAYLOAD_BYTES", "PlatformInfo", "RecordRejected",
           "ResultRecord", "ReverificationRow", "StoredResult", "StoredReverification", "normalise_platform",
           "parse_shape_text", "shape_text", "validate_record"]


class LedgerError(ValueError):
    """The ledger refused a request; the message says what to change."""


class RecordRejected(LedgerError):
    """A record failed validation; nothing was written."""

    def __init__(self, problems: list[str], index: int | None = None):
        self.problems = problems
        where = f"record #{index}: " if index is not None else ""
        super().__init__(where + "refused, nothing written: " + "; ".join(problems))


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, str_max_length=20_000)


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
_NONNEG_METRIC = re.compile(r"abs|l2|err|mismatch|diff|out_of_tol|nan|inf_count", re.IGNORECASE)
_COSINE_METRIC = re.compile(r"^(min_)?cos(ine|_sim)?$", re.IGNORECASE)


def _check_metrics(metrics: dict[str, Metric], where: str) -> dict[str, Metric]:
    if len(metrics) > 64:
        raise ValueError(f"{where}: at most 64 metrics, got {len(metrics)}")
    for key, value in metrics.items():
        if not 0 < len(key) <= 64:
            raise ValueError(f"{where}: metric names are 1-64 characters, got {key!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            if isinstance(value, str) and len(value) > 2000:
                raise ValueError(f"{where}.{key}: text longer than 2000 characters")
            continue
        if not math.isfinite(value):
            raise ValueError(f"{where}.{key}: {value} is not a finite number")
        if _COSINE_METRIC.search(key) and not -1.000001 <= value <= 1.000001:
            raise ValueError(f"{where}.{key}: a cosine lies in [-1, 1], got {value}")
        elif _NONNEG_METRIC.search(key) and value < 0:
            raise ValueError(f"{where}.{key}: an error or mismatch count cannot be negative, got {value}")
    return metrics


def shape_text(dims: dict[str, int]) -> str:
    """Canonical text: ``MxNxK`` for plain GEMM shapes, else ``name=value,...`` in given order."""
    if list(dims) == ["M", "N", "K"]:
        return f"{dims['M']}x{dims['N']}x{dims['K']}"
    return ",".join(f"{k}={v}" for k, v in dims.items())


def default_recorder(tool: str | None = None) -> str:
    """Who records when nobody says: ``$SKILL_SERVER_USER``, else the login name, with the
    front end that recorded (``alice (run_verifier)``)."""

    name = settings().user
    if not name:
        try:
            import getpass

            name = getpass.getuser()
        except (OSError, KeyError):
            name = "unknown"
    return f"{name} ({tool})" if tool else name


def normalise_platform(platform: PlatformInfo) -> PlatformInfo:
    """Resolve the generation against the vocabulary (aliases such as MI355X -> gfx950).
    An unknown GPU generation is refused; a CPU keeps its machine arch."""

    if platform.generation is None:
        return platform
    try:
        gen = vocabulary().generation(platform.generation)
    except VocabularyError as exc:
        if platform.runtime != "cpu":
            raise ValueError(str(exc)) from None
        if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,40}", platform.generation):
            raise ValueError(f"generation {platform.generation!r}: use a short identifier such as x86_64") from None
        return platform
    return platform if gen == platform.generation else platform.model_copy(update={"generation": gen})


class ArmResult(_In):
    name: str = Field(min_length=1, max_length=200, description="arm name, e.g. ck_blockscale or flydsl_4wave")
    time_ms: float | None = Field(None, gt=0, description="the arm's representative time (median), ms")
    times_ms: list[float] = Field(default_factory=list, max_length=10_000, description="per-round times, ms")
    parity: dict[str, Metric] = Field(default_factory=dict, description="this arm against the oracle")

    @field_validator("times_ms")
    @classmethod
    def _positive_times(cls, v: list[float], info: ValidationInfo) -> list[float]:
        if _stored(info):
            return v
        bad = [t for t in v if not t > 0]
        if bad:
            raise ValueError(f"times must be positive milliseconds; got {bad[:3]}")
        return v

    @field_validator("parity")
    @classmethod
    def _metrics(cls, v: dict[str, Metric], info: ValidationInfo) -> dict[str, Metric]:
        return v if _stored(info) else _check_metrics(v, "parity")


class ResultRecord(_In):
    """One A/B result for one card, shape and platform."""

    card_id: str = Field(min_length=1, max_length=120)
    shape: dict[str, int] = Field(description="{M: 4096, N: 2048, K: 7168} or the text form 4096x2048x7168")
    scope: Scope = "isolated"
    baseline: ArmResult
    candidate: ArmResult
    verdict: Verdict
    speedup: float | None = Field(None, gt=0, description="baseline time / candidate time (median of per-round ratios)")
    interval: tuple[float, float] | None = Field(None, description="95% interval of the speedup (low, high)")
    parity: dict[str, Metric] = Field(default_factory=dict, description="parity figures of the candidate (summary)")
    parity_passed: bool | None = None
    stages: dict[str, str] = Field(default_factory=dict, description="verifier stage -> status")
    platform: PlatformInfo
    git_rev: str | None = Field(None, description="git revision of the project (hex, optional '-dirty')")
    recorded_at: datetime | None = Field(None, description="default: now (UTC)")
    recorded_by: str = Field(min_length=1, max_length=100, description="agent or user name")
    source: Source
    report_path: str | None = Field(None, max_length=1000, description="the verifier report, inside the project")
    notes: str | None = Field(None, max_length=4000)

    @field_validator("card_id")
    @classmethod
    def _known_card(cls, v: str, info: ValidationInfo) -> str:
        known = (info.context or {}).get("known_cards")
        if known is not None and v not in known:
            shown = ", ".join(sorted(known)[:20]) or "none"
            raise ValueError(f"unknown card {v!r}; known cards: {shown}")
        return v

    @field_validator("shape", mode="before")
    @classmethod
    def _shape_from_text(cls, v: Any) -> Any:
        return parse_shape_text(v) if isinstance(v, str) else v

    @field_validator("shape")
    @classmethod
    def _shape_values(cls, v: dict[str, int], info: ValidationInfo) -> dict[str, int]:
        if _stored(info):
            return v
        if not 1 <= len(v) <= 8:
            raise ValueError(f"a shape has 1-8 dimensions, got {len(v)}")
        for key, value in v.items():
            if not _IDENT.match(key):
                raise ValueError(f"dimension name {key!r}: letters, digits and '_' only")
            if not 0 < value <= 1 << 40:
                raise ValueError(f"dimension {key}={value}: must be a positive integer")
        return v

    @field_validator("parity")
    @classmethod
    def _metrics(cls, v: dict[str, Metric], info: ValidationInfo) -> dict[str, Metric]:
        return v if _stored(info) else _check_metrics(v, "parity")

    @field_validator("platform")
    @classmethod
    def _platform(cls, v: PlatformInfo, info: ValidationInfo) -> PlatformInfo:
        return v if _stored(info) else normalise_platform(v)

    @field_validator("stages")
    @classmethod
    def _stages(cls, v: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if _stored(info):
            return v
        if len(v) > 32 or any(len(k) > 64 or len(s) > 200 for k, s in v.items()):
            raise ValueError("stages: at most 32 entries, names <= 64 and statuses <= 200 characters")
        return v

    @field_validator("git_rev")
    @classmethod
    def _git_rev(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and not _stored(info) and not re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?", v):
            raise ValueError(f"git_rev {v!r}: expected a hex revision (7-40 characters), optionally with '-dirty'")
        return v

    @field_validator("recorded_by")
    @classmethod
    def _printable(cls, v: str) -> str:
        if not v.strip() or any(ord(c) < 32 for c in v):
            raise ValueError("recorded_by: a non-empty name without control characters")
        return v.strip()

    @field_validator("recorded_at")
    @classmethod
    def _not_future(cls, v: datetime | None, info: ValidationInfo) -> datetime | None:
        if v is None:
            return None
        v = v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
        if not _stored(info) and v > datetime.now(UTC) + FUTURE_SLACK:
            raise ValueError(f"recorded_at {v.isoformat()} lies in the future")
        return v

    @field_validator("report_path")
    @classmethod
    def _inside_project(cls, v: str | None, info: ValidationInfo) -> str | None:
        root = (info.context or {}).get("project_root")
        if v is None or root is None:
            return v
        root = Path(root).resolve()
        path = Path(v)
        resolved = (path if path.is_absolute() else root / path).resolve()
        if not resolved.is_relative_to(root):
            raise ValueError(f"report_path {v!r} lies outside the project {root}; keep reports inside it")
        return str(resolved.relative_to(root))

    @model_validator(mode="after")
    def _coherent(self, info: ValidationInfo) -> "ResultRecord":
        if _stored(info):
            return self
        if self.verdict == "FAIL" and self.parity_passed is None and not self.stages:
            raise ValueError("verdict FAIL needs the reason: parity_passed=false or the failing stage in stages")
        s = self.speedup
        if self.verdict != "FAIL" and s is None:
            raise ValueError(f"verdict {self.verdict} needs a speedup (only FAIL may come without one)")
        if s is not None and self.verdict == "FASTER" and s <= 1.0:
            raise ValueError(f"verdict FASTER with speedup {s} <= 1: impossible; check the arms' order")
        if s is not None and self.verdict == "SLOWER" and s >= 1.0:
            raise ValueError(f"verdict SLOWER with speedup {s} >= 1: impossible; check the arms' order")
        if self.interval is not None:
            lo, hi = self.interval
            if not (lo > 0 and hi > 0):
                raise ValueError(f"interval {self.interval}: bounds must be positive")
            if lo > hi:
                raise ValueError(f"interval {self.interval}: low bound above high bound")
            if s is not None and not lo * (1 - 1e-9) <= s <= hi * (1 + 1e-9):
                raise ValueError(f"speedup {s} lies outside its own interval {self.interval}")
        if self.source != "manual":
            # derived from a verifier report: its speedup is the verifier's statistic (the median of
            # per-round ratios, timer floor subtracted), which the arms' medians do not reproduce; a
            # report is held to account by its digest and signature, not by this rule
            return self
        # a hand-made record: the speedup is meant as the verifier's statistic (the median of
        # per-round ratios); with per-round times it is checked against exactly that, with
        # medians only against their ratio
        per_round = median_ratio(self.baseline.times_ms, self.candidate.times_ms)
        b, c = self.baseline.time_ms, self.candidate.time_ms
        if s is not None and per_round is not None:
            if abs(per_round - s) / s > 0.10:
                raise ValueError(f"speedup {s} disagrees with the median of the per-round time ratios "
                                 f"({per_round:.4f}): arms swapped or units mixed?")
        elif s is not None and b and c:
            implied = b / c
            if abs(implied - s) / s > 0.10:
                raise ValueError(
                    f"speedup {s} disagrees with the arms' times ({b} / {c} = {implied:.4f}): "
                    "arms swapped or units mixed?")
        return self

    @property
    def shape_text(self) -> str:
        return shape_text(self.shape)


class StoredResult(ResultRecord):
    """A record as read back: its id, time and evidence (level checked when read)."""

    id: int
    uid: str
    recorded_at: datetime  # type: ignore[assignment]  # always set once stored
    evidence: Evidence = Field(default_factory=lambda: Evidence(level="reported"))
    # the JSON object exactly as stored: what the record's signature covers
    _payload: dict[str, Any] | None = PrivateAttr(None)
    # a digest of the stored row's exact bytes (id, uid, payload, evidence), when read from a ledger
    _row: bytes | None = PrivateAttr(None)

    def stored_payload(self) -> dict[str, Any]:
        if self._payload is not None:
            return self._payload
        data = self.model_dump(mode="json", exclude={"id", "uid", "evidence", "recorded_at"})
        data["recorded_at"] = self.recorded_at.isoformat()
        return data


class ReverificationRow(_In):
    card_id: str = Field(min_length=1, max_length=120)
    platform: PlatformInfo
    status: ReverifyStatus
    reason: str = Field(min_length=1, max_length=4000)
    recorded_at: datetime | None = None
    recorded_by: str = Field(min_length=1, max_length=100)
    git_rev: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict, description="the per-card re-verification report")

    @field_validator("platform")
    @classmethod
    def _platform(cls, v: PlatformInfo, info: ValidationInfo) -> PlatformInfo:
        return v if _stored(info) else normalise_platform(v)


class StoredReverification(ReverificationRow):
    id: int
    uid: str
    recorded_at: datetime  # type: ignore[assignment]
    evidence: Evidence = Field(default_factory=lambda: Evidence(level="reported"))


def validate_record(data: Any, known_cards: Iterable[str] | None = None,
                    project_root: Path | None = None, index: int | None = None) -> ResultRecord:
    """Validate one record (a dict or a ResultRecord) or raise RecordRejected with every problem."""
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json", exclude_none=True)
    if not isinstance(data, dict):
        raise RecordRejected([f"a record is a JSON object, got {type(data).__name__}"], index)
    try:
        size = len(json.dumps(data, default=str).encode())
    except (TypeError, ValueError) as exc:
        raise RecordRejected([f"not JSON-serialisable: {exc}"], index) from None
    if size > MAX_PAYLOAD_BYTES:
        raise RecordRejected([f"payload is {size} bytes, over the {MAX_PAYLOAD_BYTES}-byte limit "
                              "(store per-round samples in the report file and give report_path)"], index)
    context = {"known_cards": set(known_cards) if known_cards is not None else None, "project_root": project_root}
    try:
        return ResultRecord.model_validate(data, context=context)
    except ValidationError as exc:
        raise RecordRejected([describe_error(e) for e in exc.errors()], index) from None


def describe_error(err: Any) -> str:
    """One pydantic error as 'field.path: what is wrong'."""
    loc = ".".join(str(p) for p in err.get("loc", ())) or "record"
    msg = err.get("msg", "invalid").removeprefix("Value error, ")
    if err.get("type") == "missing":
        msg = "required field is missing"
    elif err.get("type") == "extra_forbidden":
        msg = "unknown field (check the spelling)"
    elif err.get("type") == "finite_number":
        msg = f"must be a finite number, got {err.get('input')!r}"
    elif err.get("type") in ("greater_than", "greater_than_equal"):
        msg = f"{msg}, got {err.get('input')!r}"
    return f"{loc}: {msg}"

"""The results ledger: every measurement and re-verification, with its provenance.

An embedded SQLite file (stdlib ``sqlite3``), one per project: ``--ledger PATH``, else
``$SKILL_SERVER_LEDGER``, else ``<project>/var/ledger.sqlite`` (``var/`` is git-ignored).

Integrity rules:
- WAL journal, a busy timeout, ``synchronous=FULL``; every write is one ``BEGIN
  IMMEDIATE`` transaction, so concurrent writers queue instead of failing, and a process
  killed mid-write leaves nothing of that write behind (SQLite rolls the open
  transaction back on the next open).
- Input is validated completely (pydantic) *before* the transaction starts: a refused
  record writes nothing, and a batch is all-or-nothing.
- The schema carries a version table; opening an older file applies the forward
  migrations in one transaction. A file newer than this code is refused, never guessed at.
"""
from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from .claims import STATUSES, PlatformStatus, ReverifyStatus

LEDGER_ENV = "SKILL_SERVER_LEDGER"
DEFAULT_RELATIVE_PATH = Path("var") / "ledger.sqlite"
MAX_PAYLOAD_BYTES = 256 * 1024
SCHEMA_VERSION = 2
BUSY_TIMEOUT_S = 30.0
FUTURE_SLACK = timedelta(minutes=5)

Runtime = Literal["cuda", "rocm", "cpu"]
Verdict = Literal["FASTER", "SLOWER", "NO_DIFFERENCE", "FAIL"]
Source = Literal["verifier_report", "manual", "reverify"]
Scope = Literal["isolated", "segment", "kernel", "e2e"]

# Connections a forked child inherited: kept referenced so they are never closed there.
_INHERITED: list[sqlite3.Connection] = []

# A hook a test sets to stop a writer between two rows of one transaction (to kill it there).
_TEST_HOOK_AFTER_RESULT_ROW: Callable[["ResultRecord"], None] | None = None


class LedgerError(ValueError):
    """The ledger refused a request; the message says what to change."""


class RecordRejected(LedgerError):
    """A record failed validation; nothing was written."""

    def __init__(self, problems: list[str], index: int | None = None):
        self.problems = problems
        where = f"record #{index}: " if index is not None else ""
        super().__init__(where + "refused, nothing written: " + "; ".join(problems))


def default_ledger_path(project_root: Path, explicit: str | Path | None = None) -> Path:
    """``explicit`` (``--ledger``), else ``$SKILL_SERVER_LEDGER``, else ``<project>/var/ledger.sqlite``."""
    chosen = explicit or os.environ.get(LEDGER_ENV)
    if chosen:
        return Path(chosen).expanduser().resolve()
    from . import state_dir  # <project>/var in a checkout; the user's state folder for an installed package

    return (state_dir(project_root) / DEFAULT_RELATIVE_PATH.name).resolve()


# ============================================================================ models
class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, str_max_length=20_000)


Metric = float | int | str | bool
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


def parse_shape_text(text: str) -> dict[str, int]:
    """``4096x2048x7168`` (M, N, K) or ``M=16384,N=2880,K=2880,E=128,top_k=4``."""
    text = text.strip()
    dims: dict[str, int] = {}
    if "=" in text:
        for part in re.split(r"[,\s]+", text):
            if not part:
                continue
            key, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"shape {text!r}: expected name=value pairs, got {part!r}")
            dims[key.strip()] = _shape_int(value, text)
    else:
        parts = re.split(r"[xX×]", text)
        if len(parts) != 3:
            raise ValueError(f"shape {text!r}: expected MxNxK (three positive integers) or name=value pairs")
        dims = {k: _shape_int(v, text) for k, v in zip(("M", "N", "K"), parts)}
    return dims


def _shape_int(value: str, text: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(f"shape {text!r}: {value!r} is not an integer") from None


def shape_text(dims: dict[str, int]) -> str:
    """Canonical text: ``MxNxK`` for plain GEMM shapes, else ``name=value,...`` in given order."""
    if list(dims) == ["M", "N", "K"]:
        return f"{dims['M']}x{dims['N']}x{dims['K']}"
    return ",".join(f"{k}={v}" for k, v in dims.items())


class PlatformInfo(_In):
    device: str = Field(min_length=1, max_length=200, description="device name, e.g. 'AMD Instinct MI355X'")
    generation: str | None = Field(None, max_length=40, description="gfx950, sm_90, ... (CPU: the machine arch)")
    runtime: Runtime
    libraries: dict[str, str] = Field(default_factory=dict, description="package -> version")

    @model_validator(mode="after")
    def _normalise_generation(self) -> "PlatformInfo":
        from .vocabulary import VocabularyError, vocabulary

        if self.generation is not None:
            try:
                self.generation = vocabulary().generation(self.generation)
            except VocabularyError as exc:
                if self.runtime != "cpu":
                    raise ValueError(str(exc)) from None
                if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,40}", self.generation):
                    raise ValueError(f"generation {self.generation!r}: use a short identifier such as x86_64") from None
        if len(self.libraries) > 64:
            raise ValueError(f"libraries: at most 64 entries, got {len(self.libraries)}")
        for name, version in self.libraries.items():
            if not (0 < len(name) <= 100 and 0 < len(version) <= 100):
                raise ValueError(f"libraries: names and versions are 1-100 characters ({name!r}: {version!r})")
        return self

    @property
    def key(self) -> str:
        """What statuses are grouped by: ``rocm/gfx950``, ``cuda/sm_90``, ``cpu/x86_64``."""
        tail = self.generation or re.sub(r"[^a-z0-9]+", "-", self.device.lower()).strip("-")[:40]
        return f"{self.runtime}/{tail}"


class ArmResult(_In):
    name: str = Field(min_length=1, max_length=200, description="arm name, e.g. ck_blockscale or flydsl_4wave")
    time_ms: float | None = Field(None, gt=0, description="the arm's representative time (median), ms")
    times_ms: list[float] = Field(default_factory=list, max_length=10_000, description="per-round times, ms")
    parity: dict[str, Metric] = Field(default_factory=dict, description="this arm against the oracle")

    @field_validator("times_ms")
    @classmethod
    def _positive_times(cls, v: list[float]) -> list[float]:
        bad = [t for t in v if not t > 0]
        if bad:
            raise ValueError(f"times must be positive milliseconds; got {bad[:3]}")
        return v

    @field_validator("parity")
    @classmethod
    def _metrics(cls, v: dict[str, Metric]) -> dict[str, Metric]:
        return _check_metrics(v, "parity")


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
    def _shape_values(cls, v: dict[str, int]) -> dict[str, int]:
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
    def _metrics(cls, v: dict[str, Metric]) -> dict[str, Metric]:
        return _check_metrics(v, "parity")

    @field_validator("stages")
    @classmethod
    def _stages(cls, v: dict[str, str]) -> dict[str, str]:
        if len(v) > 32 or any(len(k) > 64 or len(s) > 200 for k, s in v.items()):
            raise ValueError("stages: at most 32 entries, names <= 64 and statuses <= 200 characters")
        return v

    @field_validator("git_rev")
    @classmethod
    def _git_rev(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?", v):
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
    def _not_future(cls, v: datetime | None) -> datetime | None:
        if v is None:
            return None
        v = v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
        if v > datetime.now(UTC) + FUTURE_SLACK:
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
    def _coherent(self) -> "ResultRecord":
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
        b, c = self.baseline.time_ms, self.candidate.time_ms
        if s is not None and b and c:
            implied = b / c
            if abs(implied - s) / s > 0.10:
                raise ValueError(
                    f"speedup {s} disagrees with the arms' times ({b} / {c} = {implied:.4f}): "
                    "arms swapped or units mixed?")
        if self.verdict == "FAIL" and self.parity_passed is None and not self.stages:
            raise ValueError("verdict FAIL needs the reason: parity_passed=false or the failing stage in stages")
        return self

    @property
    def shape_text(self) -> str:
        return shape_text(self.shape)


class StoredResult(ResultRecord):
    id: int
    uid: str
    recorded_at: datetime  # type: ignore[assignment]  # always set once stored


class ReverificationRow(_In):
    card_id: str = Field(min_length=1, max_length=120)
    platform: PlatformInfo
    status: ReverifyStatus
    reason: str = Field(min_length=1, max_length=4000)
    recorded_at: datetime | None = None
    recorded_by: str = Field(min_length=1, max_length=100)
    git_rev: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict, description="the per-card re-verification report")


class StoredReverification(ReverificationRow):
    id: int
    uid: str
    recorded_at: datetime  # type: ignore[assignment]


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
        raise RecordRejected([_describe(e) for e in exc.errors()], index) from None


def _describe(err: dict[str, Any]) -> str:
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


# ========================================================================== schema
# Each entry upgrades the schema from version i to i+1. Never edit a released entry:
# append a new one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: results and their arms
        """CREATE TABLE results (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            uid TEXT NOT NULL UNIQUE,
            card_id TEXT NOT NULL,
            shape TEXT NOT NULL,
            verdict TEXT NOT NULL CHECK (verdict IN ('FASTER', 'SLOWER', 'NO_DIFFERENCE', 'FAIL')),
            speedup REAL CHECK (speedup IS NULL OR speedup > 0),
            ci_low REAL,
            ci_high REAL,
            platform_key TEXT NOT NULL,
            device TEXT NOT NULL,
            generation TEXT,
            runtime TEXT NOT NULL CHECK (runtime IN ('cuda', 'rocm', 'cpu')),
            git_rev TEXT,
            recorded_at TEXT NOT NULL,
            recorded_by TEXT NOT NULL,
            source TEXT NOT NULL CHECK (source IN ('verifier_report', 'manual', 'reverify')),
            payload_json TEXT NOT NULL
        )""",
        """CREATE TABLE result_arms (
            result_id INTEGER NOT NULL REFERENCES results(id) ON DELETE CASCADE,
            role TEXT NOT NULL CHECK (role IN ('baseline', 'candidate')),
            name TEXT NOT NULL,
            time_ms REAL CHECK (time_ms IS NULL OR time_ms > 0),
            PRIMARY KEY (result_id, role)
        )""",
        "CREATE INDEX results_by_card ON results (card_id, id)",
    ),
    (  # 2: re-verification statuses; result scope; lookups by shape and platform
        "ALTER TABLE results ADD COLUMN scope TEXT NOT NULL DEFAULT 'isolated'",
        "CREATE INDEX results_by_shape ON results (card_id, shape)",
        "CREATE INDEX results_by_platform ON results (platform_key)",
        f"""CREATE TABLE reverifications (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            uid TEXT NOT NULL UNIQUE,
            card_id TEXT NOT NULL,
            platform_key TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ({", ".join(repr(s) for s in STATUSES)})),
            reason TEXT NOT NULL,
            recorded_at TEXT NOT NULL,
            recorded_by TEXT NOT NULL,
            git_rev TEXT,
            platform_json TEXT NOT NULL,
            detail_json TEXT NOT NULL
        )""",
        "CREATE INDEX reverifications_by_card ON reverifications (card_id, platform_key, id)",
    ),
)
assert len(MIGRATIONS) == SCHEMA_VERSION


def apply_migrations(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Bring the open database to ``target`` in one IMMEDIATE transaction; return the
    version found before. Refuses a database newer than this code."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
        found = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()[0]
        if found > SCHEMA_VERSION:
            raise LedgerError(f"the ledger's schema version {found} is newer than this skill-server understands "
                              f"({SCHEMA_VERSION}); upgrade skill-server rather than writing to it")
        for version in range(found + 1, target + 1):
            for statement in MIGRATIONS[version - 1]:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)", (version, _now_text()))
        conn.execute("COMMIT")
        return found
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _read_version(conn: sqlite3.Connection) -> int | None:
    try:
        return conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
    except sqlite3.OperationalError:
        return None


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _now_text() -> str:
    return _now().isoformat()


# ========================================================================== ledger
class Ledger:
    """One ledger file. Cheap to construct: nothing is opened or created until used.

    Reads of a ledger that does not exist yet return nothing and create nothing; the
    first write creates the file (and its folder). Each thread keeps its own connection,
    so a Ledger may be shared between threads; a forked child opens its own.
    """

    def __init__(self, path: str | Path, busy_timeout_s: float = BUSY_TIMEOUT_S):
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self._migrated = False
        self._local = threading.local()

    # -- connections -----------------------------------------------------------------
    def exists(self) -> bool:
        return self.path.is_file()

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection, opened once: closing the last connection makes
        SQLite checkpoint and fsync, which would cost every write ~15 ms more. A
        connection inherited across fork is never used (nor closed) in the child."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            return conn
        if conn is not None:
            _INHERITED.append(conn)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            self._retry(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            conn.close()
            raise
        self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            conn.close()
        self._local.conn = None

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        conn = self._connection()
        if not self._migrated:
            if _read_version(conn) != SCHEMA_VERSION:  # skip the write lock when already current
                self._retry(lambda: apply_migrations(conn))
            self._migrated = True
        yield conn

    def _retry(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` again while SQLite says the file is locked (beyond the busy
        handler: a WAL switch or recovery by another process), up to the busy timeout."""
        deadline = time.monotonic() + self.busy_timeout_s
        delay = 0.005
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() > deadline:
                    raise LedgerError(f"ledger {self.path} stayed locked for {self.busy_timeout_s:.0f}s: {exc}") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: committed whole or rolled back whole."""
        with self._connect() as conn:
            self._retry(lambda: conn.execute("BEGIN IMMEDIATE"))
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    # -- writes ------------------------------------------------------------------------
    def record(self, records: Sequence[ResultRecord]) -> list[StoredResult]:
        """Store validated records in one transaction (all or none)."""
        if not records:
            return []
        with self._write() as conn:
            return [self._insert_result(conn, r) for r in records]

    def record_reverification(self, rows: Sequence[ReverificationRow],
                              results: Sequence[ResultRecord] = ()) -> list[StoredReverification]:
        """Store re-verification statuses and the results they measured in one transaction."""
        with self._write() as conn:
            for r in results:
                self._insert_result(conn, r)
            out = []
            for row in rows:
                at = row.recorded_at or _now()
                uid = uuid.uuid4().hex
                detail = json.dumps(row.detail, default=str, allow_nan=False)
                cur = conn.execute(
                    "INSERT INTO reverifications (uid, card_id, platform_key, status, reason, recorded_at, recorded_by,"
                    " git_rev, platform_json, detail_json) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (uid, row.card_id, row.platform.key, row.status, row.reason, at.isoformat(), row.recorded_by,
                     row.git_rev, row.platform.model_dump_json(), detail))
                out.append(StoredReverification(**row.model_dump(exclude={"recorded_at"}), recorded_at=at,
                                                id=cur.lastrowid, uid=uid))
            return out

    def _insert_result(self, conn: sqlite3.Connection, r: ResultRecord) -> StoredResult:
        at = r.recorded_at or _now()
        uid = uuid.uuid4().hex
        payload = r.model_dump(mode="json", exclude={"recorded_at"})
        payload["recorded_at"] = at.isoformat()
        ci = r.interval or (None, None)
        cur = conn.execute(
            "INSERT INTO results (uid, card_id, shape, scope, verdict, speedup, ci_low, ci_high, platform_key, device,"
            " generation, runtime, git_rev, recorded_at, recorded_by, source, payload_json)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (uid, r.card_id, r.shape_text, r.scope, r.verdict, r.speedup, ci[0], ci[1], r.platform.key,
             r.platform.device, r.platform.generation, r.platform.runtime, r.git_rev, at.isoformat(),
             r.recorded_by, r.source, json.dumps(payload, allow_nan=False)))
        rid = cur.lastrowid
        if _TEST_HOOK_AFTER_RESULT_ROW is not None:
            _TEST_HOOK_AFTER_RESULT_ROW(r)
        for role, arm in (("baseline", r.baseline), ("candidate", r.candidate)):
            conn.execute("INSERT INTO result_arms (result_id, role, name, time_ms) VALUES (?,?,?,?)",
                         (rid, role, arm.name, arm.time_ms))
        return StoredResult(**{**payload, "id": rid, "uid": uid})

    # -- reads ---------------------------------------------------------------------------
    def history(self, card_id: str | None = None, shape: str | dict[str, int] | None = None,
                platform: str | None = None, source: str | None = None, limit: int = 100,
                ids: Sequence[int] | None = None) -> list[StoredResult]:
        """Results, newest first. ``platform`` matches the key (rocm/gfx950), the runtime,
        the generation (aliases such as MI355X accepted) or the device name."""
        if not self.exists():
            return []
        where, args = [], []
        if card_id:
            where.append("r.card_id = ?")
            args.append(card_id)
        if shape:
            where.append("r.shape = ?")
            args.append(shape_text(parse_shape_text(shape) if isinstance(shape, str) else shape))
        if platform:
            clause, pargs = _platform_clause(platform)
            where.append(clause)
            args += pargs
        if source:
            where.append("r.source = ?")
            args.append(source)
        if ids is not None:
            ids = list(ids)
            if not ids:
                return []
            where.append(f"r.id IN ({','.join('?' * len(ids))})")
            args += ids
        sql = "SELECT r.id, r.uid, r.payload_json FROM results r"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY r.id DESC LIMIT ?"
        args.append(max(1, min(int(limit), 10_000)))
        with self._connect() as conn:
            rows = conn.execute(sql, args).fetchall()
        return [StoredResult(**json.loads(payload), id=rid, uid=uid) for rid, uid, payload in rows]

    def reverifications(self, card_id: str | None = None, platform: str | None = None,
                        limit: int = 100) -> list[StoredReverification]:
        if not self.exists():
            return []
        where, args = [], []
        if card_id:
            where.append("card_id = ?")
            args.append(card_id)
        if platform:
            where.append("(platform_key = ? OR platform_key LIKE ?)")
            args += [platform, f"%{platform}%"]
        sql = ("SELECT id, uid, card_id, platform_json, status, reason, recorded_at, recorded_by, git_rev, detail_json"
               " FROM reverifications")
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC LIMIT ?"
        args.append(max(1, min(int(limit), 10_000)))
        with self._connect() as conn:
            rows = conn.execute(sql, args).fetchall()
        return [StoredReverification(id=r[0], uid=r[1], card_id=r[2], platform=json.loads(r[3]), status=r[4],
                                     reason=r[5], recorded_at=r[6], recorded_by=r[7], git_rev=r[8],
                                     detail=json.loads(r[9])) for r in rows]

    def latest_status_rows(self) -> dict[str, list[tuple[str, str, str, str]]]:
        """The latest re-verification per (card, platform) as plain tuples
        (platform, status, recorded_at, reason): cheap enough to reload on every change."""
        if not self.exists():
            return {}
        sql = ("SELECT v.card_id, v.platform_key, v.status, v.recorded_at, v.reason FROM reverifications v"
               " JOIN (SELECT MAX(id) AS id FROM reverifications GROUP BY card_id, platform_key) m ON v.id = m.id")
        with self._connect() as conn:
            rows = conn.execute(sql).fetchall()
        out: dict[str, list[tuple[str, str, str, str]]] = {}
        for card_id, *rest in rows:
            out.setdefault(card_id, []).append(tuple(rest))  # type: ignore[arg-type]
        return out

    def latest_statuses(self) -> dict[str, list[PlatformStatus]]:
        """The latest re-verification row per (card, platform)."""
        return {cid: [PlatformStatus(platform=p, status=s, date=at, reason=r) for p, s, at, r in rows]
                for cid, rows in self.latest_status_rows().items()}

    def schema_version(self) -> int:
        with self._connect() as conn:
            return conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]

    def integrity_check(self) -> str:
        with self._connect() as conn:
            return conn.execute("PRAGMA integrity_check").fetchone()[0]

    def change_token(self) -> tuple[Any, ...]:
        """Cheap (two stats): changes whenever any process commits to the ledger."""
        out: list[Any] = []
        for p in (self.path, self.path.with_name(self.path.name + "-wal")):
            try:
                st = p.stat()
                out.append((st.st_mtime_ns, st.st_size, st.st_ino))
            except OSError:
                out.append(None)
        return tuple(out)


def _platform_clause(platform: str) -> tuple[str, list[str]]:
    from .vocabulary import VocabularyError, vocabulary

    values = [platform]
    try:
        values.append(vocabulary().generation(platform))
    except VocabularyError:
        pass
    clause = ("(r.platform_key IN ({q}) OR r.runtime IN ({q}) OR r.generation IN ({q}) OR lower(r.device) LIKE ?)"
              .format(q=",".join("?" * len(values))))
    return clause, values * 3 + [f"%{platform.lower()}%"]


# ================================================================ status cache
class LatestStatusCache:
    """The latest re-verification status per card, kept in memory for the match path.

    ``get()`` returns a mapping whose ``get(card_id, default)`` builds a card's summary on
    first use (so a reload costs one query, not one model per card); at most every
    ``check_interval`` seconds it also stats the ledger files and reloads when another
    process committed. Writes through this process call ``invalidate()`` and are visible
    at once.
    """

    def __init__(self, ledger: Ledger, build: Callable[[str, list[PlatformStatus]], Any],
                 check_interval: float = 1.0):
        self.ledger = ledger
        self._build = build
        self.check_interval = check_interval
        self._value: _LazySummaries | None = None
        self._token: tuple[Any, ...] | None = None
        self._checked_at = 0.0

    def invalidate(self) -> None:
        self._value = None

    def get(self) -> "_LazySummaries":
        now = time.monotonic()
        value = self._value
        if value is not None and now - self._checked_at < self.check_interval:
            return value
        token = self.ledger.change_token()
        self._checked_at = now
        if value is not None and token == self._token:
            return value
        try:
            latest = self.ledger.latest_status_rows()
        except (sqlite3.Error, LedgerError):
            latest = {}  # an unreadable ledger must not take the match path down
        value = _LazySummaries(latest, self._build)
        self._value, self._token = value, token
        return value


class _LazySummaries(dict):
    """card id -> summary, built from the raw rows on first access (thread-safe enough:
    two threads building the same summary build equal values)."""

    def __init__(self, rows: dict[str, list[tuple[str, str, str, str]]], build: Callable[[str, list[PlatformStatus]], Any]):
        super().__init__()
        self._rows, self._build = rows, build

    def get(self, card_id: str, default: Any = None) -> Any:  # type: ignore[override]
        if card_id in self:
            return self[card_id]
        rows = self._rows.get(card_id)
        if rows is None:
            return default
        value = self._build(card_id, [PlatformStatus(platform=p, status=s, date=at, reason=r) for p, s, at, r in rows])
        self[card_id] = value
        return value

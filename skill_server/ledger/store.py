"""The store seam: what any ledger backend provides, and what goes in and comes out.

``LedgerStore`` is the whole interface a backend implements (SQLite today,
``ledger_sqlite.SqliteStore``; a PostgreSQL backend is another module implementing the
same methods over the same schema, ``ledger_schema.MIGRATIONS``). Backends store and
fetch; they never sign, check signatures or decide evidence levels (``ledger.Ledger``
does, above them), and they receive only validated entries.

One write is one ``WriteBatch`` and one transaction: results, re-verification statuses and
the verifier report they came from are committed together or not at all.
"""
from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from skill_server.ledger.signing import Evidence
from skill_server.ledger.models import ResultRecord, ReverificationRow, StoredResult, StoredReverification


class ResultEntry(BaseModel):
    """A validated record with its time fixed and its evidence decided."""

    model_config = ConfigDict(frozen=True)

    record: ResultRecord
    recorded_at: datetime
    evidence: Evidence

    def payload(self) -> dict[str, Any]:
        """Exactly what is stored as the record's JSON (and what its signature covers)."""
        data = self.record.model_dump(mode="json", exclude={"recorded_at"})
        data["recorded_at"] = self.recorded_at.isoformat()
        return data


class ReverificationEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    row: ReverificationRow
    recorded_at: datetime
    evidence: Evidence

    def platform_json(self) -> str:
        return self.row.platform.model_dump_json()

    def detail_json(self) -> str:
        return json.dumps(self.row.detail, default=str, allow_nan=False)

    def payload(self) -> dict[str, Any]:
        """What its signature covers: the stored columns, read back as a reader sees them."""
        return reverification_content(self.row.card_id, self.row.status, self.row.reason,
                                      self.recorded_at.isoformat(), self.row.recorded_by, self.row.git_rev,
                                      self.platform_json(), self.detail_json())


def reverification_content(card_id: str, status: str, reason: str, recorded_at: str, recorded_by: str,
                           git_rev: str | None, platform_json: str, detail_json: str) -> dict[str, Any]:
    return {"card_id": card_id, "status": status, "reason": reason, "recorded_at": recorded_at,
            "recorded_by": recorded_by, "git_rev": git_rev, "platform": json.loads(platform_json),
            "detail": json.loads(detail_json)}


class ReportEntry(BaseModel):
    """A verifier report as the ledger keeps it (the full JSON, for ``report://{id}``)."""

    model_config = ConfigDict(frozen=True)

    report_id: str = Field(pattern=r"^[0-9a-f]{16}$")
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    card_id: str | None
    problem: str
    verdict: str
    recorded_at: datetime
    recorded_by: str
    source: str
    evidence: Evidence
    report_json: str


class StoredReport(ReportEntry):
    model_config = ConfigDict(frozen=False)

    id: int
    result_ids: list[int] = Field(default_factory=list)


class KeyRegistration(BaseModel):
    """The fingerprint (``SigningKey.key_id``, never the key) of the key signing a write."""

    key_id: str = Field(pattern=r"^[0-9a-f]{16}$")
    registered_by: str


class WriteBatch(BaseModel):
    results: list[ResultEntry] = Field(default_factory=list)
    reverifications: list[ReverificationEntry] = Field(default_factory=list)
    report: ReportEntry | None = None
    register_key: KeyRegistration | None = Field(None, description="record this key's fingerprint (once)")


class WriteReceipt(BaseModel):
    results: list[StoredResult] = Field(default_factory=list)
    reverifications: list[StoredReverification] = Field(default_factory=list)
    report: StoredReport | None = None


class ResultQuery(BaseModel):
    card_id: str | None = None
    shape: str | None = Field(None, description="canonical shape text")
    platform: str | None = Field(None, description="platform key, runtime, generation or part of a device name")
    platform_aliases: list[str] = Field(default_factory=list, description="other spellings of platform")
    source: str | None = None
    ids: list[int] | None = None
    report_digest: str | None = None
    limit: int = 100


class LedgerStore(Protocol):
    """A ledger backend. Reads of a store that does not exist yet return nothing and
    create nothing; the first write creates it."""

    location: str
    shared: bool  # True: several servers write here (PostgreSQL); they must share one signing key

    def exists(self) -> bool: ...

    def write(self, batch: WriteBatch) -> WriteReceipt:
        """Everything in the batch in one transaction (all or nothing). Refuses a report
        whose digest is already stored (``LedgerError``)."""

    def results(self, query: ResultQuery) -> list[StoredResult]:
        """Newest first; evidence exactly as stored (levels are checked above the store)."""

    def reverifications(self, card_id: str | None, platform: str | None, limit: int) -> list[StoredReverification]: ...

    def latest_reverifications(self, level: str) -> list[StoredReverification]:
        """The newest row of each (card, platform) among rows stored with ``level``."""

    def latest_results(self, level: str | None = None) -> list[StoredResult]:
        """The newest result of each (card, shape, platform, level)."""

    def report(self, report_id: str) -> StoredReport | None: ...

    def report_by_digest(self, digest: str) -> StoredReport | None: ...

    def key_ids(self) -> list[str]:
        """Fingerprints of the keys registered as signing this ledger (oldest first)."""

    def schema_version(self) -> int: ...

    def integrity_check(self) -> str: ...

    def change_token(self) -> Hashable:
        """Cheap; changes whenever any process commits."""

    def close(self) -> None: ...


def ids_of(results: Sequence[StoredResult]) -> list[int]:
    return [r.id for r in results]

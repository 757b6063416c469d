"""The results ledger: every measurement and re-verification, with its evidence.

``Ledger`` sits above a store (``ledger_store.LedgerStore``; SQLite by default, one file
per project: ``--ledger PATH``, else ``$SKILL_SERVER_LEDGER``, else
``<project>/var/ledger.sqlite``) and owns what the store must not decide: evidence.

- ``record`` stores submitted records as ``reported``.
- ``record_report`` stores a verifier report with the records derived from it
  (``report_records``), ``verified`` and signed when the service says the report is this
  deployment's own, else ``reported``.
- ``record_reverification`` stores re-verification statuses (always the server's own:
  signed) with the results and report they measured.
- Every read checks signatures again: a row whose signature does not check against this
  server's key (edited in the database, or signed by another key) comes back
  ``reported``, with a note saying why; ``latest_statuses`` uses verified rows only.

The signing key lives in the state folder (``$SKILL_SERVER_STATE_DIR``, else the ledger
file's folder); see ``evidence.py``. When it cannot be used every write is refused.
"""
from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from skill_server.locations import state_dir
from skill_server.cards.vocabulary import VocabularyError, vocabulary
from skill_server.ledger.bounded_cache import BoundedCache
from skill_server.ledger.models import (
    MAX_PAYLOAD_BYTES,
    ArmResult,
    LedgerError,
    PlatformInfo,
    RecordRejected,
    ResultRecord,
    ReverificationRow,
    StoredResult,
    StoredReverification,
    default_recorder,
    parse_shape_text,
    shape_text,
    validate_record,
)
from skill_server.ledger.postgres import PostgresStore, is_postgres_url
from skill_server.ledger.schema import MIGRATIONS, SCHEMA_VERSION
from skill_server.ledger.signing import Evidence, KeyStore, KeyUnavailable, Signature, SigningKey, default_key_path
from skill_server.ledger.sqlite import BUSY_TIMEOUT_S, SqliteStore, apply_migrations
from skill_server.ledger.store import (
    KeyRegistration,
    LedgerStore,
    ReportEntry,
    ResultEntry,
    ResultQuery,
    ReverificationEntry,
    StoredReport,
    WriteBatch,
    WriteReceipt,
    reverification_content,
)
from skill_server.reverify.claims import PlatformStatus
from skill_server.settings import settings
from verifiers.arms.sandbox import protect

# signature checks of rows read back, by (key id, the row's exact bytes): skill_server.ledger.bounded_cache
CHECKED_ROWS: BoundedCache[bool] = BoundedCache(8192)
LEDGER_ENV = "SKILL_SERVER_LEDGER"
DEFAULT_RELATIVE_PATH = Path("var") / "ledger.sqlite"

__all__ = ["ArmResult", "BUSY_TIMEOUT_S", "Ledger", "LedgerError", "MAX_PAYLOAD_BYTES", "MIGRATIONS", "PlatformInfo",
           "RecordRejected", "ReportToStore", "ResultRecord", "ReverificationRow", "SCHEMA_VERSION", "StoredReport",
           "StoredResult", "StoredReverification", "apply_migrations", "default_ledger_path", "default_state_dir",
           "parse_shape_text", "shape_text", "validate_record"]


def default_ledger_path(project_root: Path, explicit: str | Path | None = None) -> Path | str:
    """``explicit`` (``--ledger``), else ``$SKILL_SERVER_LEDGER``, else ``<project>/var/ledger.sqlite``.
    A ``postgresql://`` URL comes back as the string it is (a file path as a resolved Path)."""
    chosen = explicit or settings().ledger
    if chosen:
        return str(chosen) if is_postgres_url(str(chosen)) else Path(chosen).expanduser().resolve()

    return (state_dir(project_root) / DEFAULT_RELATIVE_PATH.name).resolve()


def default_state_dir(ledger_path: Path | str) -> Path:
    """Where the signing key lives: ``$SKILL_SERVER_STATE_DIR``, else beside the ledger file
    (for a database URL, this code's own state folder: ``skill_server.locations.state_dir``)."""
    if settings().state_dir or is_postgres_url(str(ledger_path)):
        return state_dir()
    return Path(ledger_path).resolve().parent


def _protect_from_arms(*paths: Path | None) -> None:
    """No verifier arm process of this server may read the key's folder or the ledger's
    (``verifiers.arms.sandbox``: they are left out of every arm's allow-list)."""

    for path in paths:
        if path is not None:
            protect(path if path.is_dir() or not path.suffix else path.parent)


def open_store(location: Path | str, busy_timeout_s: float = BUSY_TIMEOUT_S) -> LedgerStore:
    """The backend for a location: a ``postgresql://`` URL (``ledger_postgres``, needs
    psycopg) or a SQLite file path."""
    if is_postgres_url(str(location)):

        return PostgresStore(str(location))
    return SqliteStore(Path(location), busy_timeout_s)


class ReportToStore(BaseModel):
    """A verifier report on its way into the ledger (built by ``report_records``)."""

    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    harness_digest: str | None = None
    card_id: str | None
    problem: str
    verdict: str
    recorded_by: str
    source: str
    report_json: str

    @property
    def report_id(self) -> str:
        return self.digest[:16]


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


class Ledger:
    """The evidence-aware ledger over one store. Cheap to construct: nothing is opened
    or created until used; reads of a ledger that does not exist create nothing."""

    def __init__(self, path: str | Path, busy_timeout_s: float = BUSY_TIMEOUT_S, key_path: str | Path | None = None,
                 store: LedgerStore | None = None):
        self.store: LedgerStore = store or open_store(path, busy_timeout_s)
        #: the SQLite file (None for a database URL: see ``store.location``, password masked)
        self.path: Path | None = None if is_postgres_url(str(path)) else Path(path)
        shared = bool(getattr(self.store, "shared", False))
        # a shared ledger's key is the fleet's: provisioned once, never created by one server
        self.keys = KeyStore(Path(key_path) if key_path else default_key_path(default_state_dir(path)),
                             create=not shared)
        self._key_known: str | None = None  # the key fingerprint already checked against the ledger
        _protect_from_arms(self.keys.path.parent, self.path)

    @property
    def location(self) -> str:
        """Where the ledger is, fit to show (a database URL without its password)."""
        return self.store.location

    # -- plumbing -------------------------------------------------------------------
    def exists(self) -> bool:
        return self.store.exists()

    def close(self) -> None:
        self.store.close()

    def schema_version(self) -> int:
        return self.store.schema_version()

    def integrity_check(self) -> str:
        return self.store.integrity_check()

    def change_token(self) -> Hashable:
        return self.store.change_token()

    def _signing_key(self) -> SigningKey:
        try:
            return self.keys.for_writing()
        except KeyUnavailable as exc:
            raise LedgerError(f"nothing written: {exc}") from None

    def _key_registration(self, key: SigningKey) -> KeyRegistration | None:
        """The fingerprint to register with this write, if the ledger does not know it yet.
        A shared ledger signed by another key refuses the write: servers of one fleet
        must share one key, or each one's verified records read as reported on the others."""
        if self._key_known == key.key_id:
            return None
        registered = self.store.key_ids()
        if key.key_id in registered:
            self._key_known = key.key_id
            return None
        if self._foreign_key(key, registered):
            raise LedgerError("nothing written: " + self._foreign_key_message(key, registered))
        return KeyRegistration(key_id=key.key_id, registered_by=_who_registers())

    def _write(self, batch: WriteBatch, key: SigningKey) -> WriteReceipt:
        batch.register_key = self._key_registration(key)
        receipt = self.store.write(batch)
        self._key_known = key.key_id
        return receipt

    def register_key(self) -> str:
        """Register this server's key fingerprint with the ledger (a deliberate rotation on
        a shared ledger); returns the fingerprint."""
        key = self._signing_key()
        self.store.write(WriteBatch(register_key=KeyRegistration(key_id=key.key_id, registered_by=_who_registers())))
        self._key_known = key.key_id
        return key.key_id

    def write_problem(self) -> str | None:
        """Why writes are refused right now (the signing key cannot be used, the store cannot
        be reached or is newer than this code, a shared ledger signed by another key), or
        None. Cheap: one round trip; callers check it before long work (re-verification)."""
        problem = self.keys.problem()
        if problem:
            return problem
        key = self.keys.for_reading()
        if key is not None and self._key_known == key.key_id:
            return None  # this key was registered (or checked) by this process's writes: no round trip
        try:
            registered = self.store.key_ids()
        except LedgerError as exc:
            return str(exc)
        if key is not None and self._foreign_key(key, registered):
            return self._foreign_key_message(key, registered)
        return None

    def _foreign_key(self, key: SigningKey, registered: list[str]) -> bool:
        return bool(registered) and key.key_id not in registered and bool(getattr(self.store, "shared", False))

    def _foreign_key_message(self, key: SigningKey, registered: list[str]) -> str:
        return (f"the shared ledger {self.location} is signed with the fleet key {', '.join(registered)}, and this "
                f"server's key {key.path} is another ({key.key_id}): install the fleet's key file here (the same "
                "file on every server), or, when rotating keys on purpose, register this one with "
                "`skill-server ledger-key --register`")

    # -- writes ---------------------------------------------------------------------
    def record(self, records: Sequence[ResultRecord], note: str = "submitted by an agent or a person") -> list[StoredResult]:
        """Store submitted records (``reported``) in one transaction (all or none)."""
        if not records:
            return []
        key = self._signing_key()  # an unusable key stops every write, not only verified ones
        at = _now()
        entries = [ResultEntry(record=r, recorded_at=r.recorded_at or at, evidence=Evidence(level="reported", note=note))
                   for r in records]
        return self._write(WriteBatch(results=entries), key).results

    def record_report(self, report: ReportToStore, records: Sequence[ResultRecord], *, verified: bool,
                      note: str | None = None) -> WriteReceipt:
        """Store a verifier report and the records derived from it, in one transaction.
        ``verified``: the report is this deployment's own (the service ran it or its
        signature checked); the report and each record are then signed."""
        key = self._signing_key()
        at = _now()
        return self._write(WriteBatch(report=self._report_entry(report, key, at, verified, note),
                                      results=self._result_entries(report, records, key, at, verified, note)), key)

    def record_reverification(self, rows: Sequence[ReverificationRow], results: Sequence[ResultRecord] = (),
                              report: ReportToStore | None = None) -> list[StoredReverification]:
        """Store re-verification statuses with the results (and report) they measured, in
        one transaction. Statuses and results are the server's own: signed."""
        key = self._signing_key()
        at = _now()
        batch = WriteBatch()
        if report is not None:
            batch.report = self._report_entry(report, key, at, True, None)
            batch.results = self._result_entries(report, results, key, at, True, None)
        elif results:
            raise LedgerError("re-verification results need the verifier report they came from")
        for row in rows:
            entry = ReverificationEntry(row=row, recorded_at=row.recorded_at or at, evidence=Evidence(level="reported"))
            batch.reverifications.append(entry.model_copy(update={"evidence": Evidence(
                level="verified", signature=key.sign("reverification", entry.payload()))}))
        return self._write(batch, key).reverifications

    def _report_entry(self, report: ReportToStore, key: SigningKey, at: datetime, verified: bool,
                      note: str | None) -> ReportEntry:
        evidence = Evidence(level="verified" if verified else "reported", report_digest=report.digest,
                            harness_digest=report.harness_digest, note=note,
                            signature=key.sign("report", {"digest": report.digest}) if verified else None)
        return ReportEntry(report_id=report.report_id, digest=report.digest, card_id=report.card_id,
                           problem=report.problem, verdict=report.verdict, recorded_at=at,
                           recorded_by=report.recorded_by, source=report.source, evidence=evidence,
                           report_json=report.report_json)

    def _result_entries(self, report: ReportToStore, records: Sequence[ResultRecord], key: SigningKey, at: datetime,
                        verified: bool, note: str | None) -> list[ResultEntry]:
        out = []
        for r in records:
            base = Evidence(level="reported", report_digest=report.digest, harness_digest=report.harness_digest,
                            note=note)
            entry = ResultEntry(record=r, recorded_at=r.recorded_at or at, evidence=base)
            if verified:
                sig = key.sign("result", _result_content(entry.payload(), base))
                entry = entry.model_copy(update={"evidence": base.model_copy(update={"level": "verified",
                                                                                      "signature": sig})})
            out.append(entry)
        return out

    # -- signatures -------------------------------------------------------------------
    def sign_report(self, digest: str) -> Signature:
        """The signature an unrecorded report of this deployment's verifier carries."""
        return self._signing_key().sign("report", {"digest": digest})

    def report_signature_checks(self, digest: str, signature: Signature | None) -> bool:
        key = self.keys.for_reading()
        return key is not None and key.check(signature, "report", {"digest": digest})

    def _checked_result(self, r: StoredResult, key: SigningKey | None) -> StoredResult:
        ev = r.evidence
        if ev.level != "verified":
            return r
        if key is not None and self._result_signature_checks(r, key):
            return r
        r.evidence = ev.model_copy(update={"level": "reported", "note": _why_not(key, ev.signature)})
        return r

    def _result_signature_checks(self, r: StoredResult, key: SigningKey) -> bool:
        """The HMAC check of a result, remembered per (key, row bytes) for rows read back."""
        memo = (key.key_id, r._row) if r._row is not None else None
        if memo is not None:
            known = CHECKED_ROWS.get(memo)
            if known is not None:
                return known
        ok = key.check(r.evidence.signature, "result", _result_content(r.stored_payload(), r.evidence))
        if memo is not None:
            CHECKED_ROWS.put(memo, ok)
        return ok

    def _checked_reverification(self, v: StoredReverification, key: SigningKey | None) -> StoredReverification:
        ev = v.evidence
        if ev.level != "verified":
            return v
        content = reverification_content(v.card_id, v.status, v.reason, _iso(v.recorded_at), v.recorded_by, v.git_rev,
                                          v.platform.model_dump_json(),
                                          json.dumps(v.detail, default=str, allow_nan=False))
        if key is not None and key.check(ev.signature, "reverification", content):
            return v
        v.evidence = ev.model_copy(update={"level": "reported", "note": _why_not(key, ev.signature)})
        return v

    # -- reads ------------------------------------------------------------------------
    def history(self, card_id: str | None = None, shape: str | dict[str, int] | None = None,
                platform: str | None = None, source: str | None = None, limit: int = 100,
                ids: Sequence[int] | None = None, report_digest: str | None = None) -> list[StoredResult]:
        """Results, newest first, their evidence level checked. ``platform`` matches the
        key (rocm/gfx950), the runtime, the generation (aliases such as MI355X accepted) or
        the device name."""
        query = ResultQuery(card_id=card_id, source=source, limit=limit, report_digest=report_digest,
                            ids=list(ids) if ids is not None else None)
        if shape:
            query.shape = shape_text(parse_shape_text(shape) if isinstance(shape, str) else shape)
        if platform:
            query.platform, query.platform_aliases = platform, _generation_aliases(platform)
        key = self.keys.for_reading()
        return [self._checked_result(r, key) for r in self.store.results(query)]

    def latest_results(self) -> list[StoredResult]:
        """The newest result per (card, shape, platform, stored level), levels checked."""
        key = self.keys.for_reading()
        return [self._checked_result(r, key) for r in self.store.latest_results()]

    def reverifications(self, card_id: str | None = None, platform: str | None = None,
                        limit: int = 100) -> list[StoredReverification]:
        key = self.keys.for_reading()
        return [self._checked_reverification(v, key) for v in self.store.reverifications(card_id, platform, limit)]

    def latest_statuses(self) -> dict[str, list[PlatformStatus]]:
        """The latest verified re-verification per (card, platform): what answers show."""
        key = self.keys.for_reading()
        out: dict[str, list[PlatformStatus]] = {}
        for v in self.store.latest_reverifications("verified"):
            if self._checked_reverification(v, key).evidence.level != "verified":
                continue  # tampered or another key's: never shown as a status
            out.setdefault(v.card_id, []).append(PlatformStatus(platform=v.platform.key, status=v.status,
                                                                date=_iso(v.recorded_at), reason=v.reason))
        return out

    def report(self, report_id: str) -> StoredReport | None:
        found = self.store.report(report_id)
        if found is None:
            return None
        key = self.keys.for_reading()
        ev = found.evidence
        if ev.level == "verified" and not (key is not None and key.check(ev.signature, "report", {"digest": found.digest})):
            found.evidence = ev.model_copy(update={"level": "reported", "note": _why_not(key, ev.signature)})
        return found

    def report_by_digest(self, digest: str) -> StoredReport | None:
        found = self.store.report_by_digest(digest)
        return self.report(found.report_id) if found is not None else None


def _who_registers() -> str:
    import socket


    return f"{default_recorder()} on {socket.gethostname()}"[:200]


def _result_content(payload: dict, evidence: Evidence) -> dict:
    return {"payload": payload, "report_digest": evidence.report_digest, "harness_digest": evidence.harness_digest}


def _why_not(key: SigningKey | None, signature: Signature | None) -> str:
    if key is None:
        return "stored as verified, but this server has no usable signing key to check it"
    if signature is None or signature.key_id != key.key_id:
        return "stored as verified, but signed with another key than this server's"
    return "stored as verified, but its signature does not check: the row was changed after it was signed"


def _iso(value: datetime | str) -> str:
    if isinstance(value, str):
        return value
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()


def _generation_aliases(platform: str) -> list[str]:

    try:
        gen = vocabulary().generation(platform)
    except VocabularyError:
        return []
    return [gen] if gen != platform else []

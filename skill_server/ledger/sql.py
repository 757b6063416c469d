"""The ledger's queries, once, in portable SQL over any DB-API connection.

``SqlStore`` implements ``ledger_store.LedgerStore`` on top of two hooks a backend
provides: ``_reading()`` (a connection for reads) and ``_writing()`` (a connection inside
one transaction, committed or rolled back whole). Statements are written with ``?``
parameters; ``_sql`` converts them for a backend whose driver uses ``%s``. Everything here
is standard SQL that SQLite and PostgreSQL both run (``RETURNING``, ``GROUP BY``
sub-selects, ``lower() LIKE``); backend-specific SQL (PRAGMAs, lock modes) stays in the
backend module.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import uuid
from datetime import UTC, datetime
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager
from typing import Any

from skill_server.ledger.signing import Evidence
from pydantic import ValidationError

from skill_server.ledger.models import STORED_ROW, LedgerError, StoredResult, StoredReverification, describe_error
from skill_server.ledger.store import (ReportEntry, ResultEntry, ResultQuery, ReverificationEntry, StoredReport, WriteBatch,
                           WriteReceipt)

# A test sets this to stop a writer between two rows of one transaction (to kill it there).
TEST_HOOK_AFTER_RESULT_ROW: Callable[[ResultEntry], None] | None = None

_REPORT_COLUMNS = ("id, report_id, digest, card_id, problem, verdict, evidence_level, evidence_json, recorded_at,"
                   " recorded_by, source, report_json")
_REVERIFY_COLUMNS = ("id, uid, card_id, platform_json, status, reason, recorded_at, recorded_by, git_rev, detail_json,"
                     " evidence_level, evidence_json")


class SqlStore:
    """Shared implementation; subclasses supply connections and transactions."""

    location: str
    paramstyle = "qmark"  # "format" for drivers that take %s
    shared = False

    # -- backend hooks ------------------------------------------------------------
    def exists(self) -> bool:  # pragma: no cover - backend
        raise NotImplementedError

    def _reading(self) -> AbstractContextManager[Any]:  # pragma: no cover - backend
        raise NotImplementedError

    def _writing(self) -> AbstractContextManager[Any]:  # pragma: no cover - backend
        raise NotImplementedError

    # -- one connection per thread and process (both backends) ------------------------
    _local: threading.local

    def _thread_connection(self) -> Any | None:
        """This thread's connection, when this process opened it (a forked child never
        uses its parent's)."""
        conn = getattr(self._local, "conn", None)
        return conn if conn is not None and self._local.pid == os.getpid() else None

    def _keep_connection(self, conn: Any) -> Any:
        self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = self._thread_connection()
        if conn is not None:
            conn.close()
        self._local.conn = None

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.paramstyle == "format" else sql

    def _run(self, conn: Any, sql: str, args: tuple | list = ()) -> Any:
        cur = conn.cursor()
        cur.execute(self._sql(sql), tuple(args))
        return cur

    # -- bulk (ledger_copy) ----------------------------------------------------------
    snapshot_sql = "BEGIN"  # starts a read transaction that sees one snapshot

    def _run_many(self, conn: Any, sql: str, rows: list[tuple]) -> None:
        conn.cursor().executemany(self._sql(sql), rows)

    def _stream(self, conn: Any, sql: str) -> Any:
        """A cursor over a large result, read with fetchmany."""
        return self._run(conn, sql)

    def after_bulk_insert(self, conn: Any) -> None:
        """Called after rows were inserted with their ids (a backend with sequences resets them)."""

    # -- writes -------------------------------------------------------------------
    def write(self, batch: WriteBatch) -> WriteReceipt:
        receipt = WriteReceipt()
        with self._writing() as conn:
            if batch.report is not None:
                receipt.report = self._insert_report(conn, batch.report)
            receipt.results = [self._insert_result(conn, e) for e in batch.results]
            receipt.reverifications = [self._insert_reverification(conn, e) for e in batch.reverifications]
            if batch.register_key is not None:
                self._run(conn, "INSERT INTO signing_keys (key_id, registered_at, registered_by) VALUES (?,?,?)"
                          " ON CONFLICT (key_id) DO NOTHING",
                          (batch.register_key.key_id, _now_iso(), batch.register_key.registered_by))
        if receipt.report is not None:
            receipt.report.result_ids = [r.id for r in receipt.results]
        return receipt

    def _insert_report(self, conn: Any, e: ReportEntry) -> StoredReport:
        found = self._run(conn, "SELECT id FROM reports WHERE digest = ?", (e.digest,)).fetchone()
        if found is not None:
            raise LedgerError(f"verifier report {e.report_id} is already recorded (ledger report #{found[0]}); "
                              "a report is recorded once: see get_validation_history")
        cur = self._run(conn, "INSERT INTO reports (report_id, digest, card_id, problem, verdict, evidence_level,"
                        " evidence_json, recorded_at, recorded_by, source, report_json)"
                        " VALUES (?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
                        (e.report_id, e.digest, e.card_id, e.problem, e.verdict, _stored_level(e.evidence),
                         e.evidence.model_dump_json(exclude_none=True), e.recorded_at.isoformat(), e.recorded_by,
                         e.source, e.report_json))
        return StoredReport(**e.model_dump(), id=cur.fetchone()[0])

    def _insert_result(self, conn: Any, e: ResultEntry) -> StoredResult:
        r, payload, uid = e.record, e.payload(), uuid.uuid4().hex
        ci = r.interval or (None, None)
        cur = self._run(conn,
                        "INSERT INTO results (uid, card_id, shape, scope, verdict, speedup, ci_low, ci_high,"
                        " platform_key, device, generation, runtime, git_rev, recorded_at, recorded_by, source,"
                        " payload_json, evidence_level, report_digest, evidence_json)"
                        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
                        (uid, r.card_id, r.shape_text, r.scope, r.verdict, r.speedup, ci[0], ci[1], r.platform.key,
                         r.platform.device, r.platform.generation, r.platform.runtime, r.git_rev,
                         e.recorded_at.isoformat(), r.recorded_by, r.source, json.dumps(payload, allow_nan=False),
                         _stored_level(e.evidence), e.evidence.report_digest,
                         e.evidence.model_dump_json(exclude_none=True)))
        rid = cur.fetchone()[0]
        if TEST_HOOK_AFTER_RESULT_ROW is not None:
            TEST_HOOK_AFTER_RESULT_ROW(e)
        self._run(conn, "INSERT INTO result_arms (result_id, role, name, time_ms) VALUES (?,?,?,?), (?,?,?,?)",
                  (rid, "baseline", r.baseline.name, r.baseline.time_ms,
                   rid, "candidate", r.candidate.name, r.candidate.time_ms))  # one round trip for both
        # the record was validated on its way in: build the answer without running its rules again
        stored = StoredResult.model_validate({**payload, "id": rid, "uid": uid, "evidence": e.evidence},
                                             context=STORED_ROW)
        stored._payload = payload
        return stored

    def _insert_reverification(self, conn: Any, e: ReverificationEntry) -> StoredReverification:
        row, uid = e.row, uuid.uuid4().hex
        cur = self._run(conn,
                        "INSERT INTO reverifications (uid, card_id, platform_key, status, reason, recorded_at,"
                        " recorded_by, git_rev, platform_json, detail_json, evidence_level, evidence_json)"
                        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
                        (uid, row.card_id, row.platform.key, row.status, row.reason, e.recorded_at.isoformat(),
                         row.recorded_by, row.git_rev, e.platform_json(), e.detail_json(), _stored_level(e.evidence),
                         e.evidence.model_dump_json(exclude_none=True)))
        return StoredReverification(**row.model_dump(exclude={"recorded_at"}), recorded_at=e.recorded_at,
                                    id=cur.fetchone()[0], uid=uid, evidence=e.evidence)

    # -- reads ----------------------------------------------------------------------
    def results(self, query: ResultQuery) -> list[StoredResult]:
        if not self.exists():
            return []
        where, args = [], []
        for column, value in (("r.card_id", query.card_id), ("r.shape", query.shape), ("r.source", query.source),
                              ("r.report_digest", query.report_digest)):
            if value:
                where.append(f"{column} = ?")
                args.append(value)
        if query.platform:
            values = [query.platform, *query.platform_aliases]
            q = ",".join("?" * len(values))
            where.append(f"(r.platform_key IN ({q}) OR r.runtime IN ({q}) OR r.generation IN ({q})"
                         " OR lower(r.device) LIKE ?)")
            args += values * 3 + [f"%{query.platform.lower()}%"]
        if query.ids is not None:
            if not query.ids:
                return []
            where.append(f"r.id IN ({','.join('?' * len(query.ids))})")
            args += list(query.ids)
        sql = "SELECT r.id, r.uid, r.payload_json, r.evidence_json FROM results r"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY r.id DESC LIMIT ?"
        args.append(max(1, min(int(query.limit), 10_000)))
        with self._reading() as conn:
            rows = self._run(conn, sql, args).fetchall()
        return [_result(*row) for row in rows]

    def latest_results(self, level: str | None = None) -> list[StoredResult]:
        if not self.exists():
            return []
        inner = "SELECT MAX(id) AS id FROM results"
        args: list[Any] = []
        if level:
            inner += " WHERE evidence_level = ?"
            args.append(level)
        inner += " GROUP BY card_id, shape, platform_key, evidence_level"
        sql = (f"SELECT r.id, r.uid, r.payload_json, r.evidence_json FROM results r JOIN ({inner}) m ON r.id = m.id"
               " ORDER BY r.id DESC")
        with self._reading() as conn:
            rows = self._run(conn, sql, args).fetchall()
        return [_result(*row) for row in rows]

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
        sql = f"SELECT {_REVERIFY_COLUMNS} FROM reverifications"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC LIMIT ?"
        args.append(max(1, min(int(limit), 10_000)))
        with self._reading() as conn:
            rows = self._run(conn, sql, args).fetchall()
        return [_reverification(row) for row in rows]

    def latest_reverifications(self, level: str) -> list[StoredReverification]:
        if not self.exists():
            return []
        sql = (f"SELECT {', '.join('v.' + c.strip() for c in _REVERIFY_COLUMNS.split(','))} FROM reverifications v"
               " JOIN (SELECT MAX(id) AS id FROM reverifications WHERE evidence_level = ?"
               " GROUP BY card_id, platform_key) m ON v.id = m.id ORDER BY v.id DESC")
        with self._reading() as conn:
            rows = self._run(conn, sql, (level,)).fetchall()
        return [_reverification(row) for row in rows]

    def report(self, report_id: str) -> StoredReport | None:
        return self._one_report("report_id", report_id)

    def report_by_digest(self, digest: str) -> StoredReport | None:
        return self._one_report("digest", digest)

    def _one_report(self, column: str, value: str) -> StoredReport | None:
        if not self.exists():
            return None
        with self._reading() as conn:
            row = self._run(conn, f"SELECT {_REPORT_COLUMNS} FROM reports WHERE {column} = ?", (value,)).fetchone()
            if row is None:
                return None
            ids = [r[0] for r in self._run(conn, "SELECT id FROM results WHERE report_digest = ? ORDER BY id",
                                           (row[2],)).fetchall()]
        (rid, report_id, digest, card_id, problem, verdict, _level, evidence_json, at, by, source, text) = row
        return StoredReport(id=rid, report_id=report_id, digest=digest, card_id=card_id, problem=problem,
                            verdict=verdict, evidence=Evidence.model_validate_json(evidence_json), recorded_at=at,
                            recorded_by=by, source=source, report_json=text, result_ids=ids)

    def key_ids(self) -> list[str]:
        if not self.exists():
            return []
        with self._reading() as conn:
            return [r[0] for r in self._run(conn, "SELECT key_id FROM signing_keys ORDER BY registered_at, key_id")]

    def schema_version(self) -> int:
        with self._reading() as conn:
            return self._run(conn, "SELECT MAX(version) FROM schema_version").fetchone()[0]

    def change_token(self) -> Hashable:  # pragma: no cover - backend
        raise NotImplementedError


def _now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def _stored_level(evidence: Evidence) -> str:
    if evidence.level not in ("verified", "reported"):
        raise LedgerError(f"the ledger stores verified or reported records, not {evidence.level!r}")
    return evidence.level


def _evidence(text: str | None) -> Evidence:
    return Evidence.model_validate_json(text) if text else Evidence(level="reported", note="recorded before evidence levels")


def row_digest(rid: int, uid: str, payload: str, evidence_json: str | None) -> bytes:
    """128 bits of BLAKE2b over a row's fields: the key under which its signature check is
    remembered (``ledger.CHECKED_ROWS``); a row whose bytes change gets another key. NUL
    separates the fields (no JSON text, uid or id holds one; a missing evidence is SOH)."""
    text = "\0".join((str(int(rid)), uid, payload, "\1" if evidence_json is None else evidence_json))
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _result(rid: int, uid: str, payload: str, evidence_json: str | None) -> StoredResult:
    # one parse of the payload serves both the record and its signature check: two parsers
    # that could read one text two ways (duplicate keys, odd numbers) would let an edited row
    # show one thing and have its signature checked against another
    data = json.loads(payload)
    try:
        stored = StoredResult.model_validate({**data, "id": rid, "uid": uid, "evidence": _evidence(evidence_json)},
                                             context=STORED_ROW)
    except ValidationError as exc:
        problems = "; ".join(describe_error(e) for e in exc.errors()[:3])
        raise LedgerError(f"ledger result #{rid} does not validate (changed outside skill-server?): {problems}") from None
    stored._payload = data
    stored._row = row_digest(rid, uid, payload, evidence_json)
    return stored


def _reverification(row: tuple) -> StoredReverification:
    rid, uid, card_id, platform, status, reason, at, by, git_rev, detail, _level, evidence_json = row
    return StoredReverification.model_validate(
        {"id": rid, "uid": uid, "card_id": card_id, "platform": json.loads(platform), "status": status,
         "reason": reason, "recorded_at": at, "recorded_by": by, "git_rev": git_rev, "detail": json.loads(detail),
         "evidence": _evidence(evidence_json)}, context=STORED_ROW)


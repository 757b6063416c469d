"""Copy a ledger between backends (SQLite file <-> PostgreSQL database), row for row.

Every stored column travels as stored: ids, uids, payloads, evidence and signatures. A
signature covers what a row says (never where it is kept), so a ``verified`` row stays
verified after the copy wherever the same key checks it, and only there: a server with
another key reads it as ``reported``. The copy registers the fingerprint of every key
that signed a copied row in the target's ``signing_keys``, so a server of a shared target
holding another key is refused on its first write instead of silently splitting the fleet.

One transaction on the target: the source is read from one snapshot in pages, written,
then read back inside the same transaction and compared table by table (row count and a
sha256 over the rows); any difference rolls the whole copy back. A target that already
holds records is refused unless ``replace`` is given (then its rows are deleted in the
same transaction).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, Field

from skill_server.ledger.models import LedgerError
from skill_server.ledger.schema import SCHEMA_VERSION
from skill_server.ledger.sql import SqlStore

# parents before children; the key that orders each table's rows
TABLES: tuple[tuple[str, str], ...] = (
    ("reports", "id"), ("results", "id"), ("result_arms", "result_id, role"), ("reverifications", "id"),
    ("signing_keys", "key_id"),
)
PAGE = 2000


class TableCopy(BaseModel):
    table: str
    rows: int
    sha256: str = Field(description="over the rows in key order, as stored (source and target agree)")


class CopyResult(BaseModel):
    source: str
    target: str
    replaced: bool
    tables: list[TableCopy]
    signed_by: dict[str, int] = Field(description="verified rows per signing-key fingerprint")

    def lines(self) -> list[str]:
        out = [f"copied {self.source} -> {self.target}" + (" (target's earlier rows replaced)" if self.replaced else "")]
        out += [f"  {t.table:<16} {t.rows:>9} row(s)  sha256 {t.sha256[:16]}  (checked on the target)" for t in self.tables]
        for key_id, n in sorted(self.signed_by.items()):
            out.append(f"  {n} verified row(s) signed by key {key_id}: they read as verified only on servers "
                       "holding that key")
        return out


def copy_ledger(source: SqlStore, target: SqlStore, replace: bool = False) -> CopyResult:
    if source.location == target.location:
        raise LedgerError(f"source and target are the same ledger ({source.location}): nothing to copy")
    if not source.exists():
        raise LedgerError(f"source ledger {source.location} does not exist (or holds no ledger tables): "
                          "nothing to copy")
    if source.schema_version() != SCHEMA_VERSION:  # reading migrated it forward; anything else is refused there
        raise LedgerError(f"source ledger {source.location} is at another schema version")
    signed_by: dict[str, int] = {}
    tables: list[TableCopy] = []
    with target._writing() as out:
        held = _count(target, out, ("results", "reverifications", "reports"))
        if held and not replace:
            raise LedgerError(f"target ledger {target.location} already holds {held} record(s): nothing copied; "
                              "pass --replace to delete them and copy, or choose an empty target")
        if replace:
            for table, _ in reversed(TABLES):
                target._run(out, f"DELETE FROM {table}")
        with source._reading() as src:
            source._run(src, source.snapshot_sql)
            try:
                for table, order in TABLES:
                    digest, rows = hashlib.sha256(), 0
                    for columns, page in _pages(source, src, table, order):
                        for row in page:
                            digest.update(_row_bytes(row))
                            _count_signatures(columns, row, signed_by)
                        marks = ",".join("?" * len(columns))
                        target._run_many(out, f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", page)
                        rows += len(page)
                    tables.append(TableCopy(table=table, rows=rows, sha256=digest.hexdigest()))
            finally:
                source._run(src, "COMMIT")
        for key_id in signed_by:
            target._run(out, "INSERT INTO signing_keys (key_id, registered_at, registered_by)"
                        " VALUES (?, ?, ?) ON CONFLICT (key_id) DO NOTHING",
                        (key_id, _now(), f"ledger-copy from {source.location}"[:200]))
        target.after_bulk_insert(out)
        for want in tables:  # read back inside the transaction: a difference rolls it all back
            got = _digest(target, out, want.table, dict(TABLES)[want.table])
            if want.table == "signing_keys":
                continue  # the target may register the copied rows' keys on top of the source's
            if got != (want.rows, want.sha256):
                raise LedgerError(f"copy check failed on table {want.table}: the target read back {got[0]} row(s), "
                                  f"the source had {want.rows}; nothing was copied")
    return CopyResult(source=source.location, target=target.location, replaced=replace, tables=tables,
                      signed_by=signed_by)


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).replace(microsecond=0).isoformat()


def _count(store: SqlStore, conn: Any, tables: tuple[str, ...]) -> int:
    return sum(store._run(conn, f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables)


def _pages(store: SqlStore, conn: Any, table: str, order: str) -> Iterator[tuple[list[str], list[tuple]]]:
    """The table's rows in key order, a page at a time, streamed (never all in memory)."""
    cur = store._stream(conn, f"SELECT * FROM {table} ORDER BY {order}")
    try:
        while True:
            page = [tuple(r) for r in cur.fetchmany(PAGE)]
            if not page:
                return
            yield [d[0] for d in cur.description], page
    finally:
        cur.close()


def _digest(store: SqlStore, conn: Any, table: str, order: str) -> tuple[int, str]:
    digest, rows = hashlib.sha256(), 0
    for _, page in _pages(store, conn, table, order):
        for row in page:
            digest.update(_row_bytes(row))
        rows += len(page)
    return rows, digest.hexdigest()


def _row_bytes(row: tuple) -> bytes:
    return json.dumps(list(row), separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode() + b"\n"


def _count_signatures(columns: list[str], row: tuple, signed_by: dict[str, int]) -> None:
    if "evidence_json" not in columns:
        return
    text = row[columns.index("evidence_json")]
    if not text:
        return
    try:
        evidence = json.loads(text)
    except ValueError:
        return
    sig = evidence.get("signature") if isinstance(evidence, dict) else None
    if evidence.get("level") == "verified" and isinstance(sig, dict) and isinstance(sig.get("key_id"), str):
        signed_by[sig["key_id"]] = signed_by.get(sig["key_id"], 0) + 1

"""The SQLite backend of the ledger: one file per project (stdlib ``sqlite3``).

Integrity rules:
- WAL journal, a busy timeout, ``synchronous=FULL``; every write is one ``BEGIN
  IMMEDIATE`` transaction, so concurrent writers queue instead of failing, and a process
  killed mid-write leaves nothing of that write behind (SQLite rolls the open
  transaction back on the next open).
- The schema carries a version table; opening an older file applies the forward
  migrations (``ledger_schema.MIGRATIONS``) in one transaction. A file newer than this
  code is refused, never guessed at.
- Reads of a file that does not exist return nothing and create nothing.
"""
from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skill_server.ledger.models import LedgerError
from skill_server.ledger.schema import MIGRATIONS, SCHEMA_VERSION, newer_schema_message
from skill_server.ledger.sql import SqlStore

BUSY_TIMEOUT_S = 30.0

# Connections a forked child inherited: kept referenced so they are never closed there.
_INHERITED: list[sqlite3.Connection] = []


def apply_migrations(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Bring the open database to ``target`` in one IMMEDIATE transaction; return the
    version found before. Refuses a database newer than this code."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
        found = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()[0]
        if found > SCHEMA_VERSION:
            raise LedgerError(newer_schema_message(found))
        for migration in MIGRATIONS[found:target]:
            for statement in migration.render("sqlite"):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                         (migration.version, datetime.now(UTC).replace(microsecond=0).isoformat()))
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


class SqliteStore(SqlStore):
    """One ledger file. Cheap to construct: nothing is opened until used. Each thread keeps
    its own connection, so a store may be shared between threads; a forked child opens its own."""

    def __init__(self, path: str | Path, busy_timeout_s: float = BUSY_TIMEOUT_S):
        self.path = Path(path)
        self.location = str(self.path)
        self.busy_timeout_s = busy_timeout_s
        self._migrated = False
        self._local = threading.local()

    def exists(self) -> bool:
        return self.path.is_file()

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection, opened once: closing the last connection makes
        SQLite checkpoint and fsync, which would cost every write ~15 ms more."""
        conn = self._thread_connection()
        if conn is not None:
            return conn
        inherited = getattr(self._local, "conn", None)
        if inherited is not None:
            _INHERITED.append(inherited)
        if self.path.is_dir():
            raise LedgerError(f"ledger {self.path} is a folder, not a ledger file: give the file's path "
                              f"(e.g. {self.path / 'ledger.sqlite'}); nothing was read or written")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LedgerError(f"ledger {self.path}: cannot create its folder ({exc.strerror or exc}); "
                              "nothing was read or written") from None
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            self._refuse_a_foreign_database(conn)  # before WAL mode, which would rewrite the file's header
            self._retry(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            conn.close()
            raise
        return self._keep_connection(conn)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """SQLite's errors become one LedgerError line naming the file and what to do."""
        try:
            yield
        except sqlite3.DatabaseError as exc:  # OperationalError, IntegrityError, "not a database", ...
            raise LedgerError(self._describe(exc)) from None

    def _describe(self, exc: sqlite3.DatabaseError) -> str:
        text = " ".join(str(exc).split())[:300]
        low = text.lower()
        if "not a database" in low or "encrypted" in low or "malformed" in low:
            return (f"ledger {self.path}: not a skill-server ledger file (SQLite: {text}): give --ledger "
                    "(or $SKILL_SERVER_LEDGER) the ledger's own file, or a new path; nothing was read or written")
        if "readonly" in low or "read-only" in low:
            return f"ledger {self.path} is read-only ({text}): make it writable, or copy it; nothing was written"
        if "unable to open" in low:
            return (f"ledger {self.path}: cannot open it ({text}): check that its folder exists and is writable; "
                    "nothing was read or written")
        return f"ledger {self.path}: SQLite failed the request ({text}); nothing of this request was stored"

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        with self._guard():
            conn = self._connection()
            if not self._migrated:
                if _read_version(conn) != SCHEMA_VERSION:  # skip the write lock when already current
                    self._retry(lambda: apply_migrations(conn))
                self._migrated = True
            yield conn

    def _refuse_a_foreign_database(self, conn: sqlite3.Connection) -> None:
        """A SQLite file with tables but no ledger schema is another program's database:
        never add the ledger's tables to it (nor switch it to WAL). A file that is not
        SQLite at all fails here too, before anything is written."""
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                             " AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        if tables and "schema_version" not in tables:
            shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
            raise LedgerError(f"ledger {self.path} is a SQLite database of something else (tables: {shown}), not a "
                              "skill-server ledger: give the ledger its own file; nothing was read or written")

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: committed whole or rolled back whole."""
        with self._reading() as conn, self._guard():
            self._retry(lambda: conn.execute("BEGIN IMMEDIATE"))
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

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

    def integrity_check(self) -> str:
        with self._reading() as conn:
            return conn.execute("PRAGMA integrity_check").fetchone()[0]

    def change_token(self) -> Hashable:
        """Two stats: changes whenever any process commits to the file."""
        out: list[Any] = []
        for p in (self.path, self.path.with_name(self.path.name + "-wal")):
            try:
                st = p.stat()
                out.append((st.st_mtime_ns, st.st_size, st.st_ino))
            except OSError:
                out.append(None)
        return tuple(out)

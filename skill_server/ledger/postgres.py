"""The PostgreSQL backend of the ledger: one database shared by many servers (``psycopg`` 3).

Selected by a ``postgresql://`` (or ``postgres://``) URL in ``--ledger`` or
``$SKILL_SERVER_LEDGER``. Same schema (``ledger_schema.MIGRATIONS`` rendered for the
``postgresql`` dialect), same queries (``ledger_sql.SqlStore``), same behaviour as SQLite.

Integrity rules:
- every write is one transaction (``READ COMMITTED``; results, re-verifications and their
  report commit together or not at all); a client killed mid-write leaves nothing: the
  server rolls its open transaction back when the connection drops;
- migrations run in one transaction under an advisory lock, so servers starting at once
  migrate once; a database newer than this code is refused, never guessed at;
- reads of a database without the ledger's tables return nothing and create nothing;
- the password is never shown: ``location`` and every message carry the masked URL.

psycopg is imported here only, so the core server does not need it.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from skill_server.ledger.models import LedgerError
from skill_server.ledger.schema import MIGRATIONS, SCHEMA_VERSION, newer_schema_message
from skill_server.ledger.sql import SqlStore

URL_PREFIXES = ("postgresql://", "postgres://")
CONNECT_TIMEOUT_S = 10
MIGRATION_LOCK = 0x736B6C6C  # pg_advisory_xact_lock key: "skll"
_TABLES = ("results", "result_arms", "reverifications", "reports", "signing_keys")


def is_postgres_url(location: object) -> bool:
    return isinstance(location, str) and location.startswith(URL_PREFIXES)


def mask_url(url: str) -> str:
    """The URL with its password (in the user part or a ``password=`` parameter) as ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://(unparseable URL)"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        netloc = f"{userinfo}@{host}"
    query = urlencode([(k, "***" if k.lower() == "password" else v) for k, v in parse_qsl(parts.query)], safe="*-=")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _secrets_of(url: str) -> list[str]:
    from urllib.parse import unquote

    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = [parts.password, unquote(parts.password)] if parts.password else []
    found += [v for k, v in parse_qsl(parts.query) if k.lower() == "password" and v]
    return [s for s in found if s]


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise LedgerError("a postgresql:// ledger needs psycopg: pip install 'gpu-skill-server[fleet]' "
                          "(or pip install 'psycopg[binary]')") from None
    return psycopg


class PostgresStore(SqlStore):
    """One ledger database. Cheap to construct: nothing connects until used. Each thread
    keeps its own connection (a forked child opens its own), so a store may be shared
    between threads."""

    paramstyle = "format"
    shared = True  # several servers write here: they must share one signing key (ledger.py)

    def __init__(self, url: str, connect_timeout_s: float = CONNECT_TIMEOUT_S):
        if not is_postgres_url(url):
            raise LedgerError(f"not a PostgreSQL URL: {mask_url(url)} (expected postgresql://user@host/db)")
        try:
            urlsplit(url).port  # noqa: B018 - parses host and port: a malformed URL fails here, not in the driver
        except ValueError as exc:
            raise LedgerError(f"ledger {mask_url(url)}: not a valid PostgreSQL URL ({exc}): expected "
                              "postgresql://user[:password]@host[:port]/database; nothing was read or written") from None
        self.url = url
        self.location = mask_url(url)
        self.connect_timeout_s = connect_timeout_s
        self._migrated = False
        self._exists = False
        self._local = threading.local()

    # -- errors -------------------------------------------------------------------------
    def _driver_text(self, exc: Exception, limit: int = 300) -> str:
        """The driver's message on one line, withheld whole when it contains the password
        (masking only the matches would show where, and so what, a short password is)."""
        text = " ".join(str(exc).split())[:limit]
        # as a token of its own (a short password also occurs inside ordinary words)
        if any(re.search(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", text) for secret in _secrets_of(self.url)):
            return f"{type(exc).__name__}; the driver's message is withheld: it contains the password"
        return text

    def _connect_error(self, exc: Exception) -> LedgerError:
        raw = self._driver_text(exc, 2000)
        detail = raw.split(" failed: ")[-1].replace("FATAL: ", "").strip() or type(exc).__name__
        low = detail.lower()
        if "password authentication failed" in low or "no password supplied" in low or "role" in low and "does not exist" in low:
            hint = "check the user and password in the URL (or ~/.pgpass / PGPASSFILE)"
        elif "database" in low and "does not exist" in low:
            hint = "create the database first (createdb), or fix its name in the URL"
        elif "refused" in low or "timeout" in low or "timed out" in low or "could not translate" in low \
                or "no route" in low or "name or service" in low:
            hint = "check that the PostgreSQL server runs and that host and port in the URL are right"
        else:
            hint = "check the URL and the server"
        return LedgerError(f"ledger {self.location}: cannot connect ({detail}): {hint}; nothing was read or written")

    def _query_error(self, exc: Exception) -> LedgerError:
        return LedgerError(f"ledger {self.location}: the database failed the request ({self._driver_text(exc)}); "
                           "nothing of this write was stored: retry once the server is reachable")

    # -- connections --------------------------------------------------------------------
    def _connection(self) -> Any:
        psycopg = _psycopg()
        conn = self._thread_connection()
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=max(1, int(self.connect_timeout_s)),
                                   application_name="skill-server")
        except psycopg.Error as exc:
            raise self._connect_error(exc) from None
        return self._keep_connection(conn)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Driver errors become one LedgerError line (masked); ours pass through."""
        psycopg = _psycopg()
        try:
            yield
        except psycopg.errors.UniqueViolation as exc:
            raise LedgerError(f"ledger {self.location}: already recorded ({self._driver_text(exc, 200)}); "
                              "nothing written") from None
        except psycopg.Error as exc:
            raise self._query_error(exc) from None

    def exists(self) -> bool:
        if self._exists:
            return True
        with self._guard():
            found = self._connection().execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()[0]
        self._exists = bool(found)
        return self._exists

    @contextmanager
    def _reading(self) -> Iterator[Any]:
        with self._guard():
            conn = self._connection()
            if not self._migrated:
                apply_migrations(conn, location=self.location)
                self._migrated = self._exists = True
            yield conn

    @contextmanager
    def _writing(self) -> Iterator[Any]:
        # Pipeline mode: statements go out without waiting for each answer; the client
        # waits only where it reads one (an id from RETURNING) and at COMMIT. A write is
        # two round trips instead of five; the transaction is the same (all or nothing).
        with self._reading() as conn, self._guard(), conn.transaction():
            yield conn

    # -- backend specifics ----------------------------------------------------------------
    snapshot_sql = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

    def _stream(self, conn: Any, sql: str) -> Any:
        cur = conn.cursor(name=f"skill_stream_{id(self)}_{threading.get_ident()}")  # server-side: streamed
        cur.execute(self._sql(sql))
        return cur

    def after_bulk_insert(self, conn: Any) -> None:
        for table in ("results", "reverifications", "reports"):
            conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), COALESCE(MAX(id), 0) + 1, false)"
                         f" FROM {table}")

    def integrity_check(self) -> str:
        """'ok', or what is inconsistent: every result has exactly its two arm rows, and the
        schema is this code's (the database itself guarantees the rest: constraints, WAL)."""
        with self._reading() as conn:
            bad = conn.execute("SELECT r.id FROM results r LEFT JOIN result_arms a ON a.result_id = r.id"
                               " GROUP BY r.id HAVING COUNT(a.role) <> 2 LIMIT 5").fetchall()
            version = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
        problems = []
        if bad:
            problems.append(f"result(s) {[b[0] for b in bad]} lack arm rows")
        if version != SCHEMA_VERSION:
            problems.append(f"schema version {version}, expected {SCHEMA_VERSION}")
        return "; ".join(problems) or "ok"

    def change_token(self) -> Hashable:
        """The newest id of each table (changes at once when a later row commits) and the
        server's insert/update/delete counters for them (catch an older row committing
        late and changes made outside skill-server, within about a second)."""
        if not self.exists():
            return None
        with self._reading() as conn:
            return tuple(conn.execute(
                "SELECT (SELECT MAX(id) FROM results), (SELECT MAX(id) FROM reverifications),"
                " (SELECT MAX(id) FROM reports), (SELECT COALESCE(SUM(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint"
                " FROM pg_stat_user_tables WHERE relname = ANY(%s) AND schemaname = current_schema())",
                (list(_TABLES),)).fetchone())


def apply_migrations(conn: Any, target: int = SCHEMA_VERSION, location: str = "ledger") -> int:
    """Bring the database to ``target`` in one transaction under an advisory lock (servers
    starting together migrate once); return the version found before. Refuses a
    database newer than this code."""
    current = _read_version(conn, location)
    if current == target:
        return current
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
        found = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()[0]
        if found > SCHEMA_VERSION:
            raise LedgerError(f"ledger {location}: " + newer_schema_message(found))
        for migration in MIGRATIONS[found:target]:
            for statement in migration.render("postgresql"):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version, applied_at) VALUES (%s, %s)",
                         (migration.version, datetime.now(UTC).replace(microsecond=0).isoformat()))
        return found


def _read_version(conn: Any, location: str) -> int | None:
    if not conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()[0]:
        return None
    found = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
    if found is not None and found > SCHEMA_VERSION:
        raise LedgerError(f"ledger {location}: " + newer_schema_message(found))
    return found

"""One fresh ledger location per test on either backend, and raw SQL access to it (to
check what is stored, or to change it behind skill-server's back)."""
from __future__ import annotations

import secrets
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote


@dataclass
class Backend:
    kind: str  # "sqlite" | "postgresql"
    location: str  # what --ledger / $SKILL_SERVER_LEDGER takes
    key_path: Path
    admin_dsn: str | None = None
    schema: str | None = None
    _conn: Any = field(default=None, repr=False)

    @property
    def integrity_errors(self) -> tuple[type[BaseException], ...]:
        if self.kind == "sqlite":
            return (sqlite3.IntegrityError,)
        import psycopg

        return (psycopg.errors.IntegrityError,)

    def _connection(self) -> Any:
        if self._conn is None:
            if self.kind == "sqlite":
                self._conn = sqlite3.connect(self.location, isolation_level=None)
            else:
                import psycopg

                self._conn = psycopg.connect(self.location, autocommit=True)
        return self._conn

    def raw(self, sql: str, args: tuple = ()) -> list[tuple]:
        """Run one statement outside skill-server (``?`` parameters) and return its rows."""
        conn = self._connection()
        cur = conn.execute(sql if self.kind == "sqlite" else sql.replace("?", "%s"), args)
        return cur.fetchall() if cur.description else []

    def tables(self) -> set[str]:
        if self.kind == "sqlite":
            return {r[0] for r in self.raw("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return {r[0] for r in self.raw("SELECT table_name FROM information_schema.tables WHERE table_schema = ?",
                                       (self.schema,))}

    def close(self) -> None:
        """Close the raw connection (the ledger stays)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def drop(self) -> None:
        """Close, and remove a PostgreSQL test schema with everything in it."""
        self.close()
        if self.kind == "postgresql" and self.admin_dsn:
            import psycopg

            with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


def make_backend(kind: str, tmp_path: Path, dsn: str | None = None) -> Backend:
    """SQLite: ``tmp/var/ledger.sqlite`` (its key is created on the first write, beside it).
    PostgreSQL: a new schema in the server's database, the fleet key provisioned."""
    if kind == "sqlite":
        return Backend(kind, str(tmp_path / "var" / "ledger.sqlite"), tmp_path / "var" / "signing.key")
    import psycopg

    from skill_server.ledger.signing import create_key

    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    key = tmp_path / "fleet-key" / "signing.key"
    create_key(key)
    sep = "&" if "?" in dsn else "?"
    return Backend(kind, f"{dsn}{sep}options={quote(f'-csearch_path={schema}')}", key, admin_dsn=dsn, schema=schema)

"""Several processes writing at once lose nothing; a writer killed mid-transaction leaves
the store consistent with no partial record; older schemas migrate forward. Every test runs
on both backends (SQLite, PostgreSQL: a real server)."""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import signal
import sqlite3
import time
from pathlib import Path

import ledger_support
import pytest
from ledger_support import BLOCKSCALE, CARDS, record

from skill_server.ledger.results import MIGRATIONS, SCHEMA_VERSION, Ledger, LedgerError, validate_record

PROCS, PER_PROC = 4, 50


def _ctx():
    return mp.get_context("spawn")  # a fresh interpreter per writer, like separate CLI / server processes


def _assert_complete(backend) -> int:
    """Every stored result has both arm rows and a payload that validates; return the count."""
    assert Ledger(backend.location).integrity_check() == "ok"
    rows = backend.raw("SELECT r.id, r.payload_json, COUNT(a.role) FROM results r "
                       "LEFT JOIN result_arms a ON a.result_id = r.id GROUP BY r.id")
    [(orphans,)] = backend.raw("SELECT COUNT(*) FROM result_arms WHERE result_id NOT IN (SELECT id FROM results)")
    backend.close()
    assert orphans == 0
    for rid, payload, arms in rows:
        assert arms == 2, f"result {rid} has {arms} arm rows"
        validate_record({k: v for k, v in json.loads(payload).items() if k != "recorded_at"}, known_cards=CARDS)
    return len(rows)


def test_concurrent_writers_lose_nothing(ledger_backend):
    path = ledger_backend.location
    Ledger(path).history()  # nothing yet: the writers race to create and migrate the file
    procs = [_ctx().Process(target=ledger_support.write_records, args=(str(path), w, PER_PROC)) for w in range(PROCS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0, f"writer exited with {p.exitcode}"
    assert _assert_complete(ledger_backend) == PROCS * PER_PROC
    notes = {r.notes for r in Ledger(path).history(limit=10_000)}
    assert notes == {f"worker {w} record {i}" for w in range(PROCS) for i in range(PER_PROC)}
    assert Ledger(path).schema_version() == SCHEMA_VERSION


def _wait_for(marker: Path, proc, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert proc.is_alive(), f"writer died early (exit code {proc.exitcode})"
        assert time.monotonic() < deadline, "writer never reached the marker"
        time.sleep(0.02)


def test_a_writer_killed_inside_its_transaction_leaves_no_partial_record(ledger_backend, tmp_path):
    path, marker = ledger_backend.location, tmp_path / "in-transaction"
    stop_at = 7
    proc = _ctx().Process(target=ledger_support.write_until_killed, args=(str(path), stop_at, str(marker)))
    proc.start()
    _wait_for(marker, proc)
    # the writer now holds the write lock with the 7th result row inserted and its arms not yet
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=30)
    assert proc.exitcode == -signal.SIGKILL
    assert _assert_complete(ledger_backend) == stop_at - 1
    notes = [r.notes for r in Ledger(path).history()]
    assert f"record {stop_at - 1}" not in notes and "record 0" in notes
    # the store takes new writes at once: the dead writer's lock went with it
    Ledger(path, busy_timeout_s=5).record([validate_record(record(), known_cards=CARDS)])
    assert _assert_complete(ledger_backend) == stop_at


def test_a_writer_killed_at_a_random_moment_leaves_a_consistent_store(ledger_backend, tmp_path):
    path, marker = ledger_backend.location, tmp_path / "started"
    proc = _ctx().Process(target=ledger_support.write_forever, args=(str(path), str(marker)))
    proc.start()
    _wait_for(marker, proc)
    time.sleep(random.uniform(0.05, 0.4))
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=30)
    count = _assert_complete(ledger_backend)
    assert count > 0 and count % 5 == 0, "batches are all or nothing"


def _migrate_raw(backend, target: int) -> None:
    """Build the schema of an older release, as that release would have."""
    if backend.kind == "sqlite":
        from skill_server.ledger.sqlite import apply_migrations

        Path(backend.location).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(backend.location, isolation_level=None)
        apply_migrations(conn, target=target)
        conn.close()
    else:
        import psycopg

        from skill_server.ledger.postgres import apply_migrations

        with psycopg.connect(backend.location, autocommit=True) as conn:
            apply_migrations(conn, target=target)


def test_a_version_1_ledger_migrates_forward_and_keeps_its_records(ledger_backend):
    _migrate_raw(ledger_backend, 1)
    rec = validate_record(record(), known_cards=CARDS)
    payload = rec.model_dump(mode="json", exclude={"recorded_at", "scope"})  # v1 records had no scope
    payload.update(recorded_at="2026-07-17T10:00:00+00:00", recorded_by="old-agent")
    ledger_backend.raw(
        "INSERT INTO results (uid, card_id, shape, verdict, speedup, ci_low, ci_high, platform_key, device,"
        " generation, runtime, git_rev, recorded_at, recorded_by, source, payload_json)"
        " VALUES ('u1', ?, '4096x2048x7168', 'FASTER', 1.0526, 1.04, 1.06, 'rocm/gfx950', 'MI355X', 'gfx950',"
        " 'rocm', '41a379d', '2026-07-17T10:00:00+00:00', 'old-agent', 'manual', ?)", (BLOCKSCALE, json.dumps(payload)))
    ledger_backend.raw("INSERT INTO result_arms VALUES (1, 'baseline', 'ck_blockscale', 0.2),"
                       " (1, 'candidate', 'flydsl_8wave', 0.19)")
    assert ledger_backend.raw("SELECT MAX(version) FROM schema_version") == [(1,)]
    assert "reverifications" not in ledger_backend.tables()

    ledger = Ledger(ledger_backend.location)
    old = ledger.history(card_id=BLOCKSCALE)
    assert ledger.schema_version() == SCHEMA_VERSION == len(MIGRATIONS)
    assert [(r.recorded_by, r.scope, r.speedup) for r in old] == [("old-agent", "isolated", 1.0526)]
    assert ledger_backend.raw("SELECT scope FROM results WHERE id = 1") == [("isolated",)]
    versions = [v for (v,) in ledger_backend.raw("SELECT version FROM schema_version ORDER BY version")]
    assert versions == list(range(1, SCHEMA_VERSION + 1))
    ledger.record([validate_record(record(scope="segment"), known_cards=CARDS)])  # v2 features work
    assert {r.scope for r in ledger.history()} == {"isolated", "segment"}
    assert ledger.integrity_check() == "ok"


def test_a_failed_migration_rolls_back_whole(ledger_backend, monkeypatch):
    import skill_server.ledger.postgres as postgres_store
    import skill_server.ledger.sqlite as sqlite_store
    from skill_server.ledger.schema import Migration

    _migrate_raw(ledger_backend, 1)
    broken = (MIGRATIONS[0], Migration(2, "broken", MIGRATIONS[1].statements[:2] + ("THIS IS NOT SQL",)))
    monkeypatch.setattr(sqlite_store if ledger_backend.kind == "sqlite" else postgres_store, "MIGRATIONS", broken)
    with pytest.raises((sqlite3.OperationalError, LedgerError)):
        Ledger(ledger_backend.location).schema_version()
    version = ledger_backend.raw("SELECT MAX(version) FROM schema_version")[0][0]
    assert version == 1, "a half-applied migration must not remain"
    assert ledger_backend.raw("SELECT COUNT(*) FROM results") == [(0,)]
    with pytest.raises(Exception):  # the column the broken migration added before failing is gone too
        ledger_backend.raw("SELECT scope FROM results")

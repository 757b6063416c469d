"""Ledger writes per second with 8 concurrent writers: SQLite vs PostgreSQL, side by side.

    python bench/ledger_throughput.py [--writers 8] [--per-writer 100] [--out bench/results]

Two paths per backend, each with ``--writers`` processes writing ``--per-writer`` records,
one record per transaction (as agents record):
- store: ``Ledger.record`` (validation, signing-key check, one transaction);
- MCP: each process runs the MCP server (``build_server``) and calls ``record_result``
  through the SDK's in-memory client (the protocol, the tool, the service, the store).
PostgreSQL is a throw-away local cluster (tests/pg_cluster.py) with its default durability
(fsync on, synchronous_commit on); SQLite is WAL with synchronous=FULL, as shipped.
Writes ``ledger_throughput.json`` and ``.md`` under ``--out``.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]


def _store_writer(location: str, worker: int, count: int, start: mp.Event) -> None:
    from ledger_support import CARDS, record

    from skill_server.ledger import Ledger, validate_record

    ledger = Ledger(location)
    recs = [validate_record(record(notes=f"w{worker} r{i}", shape=f"{64 * (worker + 1)}x{128 + i}x256"),
                            known_cards=CARDS) for i in range(count)]
    ledger.store.key_ids()  # connect (and migrate) before the clock starts
    start.wait()
    for r in recs:
        ledger.record([r])


def _mcp_writer(location: str, worker: int, count: int, start: mp.Event) -> None:
    import anyio
    from ledger_support import SKILLS, record
    from mcp import Client

    from skill_server.mcp_app import ServerSettings, build_server
    from skill_server.service import SkillService

    server = build_server(SkillService(SKILLS, ledger_path=location), ServerSettings(allow_write_tools=True))

    async def main() -> None:
        async with Client(server) as client:
            await client.call_tool("get_validation_history", {"card_id": "flydsl_fp8_blockscale_gemm", "limit": 1})
            start.wait()
            for i in range(count):
                res = await client.call_tool("record_result", {"records": [
                    record(notes=f"w{worker} r{i}", shape=f"{64 * (worker + 1)}x{128 + i}x256")]})
                assert not res.is_error, res

    anyio.run(main)


def run(path: str, location: str, writers: int, per: int) -> float:
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    target = _store_writer if path == "store" else _mcp_writer
    procs = [ctx.Process(target=target, args=(location, w, per, start)) for w in range(writers)]
    for p in procs:
        p.start()
    time.sleep(8.0)  # every writer imported, connected and waiting
    t0 = time.perf_counter()
    start.set()
    for p in procs:
        p.join()
        assert p.exitcode == 0, f"writer exited with {p.exitcode}"
    return time.perf_counter() - t0


def count(location: str) -> int:
    from skill_server.ledger import Ledger

    return len(Ledger(location).history(limit=10_000))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--per-writer", type=int, default=100)
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = ap.parse_args()
    from pg_cluster import ThrowawayCluster, wait_ready

    from skill_server.evidence import create_key

    tmp = Path(tempfile.mkdtemp(prefix="skill-bench-"))
    os.environ["SKILL_SERVER_KEY"] = str(tmp / "signing.key")
    create_key(tmp / "signing.key")
    cluster = ThrowawayCluster(Path(tempfile.mkdtemp(prefix="skill-pg-")))
    rows = []
    try:
        dsn = cluster.start()
        wait_ready(dsn)
        import psycopg

        for path in ("store", "mcp"):
            for backend in ("sqlite", "postgresql"):
                if backend == "sqlite":
                    location = str(tmp / f"{path}.sqlite")
                else:
                    with psycopg.connect(dsn, autocommit=True) as conn:
                        conn.execute(f"CREATE DATABASE bench_{path}")
                    location = dsn.rsplit("/", 1)[0] + f"/bench_{path}"
                seconds = run(path, location, args.writers, args.per_writer)
                n = count(location)
                assert n == args.writers * args.per_writer, (backend, path, n)
                rows.append({"backend": backend, "path": path, "records": n, "seconds": round(seconds, 3),
                             "records_per_s": round(n / seconds, 1)})
                print(rows[-1], flush=True)
    finally:
        cluster.stop()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    by = {(r["backend"], r["path"]): r["records_per_s"] for r in rows}
    doc = {"command": " ".join(["python", "bench/ledger_throughput.py", *sys.argv[1:]]),
           "date": datetime.now(UTC).isoformat(timespec="seconds"),
           "device": f"{platform.machine()} CPU, {os.cpu_count()} cores (no GPU)", "writers": args.writers,
           "per_writer": args.per_writer, "rows": rows,
           "ratios": {p: round(by[("postgresql", p)] / by[("sqlite", p)], 2) for p in ("store", "mcp")}}
    (out / "ledger_throughput.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [f"# Ledger writes, {args.writers} concurrent writers, one record per transaction", "",
             f"`{doc['command']}`, {doc['date']}, {doc['device']}; PostgreSQL 15 local cluster, default durability; "
             "SQLite WAL synchronous=FULL.", "", "| path | SQLite records/s | PostgreSQL records/s | PG / SQLite |",
             "|---|---|---|---|"]
    for p in ("store", "mcp"):
        lines.append(f"| {p} | {by[('sqlite', p)]} | {by[('postgresql', p)]} | {doc['ratios'][p]} |")
    (out / "ledger_throughput.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

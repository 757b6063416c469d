"""Ledger writes per second with 8 concurrent writers: SQLite vs PostgreSQL, side by side.

    python bench/ledger_throughput.py [--writers 8] [--per-writer 100] [--out bench/results]

Three paths per backend, each with ``--writers`` processes writing ``--per-writer``
records, one record per transaction (as agents record):
- store: ``Ledger.record`` (validation, signing-key check, one transaction);
- mcp: each process runs the MCP server (``build_server``) and calls ``record_result``
  through the SDK's in-memory client (the protocol, the tool, the service, the store);
- stdio: each process starts a real ``skill-server serve --enable-write-tools`` and calls
  ``record_result`` over its stdin/stdout with the SDK's stdio client (adds JSON-RPC
  framing over pipes and a second process per writer).
The clock starts once every writer has reported ready (imported, server built or started,
connected, one read done) and stops when the last one reports done; start-up is never in
the figure. (Before this bench waited a fixed 8 s for readiness: on a loaded 2-core box 8
MCP servers were still importing, and their start-up was counted as writing time.)
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
PATHS = ("store", "mcp", "stdio")


def _store_writer(location: str, worker: int, count: int, start, queue) -> None:
    from ledger_support import CARDS, record

    from skill_server.ledger.results import Ledger, validate_record

    ledger = Ledger(location)
    recs = [validate_record(record(notes=f"w{worker} r{i}", shape=f"{64 * (worker + 1)}x{128 + i}x256"),
                            known_cards=CARDS) for i in range(count)]
    ledger.store.key_ids()  # connect (and migrate) before the clock starts
    queue.put(("ready", worker, time.perf_counter()))
    start.wait()
    for r in recs:
        ledger.record([r])
    queue.put(("done", worker, time.perf_counter()))


def _client_writer(path: str, location: str, worker: int, count: int, start, queue) -> None:
    import anyio
    from ledger_support import SKILLS, record
    from mcp import Client

    if path == "mcp":
        from skill_server.mcp.app import ServerSettings, build_server
        from skill_server.service.facade import SkillService

        target = build_server(SkillService(SKILLS, ledger_path=location), ServerSettings(allow_write_tools=True))
    else:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        env = {k: v for k, v in os.environ.items() if k != "SKILL_SERVER_LEDGER"}
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
        target = stdio_client(StdioServerParameters(
            command=sys.executable, args=["-m", "skill_server.cli.entry", "--skills-dir", str(SKILLS), "--ledger", location,
                                          "serve", "--enable-write-tools", "--quiet"], env=env, cwd=str(REPO)),
            errlog=open(os.devnull, "w"))  # noqa: SIM115 - the server's start-up line; closed at exit

    async def main() -> None:
        async with Client(target) as client:
            await client.call_tool("get_validation_history", {"card_id": "flydsl_fp8_blockscale_gemm", "limit": 1})
            queue.put(("ready", worker, time.perf_counter()))
            await anyio.to_thread.run_sync(start.wait)
            for i in range(count):
                res = await client.call_tool("record_result", {"records": [
                    record(notes=f"w{worker} r{i}", shape=f"{64 * (worker + 1)}x{128 + i}x256")]})
                assert not res.is_error, res
            queue.put(("done", worker, time.perf_counter()))

    anyio.run(main)


def run(path: str, location: str, writers: int, per: int) -> float:
    """Seconds from the moment every writer is ready to the last one's last commit."""
    ctx = mp.get_context("spawn")
    start, queue = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_store_writer, args=(location, w, per, start, queue)) if path == "store" else
             ctx.Process(target=_client_writer, args=(path, location, w, per, start, queue)) for w in range(writers)]
    for p in procs:
        p.start()
    for _ in range(writers):
        kind, worker, _at = queue.get(timeout=600)
        assert kind == "ready", (kind, worker)
    t0 = time.perf_counter()  # CLOCK_MONOTONIC on Linux: one clock for every process
    start.set()
    done = [queue.get(timeout=600) for _ in range(writers)]
    for p in procs:
        p.join()
        assert p.exitcode == 0, f"writer exited with {p.exitcode}"
    assert all(kind == "done" for kind, _, _ in done), done
    return max(at for _, _, at in done) - t0


def count(location: str) -> int:
    from skill_server.ledger.results import Ledger

    return len(Ledger(location).history(limit=10_000))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--per-writer", type=int, default=100)
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = ap.parse_args()
    from pg_cluster import ThrowawayCluster, wait_ready

    from skill_server.ledger.signing import create_key

    tmp = Path(tempfile.mkdtemp(prefix="skill-bench-"))
    os.environ["SKILL_SERVER_KEY"] = str(tmp / "signing.key")
    create_key(tmp / "signing.key")
    cluster = ThrowawayCluster(Path(tempfile.mkdtemp(prefix="skill-pg-")))
    rows = []
    try:
        dsn = cluster.start()
        wait_ready(dsn)
        import psycopg

        for path in PATHS:
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
           "ratios": {p: round(by[("postgresql", p)] / by[("sqlite", p)], 2) for p in PATHS}}
    (out / "ledger_throughput.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [f"# Ledger writes, {args.writers} concurrent writers, one record per transaction", "",
             f"`{doc['command']}`, {doc['date']}, {doc['device']}; PostgreSQL 15 local cluster, default durability; "
             "SQLite WAL synchronous=FULL. The clock runs from all writers ready to the last commit (start-up excluded). "
             "Issue 16's reference: ~187 records/s through MCP on SQLite.", "", "| path | SQLite records/s | PostgreSQL records/s | PG / SQLite |",
             "|---|---|---|---|"]
    for p in PATHS:
        lines.append(f"| {p} | {by[('sqlite', p)]} | {by[('postgresql', p)]} | {doc['ratios'][p]} |")
    (out / "ledger_throughput.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""History query latency on PostgreSQL at 1 M records: p50 / p99 per filter, with EXPLAIN.

    python bench/ledger_history_pg.py [--rows 1000000] [--queries 300] [--out bench/results]

Loads ``--rows`` results (3 cards x 64 shapes x 4 platforms, valid payloads of about
1 KB, two arm rows each) into a fresh ledger on a throw-away local PostgreSQL 15 cluster
with COPY, ANALYZEs, then times ``PostgresStore.results`` (the query ``history`` /
``get_validation_history`` run, limit 50) for random values of each filter: card; card +
shape; card + platform; card + shape + platform. Each query is timed end to end in the
client (SQL, transfer, decoding and validating the rows). EXPLAIN (ANALYZE, BUFFERS) of
one query per filter goes to the results file.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import platform as _platform
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

CARDS = ["flydsl_fp8_blockscale_gemm", "flydsl_mxfp8_8wave_gemm", "flydsl_prefill_moe_stage2_fp8partial"]
PLATFORMS = [("AMD Instinct MI355X", "gfx950", "rocm"), ("NVIDIA H200", "sm_90", "cuda"),
             ("AMD Instinct MI300X", "gfx942", "rocm"), ("cpu (x86_64)", "x86_64", "cpu")]
SHAPES = [f"{m}x{n}x{k}" for m in (256, 1024, 4096, 16384) for n in (512, 2048, 7168, 8192) for k in (256, 768, 1536, 7168)]


def payloads() -> dict[tuple[str, str, int], str]:
    from ledger_support import record

    from skill_server.ledger_models import validate_record
    from skill_server.ledger_store import ResultEntry

    out = {}
    for card in CARDS:
        for shape in SHAPES:
            for p, (device, gen, runtime) in enumerate(PLATFORMS):
                rec = validate_record(record(card_id=card, shape=shape, platform={
                    "device": device, "generation": gen, "runtime": runtime, "libraries": {"torch": "2.13.0"}},
                    notes="x" * 600), known_cards=set(CARDS))
                entry = ResultEntry(record=rec, recorded_at=datetime(2026, 7, 1, tzinfo=UTC),
                                    evidence=__import__("skill_server.evidence", fromlist=["Evidence"]).Evidence(
                                        level="reported", note="bench"))
                out[(card, shape, p)] = json.dumps(entry.payload())
    return out


def load(conn, rows: int) -> None:
    texts = payloads()
    keys = list(texts)
    rnd = random.Random(0)
    evidence = json.dumps({"level": "reported", "note": "bench"})
    with conn.cursor().copy("COPY results (uid, card_id, shape, verdict, speedup, ci_low, ci_high, platform_key,"
                            " device, generation, runtime, git_rev, recorded_at, recorded_by, source, payload_json,"
                            " scope, evidence_level, evidence_json) FROM STDIN") as copy:
        for i in range(rows):
            card, shape, p = keys[rnd.randrange(len(keys))]
            device, gen, runtime = PLATFORMS[p]
            copy.write_row((f"u{i:08d}", card, shape, "FASTER", 1.0526, 1.04, 1.06, f"{runtime}/{gen}", device, gen,
                            runtime, "41a379d", "2026-07-01T00:00:00+00:00", "bench", "manual", texts[(card, shape, p)],
                            "isolated", "reported", evidence))
    conn.execute("INSERT INTO result_arms (result_id, role, name, time_ms) SELECT id, 'baseline', 'ck', 0.2 FROM results")
    conn.execute("INSERT INTO result_arms (result_id, role, name, time_ms) SELECT id, 'candidate', 'fly', 0.19"
                 " FROM results")
    conn.execute("ANALYZE")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = ap.parse_args()
    import psycopg
    from pg_cluster import ThrowawayCluster, wait_ready

    from skill_server.ledger_postgres import PostgresStore
    from skill_server.ledger_store import ResultQuery

    cluster = ThrowawayCluster(Path(tempfile.mkdtemp(prefix="skill-pg-")))
    try:
        dsn = cluster.start()
        wait_ready(dsn)
        url = dsn.rsplit("/", 1)[0] + "/history"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE DATABASE history")
        store = PostgresStore(url)
        store.schema_version()  # creates the schema through the real migrations
        t0 = time.perf_counter()
        with psycopg.connect(url, autocommit=True) as conn:
            load(conn, args.rows)
            size = conn.execute("SELECT pg_size_pretty(pg_database_size('history'))").fetchone()[0]
        load_s = time.perf_counter() - t0
        rnd = random.Random(1)
        filters = {
            "card": lambda: ResultQuery(card_id=rnd.choice(CARDS), limit=50),
            "card+shape": lambda: ResultQuery(card_id=rnd.choice(CARDS), shape=rnd.choice(SHAPES), limit=50),
            "card+platform": lambda: ResultQuery(card_id=rnd.choice(CARDS), platform=rnd.choice(["rocm/gfx950", "cuda/sm_90",
                                                                                             "gfx942", "cpu/x86_64"]), limit=50),
            "card+shape+platform": lambda: ResultQuery(card_id=rnd.choice(CARDS), shape=rnd.choice(SHAPES),
                                                       platform=rnd.choice(["rocm/gfx950", "cuda/sm_90"]), limit=50),
        }
        rows, explains = [], {}
        for name, make in filters.items():
            for _ in range(20):  # warm the cache and the prepared statements
                store.results(make())
            times = []
            for _ in range(args.queries):
                q = make()
                t = time.perf_counter()
                got = store.results(q)
                times.append((time.perf_counter() - t) * 1000)
                assert got, name
            times.sort()
            rows.append({"filter": name, "p50_ms": round(statistics.median(times), 2),
                         "p99_ms": round(times[int(0.99 * (len(times) - 1))], 2), "max_ms": round(times[-1], 2)})
            print(rows[-1], flush=True)
            q = make()
            sql, params = _sql_of(store, q)
            with psycopg.connect(url, autocommit=True) as conn:
                plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params).fetchall()
            explains[name] = [r[0] for r in plan]
    finally:
        cluster.stop()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"command": " ".join(["python", "bench/ledger_history_pg.py", *sys.argv[1:]]),
           "date": datetime.now(UTC).isoformat(timespec="seconds"),
           "device": f"{_platform.machine()} CPU, {os.cpu_count()} cores; PostgreSQL 15 local cluster (defaults, "
                     "shared_buffers 64MB)", "rows": args.rows, "database_size": size, "load_seconds": round(load_s, 1),
           "queries_per_filter": args.queries, "results": rows, "explain": explains}
    (out / "ledger_history_pg.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [f"# History query latency, PostgreSQL, {args.rows:,} results", "",
             f"`{doc['command']}`, {doc['date']}, {doc['device']}; database {size}; limit 50; "
             f"{args.queries} queries per filter, client-side end to end.", "",
             "| filter | p50 ms | p99 ms | max ms |", "|---|---|---|---|"]
    lines += [f"| {r['filter']} | {r['p50_ms']} | {r['p99_ms']} | {r['max_ms']} |" for r in rows]
    for name, plan in explains.items():
        lines += ["", f"## EXPLAIN ANALYZE: {name}", "", "```", *plan, "```"]
    (out / "ledger_history_pg.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:10 + len(rows)]))
    return 0


def _sql_of(store, query) -> tuple[str, list]:
    """The SQL ``store.results`` runs for ``query`` (captured from the store itself)."""
    captured = {}

    class Capture:
        def fetchall(self):
            return []

    real = store._run

    def grab(conn, sql, args=()):
        captured["sql"], captured["args"] = store._sql(sql), list(args)
        return Capture()

    store._run = grab
    try:
        store.results(query)
    finally:
        store._run = real
    return captured["sql"], captured["args"]


if __name__ == "__main__":
    sys.exit(main())

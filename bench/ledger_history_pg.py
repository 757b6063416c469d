"""History query latency on PostgreSQL at 1 M records: p50 / p99 per filter, with EXPLAIN,
before and after migration 5 and the stored-row decoder, with and without the row memo, in one
run on one database.

    python bench/ledger_history_pg.py [--rows 1000000] [--queries 300] [--out bench/results]

Loads ``--rows`` results (3 cards x 64 shapes x 4 platforms, valid payloads of about
1 KB, two arm rows each, every one ``verified`` and signed by a fleet key) into a fresh
ledger on a throw-away local PostgreSQL 15 cluster with COPY, ANALYZEs, then times
``Ledger.history`` (what ``get_validation_history`` runs: the SQL, decoding every row,
and checking each verified row's signature again, limit 50) for random values of each
filter: card; card + shape; card + platform; card + shape + platform. Each query is timed
end to end in the client. Two phases on the same rows:

- before: the schema at version 4 and the previous decoder (every write-time rule run again
  on each row read), reproduced here as ``_result_v4``;
- after: migration 5 applied (index ``results_by_card_shape``) and today's decoder.

EXPLAIN (ANALYZE, BUFFERS) of one query per filter and phase goes to the results file.
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


DIGEST = "ab" * 32


def payloads(key) -> dict[tuple[str, str, int], tuple[str, str]]:
    """(payload JSON, evidence JSON) per (card, shape, platform): signed as a verified
    result of report ``DIGEST``, exactly as ``Ledger.record_report`` signs one."""
    from ledger_support import record

    from skill_server.ledger.signing import Evidence
    from skill_server.ledger.results import _result_content
    from skill_server.ledger.models import validate_record
    from skill_server.ledger.store import ResultEntry

    out = {}
    for card in CARDS:
        for shape in SHAPES:
            for p, (device, gen, runtime) in enumerate(PLATFORMS):
                rec = validate_record(record(card_id=card, shape=shape, platform={
                    "device": device, "generation": gen, "runtime": runtime, "libraries": {"torch": "2.13.0"}},
                    notes="x" * 600), known_cards=set(CARDS))
                entry = ResultEntry(record=rec, recorded_at=datetime(2026, 7, 1, tzinfo=UTC),
                                    evidence=Evidence(level="reported"))
                base = Evidence(level="reported", report_digest=DIGEST)
                evidence = base.model_copy(update={"level": "verified", "signature": key.sign(
                    "result", _result_content(entry.payload(), base))})
                out[(card, shape, p)] = (json.dumps(entry.payload()), evidence.model_dump_json(exclude_none=True))
    return out


def load(conn, rows: int, key) -> None:
    texts = payloads(key)
    keys = list(texts)
    rnd = random.Random(0)
    with conn.cursor().copy("COPY results (uid, card_id, shape, verdict, speedup, ci_low, ci_high, platform_key,"
                            " device, generation, runtime, git_rev, recorded_at, recorded_by, source, payload_json,"
                            " scope, evidence_level, report_digest, evidence_json) FROM STDIN") as copy:
        for i in range(rows):
            card, shape, p = keys[rnd.randrange(len(keys))]
            device, gen, runtime = PLATFORMS[p]
            payload, evidence = texts[(card, shape, p)]
            copy.write_row((f"u{i:08d}", card, shape, "FASTER", 1.0526, 1.04, 1.06, f"{runtime}/{gen}", device, gen,
                            runtime, "41a379d", "2026-07-01T00:00:00+00:00", "bench", "manual", payload,
                            "isolated", "verified", DIGEST, evidence))
    conn.execute("INSERT INTO result_arms (result_id, role, name, time_ms) SELECT id, 'baseline', 'ck', 0.2 FROM results")
    conn.execute("INSERT INTO result_arms (result_id, role, name, time_ms) SELECT id, 'candidate', 'fly', 0.19"
                 " FROM results")
    conn.execute("ANALYZE")


def _result_v4(rid, uid, payload, evidence_json):
    """The decoder before this change (v-judge's ``ledger_sql._result``): every write-time
    rule of ``ResultRecord`` run again on each row read."""
    from skill_server.ledger.models import StoredResult
    from skill_server.ledger.sql import _evidence

    data = json.loads(payload)
    stored = StoredResult(**data, id=rid, uid=uid, evidence=_evidence(evidence_json))
    stored._payload = data
    return stored


def measure(ledger, store, url, filters, queries: int) -> tuple[list[dict], dict[str, list[str]]]:
    import gc

    import psycopg

    # as `skill-server serve` does once started (cli_serve._started): what was loaded leaves the
    # collector's generations, so a full collection no longer walks it in the middle of a query
    gc.collect()
    gc.freeze()
    rows, explains = [], {}
    for name, make in filters.items():
        for _ in range(20):  # warm the cache and the prepared statements
            ledger.history(**make())
        times, cpu = [], []
        for _ in range(queries):
            q = make()
            t, c = time.perf_counter(), time.process_time()
            got = ledger.history(**q)
            times.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
            assert got and all(r.evidence.level == "verified" for r in got), name
        times.sort()
        rows.append({"filter": name, "p50_ms": round(statistics.median(times), 2),
                     "p99_ms": round(times[int(0.99 * (len(times) - 1))], 2), "max_ms": round(times[-1], 2),
                     "client_cpu_p50_ms": round(statistics.median(cpu), 2),
                     "server_ms": None, "load_average": round(os.getloadavg()[0], 2)})
        print(rows[-1], flush=True)
        sql, params = _sql_of(store, ledger, make())
        with psycopg.connect(url, autocommit=True) as conn:
            plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params).fetchall()
        explains[name] = [r[0] for r in plan]
        rows[-1]["server_ms"] = next((float(line.split(":")[1].split()[0]) for line in explains[name]
                                      if line.startswith("Execution Time")), None)
    return rows, explains


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = ap.parse_args()
    import psycopg
    from pg_cluster import ThrowawayCluster, wait_ready

    from skill_server.ledger import sql as ledger_sql
    from skill_server.ledger.signing import create_key
    from skill_server.ledger.results import Ledger
    from skill_server.ledger.postgres import PostgresStore, apply_migrations

    tmp = Path(tempfile.mkdtemp(prefix="skill-pg-"))
    key_path = tmp / "fleet.key"
    key = create_key(key_path)
    cluster = ThrowawayCluster(Path(tempfile.mkdtemp(prefix="skill-pg-")))
    rnd = random.Random(1)
    filters = {
        "card": lambda: {"card_id": rnd.choice(CARDS), "limit": 50},
        "card+shape": lambda: {"card_id": rnd.choice(CARDS), "shape": rnd.choice(SHAPES), "limit": 50},
        "card+platform": lambda: {"card_id": rnd.choice(CARDS), "limit": 50,
                                  "platform": rnd.choice(["rocm/gfx950", "cuda/sm_90", "gfx942", "cpu/x86_64"])},
        "card+shape+platform": lambda: {"card_id": rnd.choice(CARDS), "shape": rnd.choice(SHAPES), "limit": 50,
                                        "platform": rnd.choice(["rocm/gfx950", "cuda/sm_90"])},
    }
    phases = {}
    try:
        dsn = cluster.start()
        wait_ready(dsn)
        url = dsn.rsplit("/", 1)[0] + "/history"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE DATABASE history")
        t0 = time.perf_counter()
        with psycopg.connect(url, autocommit=True) as conn:
            apply_migrations(conn, target=4)  # the schema before this change
            load(conn, args.rows, key)
            size = conn.execute("SELECT pg_size_pretty(pg_database_size('history'))").fetchone()[0]
        load_s = time.perf_counter() - t0

        store = PostgresStore(url)
        store._migrated = True  # keep it at version 4 for the "before" phase
        ledger_sql._result, current = _result_v4, ledger_sql._result
        try:
            phases["before"] = measure(Ledger(url, key_path=key_path, store=store), store, url, filters, args.queries)
        finally:
            ledger_sql._result = current
        store.close()

        store = PostgresStore(url)
        t0 = time.perf_counter()
        assert store.schema_version() == 5  # the first read applies migration 5 (CREATE INDEX on the loaded rows)
        migrate_s = time.perf_counter() - t0
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE results")
        from skill_server.ledger import results as ledger_module
        size_memo = ledger_module.CHECKED_ROWS.maxsize
        ledger_module.CHECKED_ROWS.maxsize = 0  # every row's signature checked
        try:
            phases["after, no row memo"] = measure(Ledger(url, key_path=key_path, store=store), store, url, filters,
                                                   args.queries)
        finally:
            ledger_module.CHECKED_ROWS.maxsize = size_memo
        phases["after"] = measure(Ledger(url, key_path=key_path, store=store), store, url, filters, args.queries)
        store.close()
    finally:
        cluster.stop()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"command": " ".join(["python", "bench/ledger_history_pg.py", *sys.argv[1:]]),
           "date": datetime.now(UTC).isoformat(timespec="seconds"),
           "device": f"{_platform.machine()} CPU, {os.cpu_count()} cores (shared with other work); PostgreSQL 15 "
                     "local cluster (defaults, shared_buffers 64MB)", "rows": args.rows, "database_size": size,
           "load_seconds": round(load_s, 1), "migration_5_seconds": round(migrate_s, 1),
           "queries_per_filter": args.queries, "goal_p99_ms": 20,
           "phases": {name: {"results": r, "explain": e} for name, (r, e) in phases.items()}}
    (out / "ledger_history_pg.json").write_text(json.dumps(doc, indent=2) + "\n")
    before = {r["filter"]: r for r in phases["before"][0]}
    lines = [f"# History query latency, PostgreSQL, {args.rows:,} verified results", "",
             f"`{doc['command']}`, {doc['date']}, {doc['device']}; database {size}; limit 50; "
             f"{args.queries} queries per filter through `Ledger.history` (SQL, decoding, signature check of every "
             "row), client-side end to end. Goal: p99 <= 20 ms.", "",
             "before: schema version 4, the v-judge decoder (write-time rules re-run per row); after: migration 5 "
             f"(`results_by_card_shape (card_id, shape, id)`, applied to the loaded rows in {doc['migration_5_seconds']} s)"
             " and the stored-row decoder; after, no row memo: the same with the memo of signature checks (keyed by the"
             " rows' bytes, `skill_server.ledger.bounded_cache`) switched off, so every row's signature is checked. Same database, same run.", "",
             "Wall time end to end; client CPU: the process's CPU time per query (what our code costs, apart from "
             "the box's other load); server: EXPLAIN ANALYZE execution time of one such query. Load average "
             "(1 min) when the filter finished. Before each phase the heap is frozen (`gc.freeze()`), as the "
             "server does once started.", "",
             "| filter | before p50 / p99 ms | after, no row memo p50 / p99 ms | after p50 / p99 ms | p99 after/before"
             " | client CPU p50 ms before -> no memo -> after | server ms before -> after | load avg |",
             "|---|---|---|---|---|---|---|---|"]
    cold = {r["filter"]: r for r in phases["after, no row memo"][0]}
    for r in phases["after"][0]:
        b, c = before[r["filter"]], cold[r["filter"]]
        lines.append(f"| {r['filter']} | {b['p50_ms']} / {b['p99_ms']} | {c['p50_ms']} / {c['p99_ms']} |"
                     f" {r['p50_ms']} / {r['p99_ms']} | {r['p99_ms'] / b['p99_ms']:.2f} |"
                     f" {b['client_cpu_p50_ms']} -> {c['client_cpu_p50_ms']} -> {r['client_cpu_p50_ms']} |"
                     f" {b['server_ms']} -> {r['server_ms']} | {b['load_average']}, {r['load_average']} |")
    for phase, (_, explains) in phases.items():
        for name, plan in explains.items():
            lines += ["", f"## EXPLAIN ANALYZE, {phase}: {name}", "", "```", *plan, "```"]
    (out / "ledger_history_pg.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:12 + len(phases["after"][0])]))
    return 0


def _sql_of(store, ledger, query: dict) -> tuple[str, list]:
    """The SQL ``ledger.history(**query)`` runs (captured from the store itself)."""
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
        ledger.history(**query)
    finally:
        store._run = real
    return captured["sql"], captured["args"]


if __name__ == "__main__":
    sys.exit(main())

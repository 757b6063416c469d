"""Catalog scale benchmark: load time and match latency at N synthetic cards.

    python bench/catalog_scale.py [--cards 10000] [--queries 2000] [--out bench/results]

Synthetic cards are variations of the project's three cards: each gets its own id, an
op-name regex built from a pool of realistic kernel-name fragments (so regexes are
mostly distinct), and a generation / dtype / scale-format mix. Queries are realistic
kernel names, half of which hit some card. Figures go to <out>/catalog_scale.md/.json.
"""
from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FRAGMENTS = ["gemm", "xdl", "blockscale", "a8w8", "bpreshuffle", "cshuffle", "moe", "fused", "attn", "fmha",
             "rmsnorm", "rope", "silu", "mxscale", "mxfp8", "wgmma", "splitk", "streamk", "gemv", "batched",
             "grouped", "paged", "decode", "prefill", "quant", "dequant", "topk", "reduce", "softmax", "layernorm"]
GENS = ["gfx950", "gfx942", "sm_90", "sm_100"]
DTYPES = ["fp8_e4m3", "bf16", "fp16", "mxfp4", "int8"]
SCALES = ["fp32_block", "ue8m0_1x32", "per_row", "per_tensor"]


def synth_card(i: int, rng: random.Random) -> str:
    a, b = rng.sample(FRAGMENTS, 2)
    regex = f"{a}_{b}_v{i % 97}|{b}.*{a}_{i}"
    gen, dtype, scale = rng.choice(GENS), rng.choice(DTYPES), rng.choice(SCALES)
    return f"""---
id: synth_{i:05d}
title: synthetic card {i}
kind: expert_skill
scope: kernel
match:
  operator: [dense_gemm, scaled_quant_gemm]
  gens: [{gen}]
  dtypes: [{dtype}]
  regimes: [prefill, decode]
  profile_signature:
    op_name_regex: "{regex}"
    min_pct_gpu: 0.0
  scale_formats: [{scale}]
expects:
  isolated_speedup_min: 1.05
  parity: required
validation:
  status: validated
  last_verified: '2026-07-{1 + i % 28:02d}'
  gpu: synthetic
role: advisory_prior
shape_classes:
- id: wide
  title: wide
  when:
  - {{metric: N, ge: 16384}}
  recipe: {{core: c, config: {{tile_m: 64, tile_n: 256}}, decisive_lever: l}}
- id: narrow
  title: narrow
  when:
  - {{metric: N, le: 2048}}
  - {{metric: K, ge: 4096}}
  recipe: {{core: c, config: {{BLOCK_M: 128, BLOCK_N: 256}}, decisive_lever: l}}
---
## When to use
synthetic
## Procedure
synthetic
## Do-no-harm notes
synthetic
"""


def queries(n: int, rng: random.Random) -> list[dict]:
    out = []
    for j in range(n):
        a, b = rng.sample(FRAGMENTS, 2)
        name = f"kernel_{a}_{b}_v{rng.randrange(97)}_tile128x128" if j % 2 else f"kernel_{a}_{b}_other_{rng.randrange(10**6)}"
        out.append(dict(op_name=name, gen=rng.choice(GENS), dtype=rng.choice(DTYPES), scale_format=rng.choice(SCALES),
                        regime="prefill", shape={"M": 4096, "N": rng.choice([2048, 7168, 65536]), "K": 7168}))
    return out


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cards", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = ap.parse_args()
    from skill_server.cards.catalog import Catalog
    from skill_server.matching.hotspot import Hotspot
    from skill_server.matching.matcher import match_hotspot

    rng = random.Random(7)
    tmp = Path(tempfile.mkdtemp(prefix="synth-skills-"))
    try:
        for i in range(args.cards):
            d = tmp / f"synth_{i:05d}"
            d.mkdir()
            (d / "SKILL.md").write_text(synth_card(i, rng))
        import os

        os.environ["SKILL_SERVER_CACHE"] = str(tmp / ".cache")
        t0 = time.perf_counter()
        cat = Catalog.load(tmp)  # cold: every card parsed from YAML, cache written
        cold = time.perf_counter() - t0
        loads = []
        for _ in range(3):  # warm: the server's normal start (cards unchanged since last run)
            t0 = time.perf_counter()
            cat = Catalog.load(tmp)
            loads.append(time.perf_counter() - t0)
        assert len(cat.cards) == args.cards and not cat.problems, cat.problems[:3]
        qs = [Hotspot(**q) for q in queries(args.queries, rng)]
        for q in qs[:50]:
            match_hotspot(q, cat.index)  # warm caches
        lat, matched, considered = [], 0, []
        for q in qs:  # first pass: includes compiling each regex the first time it is needed
            t0 = time.perf_counter()
            r = match_hotspot(q, cat.index)
            lat.append((time.perf_counter() - t0) * 1e3)
            matched += bool(r.matches)
            considered.append(r.cards_considered)
        steady = []
        for q in qs:  # second pass: a long-running server's steady state
            t0 = time.perf_counter()
            match_hotspot(q, cat.index)
            steady.append((time.perf_counter() - t0) * 1e3)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res = {
        "command": "python bench/catalog_scale.py " + " ".join(sys.argv[1:]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {__import__('os').cpu_count()} cores, Python {platform.python_version()}",
        "cards": args.cards, "queries": args.queries,
        "cold_load_s": round(cold, 3),
        "load_s_runs": [round(x, 3) for x in loads], "load_s_median": round(statistics.median(loads), 3),
        "match_ms_p50": round(pct(lat, 50), 4), "match_ms_p99": round(pct(lat, 99), 4), "match_ms_max": round(max(lat), 4),
        "steady_ms_p50": round(pct(steady, 50), 4), "steady_ms_p99": round(pct(steady, 99), 4),
        "steady_ms_max": round(max(steady), 4),
        "queries_with_a_match": matched, "cards_considered_mean": round(statistics.mean(considered), 2),
        "goal": "p99 <= 1 ms per hotspot at 10,000 cards; load <= 2 s",
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "catalog_scale.json").write_text(json.dumps(res, indent=2) + "\n")
    md = [f"# Catalog scale ({res['date']})", "", f"Command: `{res['command']}`  ", f"Machine: {res['machine']}", "",
          "| cards | cold load (no cache) | warm load (median of 3) | match p50 / p99 / max, first pass | steady state p50 / p99 / max | queries matched | cards considered / query |",
          "|---|---|---|---|---|---|---|",
          f"| {args.cards} | {res['cold_load_s']} s | {res['load_s_median']} s | {res['match_ms_p50']} / {res['match_ms_p99']} / "
          f"{res['match_ms_max']} ms | {res['steady_ms_p50']} / {res['steady_ms_p99']} / {res['steady_ms_max']} ms | "
          f"{matched}/{args.queries} | {res['cards_considered_mean']} |", "",
          "The first pass compiles each op-name regex the first time a query needs it (lazily, once);",
          "the steady state is a long-running server's.",
          f"Goal: {res['goal']}.", "",
          "Cold load parses every SKILL.md (PyYAML's constructor is pure Python); the parse cache",
          "(`.cache/catalog/`, keyed by path, mtime, size and schema) makes later starts warm.",
          "Timed on the project's 2-core CPU machine, one run."]
    (out / "catalog_scale.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()

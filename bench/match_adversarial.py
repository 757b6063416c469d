"""Matcher cost on adversarial op names: this branch and a baseline revision in the same run.

    python bench/match_adversarial.py [--baseline main] [--seconds 2] [--out bench/results]

Names: a card's key literal repeated to 4 KB (the index used to re-check a pattern at every
occurrence), the same with a segment of 64 such names, random 4 KB text, a name that matches
(4 KB of literal noise ending in the real fragment), and the issue's 292 KB name (refused by
this branch at the 4 KB cap; timed once, with a time limit, on the baseline). Each reader runs
in its own process against its own revision's ``skill_server`` and ``skills`` (``git archive``):
``match_hotspot`` in a loop for ``--seconds``, per-query latency reported. Results:
``<out>/match_adversarial.{json,md}``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from baseline import baseline_tree, short_rev  # noqa: E402


def cases() -> dict[str, dict]:
    rng = random.Random(0)
    literal = "kernel_gemm_xdl_"
    return {
        "repeated key literal, 4 KB": {"op_name": (literal * 256)[:4096]},
        "MoE name + 64 segment names of 4 KB": {"op_name": ("fused_moe_" * 410)[:4096], "regime": "prefill",
                                                "segment_kernels": [("moe_sum_reduce_" * 273)[:4096]] * 64},
        "random text, 4 KB": {"op_name": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_0123456789")
                                                 for _ in range(4096))},
        "literal noise then a real hit, 4 KB": {"op_name": ("a8w8_" * 900)[:4000] + "gemm_a8w8_blockscale"},
        "the issue's 292 KB name": {"op_name": (literal * 18_700)[:292_000], "once": True},
    }


CHILD = r"""
import json, sys, time
root, seconds = sys.argv[1], float(sys.argv[2])
payload = json.loads(sys.stdin.read())
sys.path.insert(0, root)
from pathlib import Path
from skill_server.cards.catalog import Catalog
from skill_server.matching.hotspot import Hotspot
from skill_server.matching.matcher import match_hotspot
index = Catalog.load(Path(root) / "skills", use_cache=False).index
once = payload.pop("once", False)
try:
    h = Hotspot(gen="gfx950", **payload)
except Exception as exc:
    lines = str(exc).splitlines()
    print(json.dumps({"refused": next((l.strip() for l in lines if "at most" in l), lines[0])[:160]})); sys.exit(0)
n, t0 = 0, time.perf_counter()
while True:
    match_hotspot(h, index); n += 1
    if once or time.perf_counter() - t0 >= seconds:
        break
el = time.perf_counter() - t0
print(json.dumps({"queries": n, "ms_per_query": round(1000 * el / n, 3)}))
"""


def measure(root: Path, payload: dict, seconds: float, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(root))
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, str(root), str(seconds)], env=env, input=json.dumps(payload),
                             capture_output=True, text=True, timeout=timeout, cwd=str(root))
    except subprocess.TimeoutExpired:
        return {"timed_out_after_s": timeout}
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1][:200] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])




def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", default="main")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = ap.parse_args()
    base = baseline_tree(args.baseline, "skill_server", "skills")
    rev, base_rev = short_rev(), short_rev(args.baseline)
    load_before = os.getloadavg()
    results = {}
    for name, payload in cases().items():
        results[name] = {"this branch": measure(REPO, dict(payload), args.seconds, args.timeout),
                         f"baseline {args.baseline}": measure(base, dict(payload), args.seconds, args.timeout)}
        print(name, json.dumps(results[name]), flush=True)
    record = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "device": f"{platform.node()} ({os.cpu_count()} CPUs, Python {platform.python_version()})",
              "load_average": {"before": [round(x, 2) for x in load_before],
                               "after": [round(x, 2) for x in os.getloadavg()]},
              "revision": rev, "baseline": f"{args.baseline} ({base_rev})", "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "match_adversarial.json").write_text(json.dumps(record, indent=2) + "\n")

    def cell(r: dict) -> str:
        if "ms_per_query" in r:
            return f"{r['ms_per_query']} ms"
        if "refused" in r:
            return "refused: " + r["refused"][:60]
        return next(f"{k}: {v}" for k, v in r.items())

    lines = [f"# Matcher on adversarial names ({record['date']})", "", f"Command: `{record['command']}`  ",
             f"Device: {record['device']}; load average {record['load_average']['before']} before, "
             f"{record['load_average']['after']} after  ",
             f"This branch {rev} vs {record['baseline']}; one process each, match_hotspot per query.", "",
             f"| name | this branch | baseline {args.baseline} | ratio |", "|---|---|---|---|"]
    for name, r in results.items():
        a, b = r["this branch"], r[f"baseline {args.baseline}"]
        ratio = f"{b['ms_per_query'] / a['ms_per_query']:.1f}x" if "ms_per_query" in a and "ms_per_query" in b else "-"
        lines.append(f"| {name} | {cell(a)} | {cell(b)} | {ratio} |")
    (args.out / "match_adversarial.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

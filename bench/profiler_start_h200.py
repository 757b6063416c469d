"""Where the verifier's profiling stage spends its seconds on a GPU: torch.profiler's start.

    python bench/profiler_start_h200.py [--out bench/results/h200_profiler_start]

The judge profiles each arm after its timing (runtime signature); on the H200 the profiler's
start took 5-6 s of a 15.8 s verdict (bench/results/h200_precision). Each variant runs in a fresh
process (the first start in a process is the one that counts) and reports, in seconds:
``import`` (torch.profiler), ``cuda`` (context and one cuBLAS GEMM), ``prepare`` and ``start``
(the two halves of ``profile.__enter__``: CUPTI set-up, then collection on), ``second`` (a
second profiler session in the same process) and the GEMM's time before and after the profiler
ran (CUPTI left loaded slows later calls: why the verifier profiles last).
Variants: both activities (the verifier's), CUDA only, the profiler started before the CUDA
context exists, and start with CUDA only while another process holds its own CUDA profiler.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

CHILD = r'''
import json, os, sys, time
variant = sys.argv[1]
t0 = time.perf_counter()
import torch
from torch.profiler import ProfilerActivity, profile
t1 = time.perf_counter()
out = {"variant": variant, "import": round(t1 - t0, 3)}
acts = [ProfilerActivity.CUDA] if variant in ("cuda_only",) else [ProfilerActivity.CPU, ProfilerActivity.CUDA]

def gemm_ms(n=50):
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        a @ b
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(); s.record()
    for _ in range(n):
        a @ b
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / n

def session(tag):
    p = profile(activities=acts)
    a = time.perf_counter(); p.prepare_trace(); b = time.perf_counter(); p.start_trace(); c = time.perf_counter()
    x = torch.randn(256, 256, device="cuda"); (x @ x).sum().item()
    p.stop_trace(); d = time.perf_counter()
    out[tag + "_prepare"] = round(b - a, 3); out[tag + "_start"] = round(c - b, 3); out[tag + "_stop"] = round(d - c, 3)

if variant == "before_context":
    session("first")
    t2 = time.perf_counter(); torch.cuda.init(); gemm_ms(5); out["cuda"] = round(time.perf_counter() - t2, 3)
else:
    t2 = time.perf_counter(); torch.cuda.init(); out["gemm_ms_before"] = round(gemm_ms(), 4)
    out["cuda"] = round(time.perf_counter() - t2, 3)
    session("first")
session("second")
out["gemm_ms_after"] = round(gemm_ms(), 4)
print("RESULT " + json.dumps(out), flush=True)
'''


def run(variant: str, env: dict[str, str]) -> dict:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, variant], capture_output=True, text=True, env=env, timeout=300)
    wall = time.perf_counter() - t
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
            res["wall"] = round(wall, 3)
            return res
    return {"variant": variant, "rc": proc.returncode, "stderr": proc.stderr[-2000:], "wall": round(wall, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/results/h200_profiler_start")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    rows = []
    for _ in range(args.repeat):
        for variant in ("both", "cuda_only", "before_context"):
            rows.append(run(variant, env))
            print(json.dumps(rows[-1]), flush=True)
    # two processes starting their profilers at the same moment (the judge starts both arms' at once)
    t = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, "both"], stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    pair = []
    for p in procs:
        stdout, _ = p.communicate(timeout=300)
        pair += [json.loads(l[7:]) for l in stdout.splitlines() if l.startswith("RESULT ")]
    rows.append({"variant": "two_at_once", "wall": round(time.perf_counter() - t, 3), "each": pair})
    print(json.dumps(rows[-1]), flush=True)
    meta = {"command": "python " + " ".join(sys.argv), "time_utc": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    try:
        import torch
        meta["device"] = torch.cuda.get_device_name(0)
        meta["torch"] = torch.__version__
    except Exception as exc:  # noqa: BLE001 - a note in the results, not a failure
        meta["device"] = f"unknown ({exc})"
    (out / "profiler_start.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

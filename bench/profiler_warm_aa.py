"""A/A with and without the profiler's early start, alternating (is the judge's clock biased by it?).

    OUT=bench/results/h200_profiler_start python bench/profiler_warm_aa.py

Six A/A verdicts of the precision bench's GPU problem (cuBLAS block-scale GEMM 4096x2048x7168,
default options), ``profiler_warm_early`` True and False in turn; prints verdict, seconds, the
arm-clock and judge-clock speedups and the late calls; writes ``$OUT/aa_warm_ablation.json``.
"""
import json, os, sys, time
sys.path.insert(0, os.getcwd())
from verifiers.api import verify
from verifiers.options import VerifyOptions
sys.path.insert(0, "bench")
from verifier_precision import figures, GPU
out = []
for i in range(6):
    warm = (i % 2 == 0)
    t0 = time.perf_counter()
    r = verify(GPU["aa_problem"], "arm:" + GPU["aa_arm"], GPU["aa_arm"], [GPU["shape"]], VerifyOptions(**{**GPU["options"], "profiler_warm_early": warm}))
    row = figures(r, time.perf_counter() - t0); row["warm_early"] = warm; out.append(row)
    s = row["shapes"][0]
    print(warm, row["verdict"], row["seconds"], round(s.get("speedup", 0), 4), round(s.get("cross_speedup", 0), 4), s.get("late_calls"), flush=True)
    json.dump(out, open(os.environ["OUT"] + "/aa_warm_ablation.json", "w"), indent=1, default=str)

"""How fast the gfx950 emulator runs on this (2-core, shared) CPU machine.

    python bench/emulator_perf.py [--out bench/results] [--repeat 3] [--skip-tests]

Figures, side by side in one run:
1. the Triton fp8 GEMM 256x256x512 for gfx950 (both MFMA shapes), emulated (target <= 30 s);
2. the block-scale FlyDSL kernel (card config) at its smallest valid shape (64x256x128)
   and at the tests' shape (128x256x256) (target <= 60 s);
3. the emulator's whole test set (``pytest tests/test_emulator_*.py``) with the compile
   caches warm and cold (a fresh ``SKILL_SERVER_CACHE``) (target <= 5 min in CI).
Each emulation figure is the median of ``--repeat`` runs (decode cached after the first);
the machine's load average is recorded beside them (other work shares the two cores).
Writes ``emulator_perf.json`` and ``emulator_perf.md``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _median_runs(fn, repeat: int) -> dict:  # noqa: ANN001
    times, last = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        last = fn()
        times.append(time.perf_counter() - t0)
    return {"median_s": round(statistics.median(times), 3), "runs_s": [round(t, 3) for t in times], "detail": last}


def triton_gemm(case: str, repeat: int) -> dict:
    from verifiers.gfx950.emulator.validation.triton_cases import run_case

    def once():
        r = run_case(case, {"M": 256, "N": 256, "K": 512})
        assert r.ok and not r.report.hazards, r.max_error
        return {"instructions": r.report.instructions, "waves": r.report.waves, "emulator_s": r.report.seconds}

    return _median_runs(once, repeat)


def blockscale(arm: str, repeat: int) -> dict:
    from verifiers.gfx950.emulator.flydsl_arm import emulated_builder
    from verifiers.gfx950.targets import load_targets
    from verifiers.problem import load_problem

    folder = "flydsl_fp8_blockscale_gemm"
    problem = load_problem(folder)
    dims = dict(load_targets(folder).emulated_arm(arm).dims)
    t0 = time.perf_counter()
    build = emulated_builder(folder, arm)  # compile (or the gates' cache)
    compile_s = time.perf_counter() - t0

    def once():
        inputs, outputs = problem.make_inputs(dims, 0, "cpu"), problem.make_outputs(dims, "cpu")
        build(inputs, outputs)()
        rep = build.kernels["gemm"].reports[-1]
        assert not rep.hazards
        return {"instructions": rep.instructions, "waves": rep.waves, "emulator_s": rep.seconds}

    out = _median_runs(once, repeat)
    out.update({"dims": dims, "compile_or_cache_s": round(compile_s, 2)})
    return out


def test_set(cold: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    tmp = None
    if cold:
        tmp = tempfile.TemporaryDirectory(prefix="emu-cold-")
        env["SKILL_SERVER_CACHE"] = tmp.name
        env["TRITON_CACHE_DIR"] = str(Path(tmp.name) / "triton")
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_emulator_*.py"))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if tmp:
        tmp.cleanup()
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-300:]
    return {"seconds": round(seconds, 1), "rc": proc.returncode, "summary": tail}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-tests", action="store_true")
    args = ap.parse_args()
    doc = {
        "command": "python bench/emulator_perf.py " + " ".join(sys.argv[1:]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": f"{platform.machine()} CPU, {os.cpu_count()} cores ({platform.platform()})",
        "load_average_before": os.getloadavg(),
        "triton_fp8_gemm_256x256x512": {c: triton_gemm(c, args.repeat) for c in ("fp8_gemm_16x16x128", "fp8_gemm_32x32x64")},
        "blockscale_flydsl": {a: blockscale(a, args.repeat) for a in ("xcd8_smallest", "xcd8_small")},
    }
    if not args.skip_tests:
        doc["emulator_tests"] = {"warm_cache": test_set(False), "cold_cache": test_set(True)}
    doc["load_average_after"] = os.getloadavg()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "emulator_perf.json").write_text(json.dumps(doc, indent=1))
    rows = ["| case | median s | target s | ratio to target | instructions | waves |", "|---|---|---|---|---|---|"]
    for c, r in doc["triton_fp8_gemm_256x256x512"].items():
        rows.append(f"| Triton {c} 256x256x512 | {r['median_s']} | 30 | {r['median_s'] / 30:.3f} | "
                    f"{r['detail']['instructions']} | {r['detail']['waves']} |")
    for a, r in doc["blockscale_flydsl"].items():
        dm = "x".join(str(r["dims"][k]) for k in ("M", "N", "K"))
        rows.append(f"| block-scale FlyDSL {a} {dm} | {r['median_s']} | 60 | {r['median_s'] / 60:.3f} | "
                    f"{r['detail']['instructions']} | {r['detail']['waves']} |")
    for k, r in doc.get("emulator_tests", {}).items():
        rows.append(f"| emulator test set, {k.replace('_', ' ')} ({r['summary']}) | {r['seconds']} | 300 | "
                    f"{r['seconds'] / 300:.3f} | | |")
    md = "\n".join(rows)
    (out / "emulator_perf.md").write_text(
        f"# gfx950 emulator performance\n\n`{doc['command']}`, {doc['date']}, {doc['device']}, load average "
        f"{doc['load_average_before'][0]:.1f} before / {doc['load_average_after'][0]:.1f} after\n\n{md}\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

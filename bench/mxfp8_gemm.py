"""mxfp8 (1x32 ue8m0) GEMM: every arm this platform can run, parity first, then speed.

    python bench/mxfp8_gemm.py [--out bench/results] [--shapes 1024x5120x2048,...]
                               [--seeds 0,1,2,3] [--rounds 7]
    python bench/mxfp8_gemm.py --smoke        # CPU, TRITON_INTERPRET=1, well under a minute

Arms (``kernels/flydsl_mxfp8_8wave_gemm/problem.py``): ``torch_dequant`` and
``triton_dequant`` everywhere, ``flydsl_4wave`` on ROCm only (gfx950: the H200 has no mx
MMA, so there the FlyDSL arm is reported as not runnable, never as passed), and the
``scales_pinned`` trap, which must FAIL parity.

Per shape: strict parity of every arm against the fp32 dequant oracle on every seed and
every perturbation (zero elements out of rtol=atol=1e-2, cosine and rel-L2 floors), then
timing of the arms that passed (``triton.testing.do_bench``: L2 flushed before each call,
median), then a same-session interleaved A/B of triton_dequant (and flydsl_4wave where it
runs) against torch_dequant: ``--rounds`` ABBA rounds, speedup = median of per-round ratios.

Writes ``mxfp8_gemm.json`` (everything) and ``mxfp8_gemm.md`` under ``--out`` and prints
the summary table last. ``--smoke`` runs the same path on the problem's smoke shapes on CPU
(timings there are host wall times of the interpreter, not worth reading).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROBLEM_NAME = "flydsl_mxfp8_8wave_gemm"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on CPU with TRITON_INTERPRET=1")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="output directory")
    ap.add_argument("--shapes", default=None, help="comma-separated MxNxK (default: the problem's shapes)")
    ap.add_argument("--seeds", default="0,1,2,3", help="parity seeds")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved A/B rounds (default 7)")
    return ap.parse_args(argv)


def _platform() -> str:
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    return "rocm" if torch.version.hip else "cuda"


def _environment(device: Any) -> dict:
    import torch
    import triton

    env = {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
           "when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "device": str(device)}
    try:
        import flydsl

        env["flydsl"] = flydsl.__version__
    except ImportError:
        env["flydsl"] = None
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(gpu=props.name, cus=props.multi_processor_count, cuda=torch.version.cuda, hip=torch.version.hip,
                   arch=getattr(props, "gcnArchName", None))
    return env


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_ms(launch: Any, device: Any) -> float:
    """Median ms per call: do_bench (L2 flush before each call) on GPU, wall clock on CPU."""
    if device.type == "cuda":
        import triton.testing

        return float(triton.testing.do_bench(launch, warmup=25, rep=200, return_mode="median"))
    times = []
    for _ in range(1):  # CPU is the --smoke path: the interpreter is slow and the figure meaningless
        t0 = time.perf_counter()
        launch()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _metrics(problem: Any, out: Any, ref: Any) -> dict:
    from verifiers.judge.metrics import output_metrics

    p = problem.parity
    m = output_metrics(out, ref, rtol=p.rtol, atol=p.atol).model_dump()
    m["ok"] = bool(m["nonfinite"] == 0 and m["mismatches"] <= p.max_mismatch and m["cosine"] >= p.min_cosine
                   and m["rel_l2"] <= p.max_rel_l2)
    return m


def _build(problem: Any, arm: str, inputs: dict, outputs: dict) -> Any:
    return problem.resolve_builder(problem.arm(arm).build)(inputs, outputs)


def parity(problem: Any, arm: str, dims: dict, device: Any, seeds: list[int]) -> list[dict]:
    """One row per (seed, perturbation): the arm's output vs the oracle, outputs NaN-poisoned first."""
    rows = []
    for seed in seeds:
        base = problem.make_inputs(dims, seed, device)
        cases = [("none", base)] + [(name, fn(base)) for name, fn in problem.perturbations.items()]
        for case, inputs in cases:
            ref = problem.oracle(inputs, dims)["c"]
            outputs = problem.make_outputs(dims, device)
            outputs["c"].fill_(float("nan"))
            try:
                _build(problem, arm, inputs, outputs)()
                _sync(device)
                rows.append({"seed": seed, "case": case, **_metrics(problem, outputs["c"], ref)})
            except Exception as e:  # noqa: BLE001 - recorded, never counted as a pass
                rows.append({"seed": seed, "case": case, "ok": False, "error": f"{type(e).__name__}: {e}"[:500],
                             "trace": traceback.format_exc()[-2000:]})
    return rows


def interleaved(problem: Any, dims: dict, device: Any, arm: str, base: str, rounds: int) -> dict:
    """ABBA rounds of ``arm`` vs ``base`` on the same inputs; ratio = base_ms / arm_ms."""
    inputs = problem.make_inputs(dims, 0, device)
    la = _build(problem, arm, inputs, problem.make_outputs(dims, device))
    lb = _build(problem, base, inputs, problem.make_outputs(dims, device))
    ratios, a_ms, b_ms = [], [], []
    for r in range(rounds):
        order = (la, lb) if r % 2 == 0 else (lb, la)
        t = [_time_ms(f, device) for f in order]
        ta, tb = (t[0], t[1]) if r % 2 == 0 else (t[1], t[0])
        a_ms.append(ta)
        b_ms.append(tb)
        ratios.append(tb / ta)
    return {"arm": arm, "base": base, "rounds": rounds, "speedup_median": statistics.median(ratios),
            "speedup_min": min(ratios), "speedup_max": max(ratios), "arm_ms_median": statistics.median(a_ms),
            "base_ms_median": statistics.median(b_ms)}


def bench_shape(problem: Any, dims: dict, device: Any, plat: str, args: argparse.Namespace,
                expected_failures: tuple[str, ...]) -> dict:
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if args.smoke:
        seeds = seeds[:1]
    res: dict = {"dims": dims, "arms": {}}
    for arm in problem.arms:
        spec = problem.arm(arm)
        if plat not in spec.platforms:
            res["arms"][arm] = {"status": "NOT_RUNNABLE", "why": f"platforms {spec.platforms}, this is {plat}"}
            continue
        print(f"[mxfp8] {dims} {arm}: parity", file=sys.stderr, flush=True)
        rows = parity(problem, arm, dims, device, seeds)
        passed = all(r["ok"] for r in rows)
        entry: dict = {"role": spec.role, "parity": rows, "parity_ok": passed,
                       "worst_rel_l2": max((r.get("rel_l2", float("inf")) for r in rows), default=None),
                       "worst_mismatches": max((r.get("mismatches", -1) for r in rows), default=None)}
        trap = arm in expected_failures
        entry["status"] = ("TRAP_CAUGHT" if not passed else "TRAP_MISSED") if trap else ("PASS" if passed else "FAIL")
        if passed and not trap:
            inputs = problem.make_inputs(dims, 0, device)
            launch = _build(problem, arm, inputs, problem.make_outputs(dims, device))
            ms = _time_ms(launch, device)
            entry.update(ms=ms, tflops=problem.flops(dims) / ms / 1e9, gbps=problem.min_bytes(dims) / ms / 1e6)
        res["arms"][arm] = entry
    res["ab"] = []
    for arm in ("triton_dequant", "flydsl_4wave"):
        a = res["arms"].get(arm, {})
        if a.get("status") == "PASS" and res["arms"].get("torch_dequant", {}).get("status") == "PASS":
            print(f"[mxfp8] {dims} interleaved {arm} vs torch_dequant", file=sys.stderr, flush=True)
            res["ab"].append(interleaved(problem, dims, device, arm, "torch_dequant", 1 if args.smoke else args.rounds))
    return res


def markdown(result: dict) -> str:
    lines = ["# mxfp8 GEMM bench", "", f"environment: `{json.dumps(result['environment'])}`", "",
             "| M | N | K | arm | role | status | worst mismatches | worst rel-L2 | ms | TFLOP/s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for s in result["shapes"]:
        d = s["dims"]
        for arm, e in s["arms"].items():
            rl2 = e.get("worst_rel_l2")
            rl2_txt = "" if rl2 is None else f"{rl2:.2e}"
            ms_txt = f"{e['ms']:.4f}" if "ms" in e else ""
            tf_txt = f"{e['tflops']:.1f}" if "tflops" in e else ""
            lines.append(f"| {d['M']} | {d['N']} | {d['K']} | {arm} | {e.get('role', '')} | {e['status']} | "
                         f"{e.get('worst_mismatches', '')} | {rl2_txt} | {ms_txt} | {tf_txt} |")
    lines += ["", "| M | N | K | arm vs base | speedup (median of rounds) | min | max |", "|---|---|---|---|---|---|---|"]
    for s in result["shapes"]:
        d = s["dims"]
        for ab in s["ab"]:
            lines.append(f"| {d['M']} | {d['N']} | {d['K']} | {ab['arm']} vs {ab['base']} | {ab['speedup_median']:.3f} | "
                         f"{ab['speedup_min']:.3f} | {ab['speedup_max']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported anywhere
    sys.path.insert(0, str(REPO))
    import torch

    from verifiers.problem import load_problem

    problem = load_problem(PROBLEM_NAME)
    from skill_kernels.flydsl_mxfp8_8wave_gemm.arms import EXPECTED_PARITY_FAILURES as expected_failures
    plat = "cpu" if args.smoke else _platform()
    if not args.smoke and plat == "cpu":
        print("no GPU found: run with --smoke on CPU", file=sys.stderr)
        return 2
    device = torch.device("cpu" if plat == "cpu" else "cuda")
    if args.shapes:
        shapes = [problem.parse_shape(s) for s in args.shapes.split(",")]
    else:
        # smoke: the smallest shape only (the interpreter is slow); tests cover the others
        shapes = [dict(s) for s in (problem.smoke_shapes[:1] if args.smoke else problem.shapes)]
    result = {"environment": {**_environment(device), "platform": plat, "smoke": args.smoke}, "shapes": []}
    t0 = time.time()
    for dims in shapes:
        result["shapes"].append(bench_shape(problem, dims, device, plat, args, expected_failures))
    result["wall_s"] = round(time.time() - t0, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "mxfp8_gemm_smoke" if args.smoke else "mxfp8_gemm"
    (out / f"{stem}.json").write_text(json.dumps(result, indent=1, default=str))
    md = markdown(result)
    (out / f"{stem}.md").write_text(md)
    print(md)
    bad = [(s["dims"], a) for s in result["shapes"] for a, e in s["arms"].items() if e["status"] in ("FAIL", "TRAP_MISSED")]
    if bad:
        print(f"FAILURES: {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

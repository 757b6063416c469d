"""MoE stage-2 segment on the H200: bf16 partials vs fp8 partials (GEMM + reduce, summed).

    python bench/moe_stage2_h200.py [--out bench/results] [--shapes M=..,N=..,K=..,E=..,top_k=..;...]
                                    [--rounds 7] [--calls 10] [--profile-iters 20]
    python bench/moe_stage2_h200.py --smoke        # CPU, Triton interpreter, well under a minute

Per shape (the card's two prefill shapes by default: M=16384 with top_k=4, hidden 2880,
intermediate 2880, E=128; and top_k=8, hidden 7168, intermediate 2048, E=256):

1. **Calibration**: the partial scale ``s`` from a calibration draw on its own seed
   (largest |partial| -> 224), with the saturated / flushed fractions on the bench inputs.
2. **Parity** (seed 0 inputs): both arms, and the deliberately mismatched candidate
   (reducer scale 2s), against the fp32 oracle: cosine, relative L2, max abs error; the
   problem's relaxed rules applied with ``verifiers.judge.parity.parity_failures``; the scale-tag check
   on each arm's kernel names.
3. **Per-kernel times** from torch.profiler (device time of each kernel, ``--profile-iters``
   iterations, a 512 MiB L2 flush before each): the GEMM and the reduce of both arms, and
   their per-iteration sum (the scored segment).
4. **Segment A/B** with CUDA events: ``--rounds`` rounds in ABBA / BAAB order, each letter
   ``--calls`` flushed calls; speedup = median over rounds of the per-round median ratio.
5. **Reduce bandwidth**: bytes the reduce moves (partial read + bf16 write) over its time,
   against a device-to-device copy measured in the same run (bytes read + written).

6. **The project's verifier** (``verifiers.api.verify``, GPU runs only, ``--no-verifier``
   skips it): the fp8 arm as candidate against the bf16 baseline arm on the same shapes,
   full protocol (parity with secret seed and perturbations, runtime signatures, segment
   score, A/A + interleaved A/B with bootstrap interval); its summary and verdict are
   stored beside the direct figures.

Steps 3-5 time directly with torch.cuda events and torch.profiler (self-contained, so the
figures the card quotes come out even if the verifier stage errors). Writes
``moe_stage2_h200.json`` and ``moe_stage2_h200.md`` under ``--out`` and prints the
summary table last.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROBLEM_NAME = "flydsl_prefill_moe_stage2_fp8partial"
FLUSH_BYTES = 512 << 20
DEFAULT_SHAPES = "M=16384,N=2880,K=2880,E=128,top_k=4;M=16384,N=7168,K=2048,E=256,top_k=8"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on CPU through the Triton interpreter")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="output directory")
    ap.add_argument("--shapes", default=None, help=f"';'-separated name=value shapes (default: {DEFAULT_SHAPES})")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved A/B rounds (default 7)")
    ap.add_argument("--calls", type=int, default=10, help="timed calls per arm per round letter (default 10)")
    ap.add_argument("--profile-iters", type=int, default=20, help="profiled iterations per arm (default 20)")
    ap.add_argument("--seed", type=int, default=0, help="input seed")
    ap.add_argument("--no-verifier", action="store_true", help="skip verifiers.api.verify (always skipped with --smoke)")
    return ap.parse_args(argv)


# --- environment -------------------------------------------------------------------

def _git_rev() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "uncommitted"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _environment(device: Any) -> dict:
    import torch
    import triton

    env = {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
           "git": _git_rev(), "when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "device": str(device)}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(gpu=props.name, sms=props.multi_processor_count, cuda=torch.version.cuda, hip=torch.version.hip)
    return env


class Clock:
    """Events on a GPU, perf_counter on CPU (smoke only: those figures mean nothing)."""

    def __init__(self, device: Any) -> None:
        import torch

        self.gpu = device.type == "cuda"
        self.torch = torch
        self.flush_buf = torch.empty(FLUSH_BYTES // 4 if self.gpu else 1 << 20, dtype=torch.int32, device=device)
        self._v = 0

    def flush(self) -> None:
        self._v = (self._v + 1) & 0x7FFF
        self.flush_buf.fill_(self._v)

    def sync(self) -> None:
        if self.gpu:
            self.torch.cuda.synchronize()

    def time_calls(self, fn, calls: int) -> list[float]:
        """ms per call, each call preceded (untimed) by the L2 flush."""
        out = []
        for _ in range(calls):
            self.flush()
            if self.gpu:
                a = self.torch.cuda.Event(enable_timing=True)
                b = self.torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                out.append(a.elapsed_time(b))
            else:
                t = time.perf_counter()
                fn()
                out.append((time.perf_counter() - t) * 1e3)
        return out


# --- measurements ------------------------------------------------------------------

def kernel_times(launch: Any, clock: Clock, iters: int) -> dict[str, dict]:
    """Per-kernel time (ms per call) from torch.profiler: device time on a GPU, the
    ``record_function`` range (interpreter) on CPU."""
    from torch.profiler import ProfilerActivity, profile

    names = set(launch.kernel_names)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if clock.gpu else [])
    launch()
    clock.sync()
    with profile(activities=acts) as prof:
        for _ in range(iters):
            clock.flush()
            launch()
        clock.sync()
    out: dict[str, dict] = {}
    for ev in prof.key_averages():
        if ev.key not in names:
            continue
        total_us = (getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0.0)) if clock.gpu \
            else ev.cpu_time_total
        if total_us <= 0 or ev.count == 0:
            continue
        out[ev.key] = {"calls": ev.count, "ms_per_call": total_us / 1e3 / ev.count}
    missing = names - set(out)
    if missing:
        raise RuntimeError(f"profiler did not see kernels {sorted(missing)}; saw {sorted({e.key for e in prof.key_averages()})[:20]}")
    return out


def copy_bandwidth(clock: Clock, device: Any, nbytes: int) -> dict:
    import torch

    n = max(1, nbytes // 2)
    src = torch.ones(n, dtype=torch.bfloat16, device=device)
    dst = torch.empty_like(src)
    times = clock.time_calls(lambda: dst.copy_(src), 10)
    best = min(times)
    return {"bytes_moved": 2 * n * 2, "best_ms": best, "median_ms": statistics.median(times),
            "gbps": 2 * n * 2 / (best / 1e3) / 1e9}


def ab_rounds(base: Any, cand: Any, clock: Clock, rounds: int, calls: int) -> dict:
    per_round = []
    for r in range(rounds):
        order = "ABBA" if r % 2 == 0 else "BAAB"
        t: dict[str, list[float]] = {"A": [], "B": []}
        for letter in order:
            t[letter] += clock.time_calls(base if letter == "A" else cand, calls)
        a, b = statistics.median(t["A"]), statistics.median(t["B"])
        per_round.append({"order": order, "baseline_ms": a, "candidate_ms": b, "ratio": a / b})
    ratios = [p["ratio"] for p in per_round]
    return {"rounds": per_round, "speedup_median": statistics.median(ratios), "speedup_min": min(ratios),
            "speedup_max": max(ratios), "baseline_ms_median": statistics.median(p["baseline_ms"] for p in per_round),
            "candidate_ms_median": statistics.median(p["candidate_ms"] for p in per_round)}


def parity_figures(problem: Any, outputs: dict, oracle: Any, baseline_metrics: Any = None) -> dict:
    from verifiers.judge.metrics import output_metrics
    from verifiers.judge.parity import output_eps, parity_failures, rules_from

    rules = rules_from(problem.parity)
    m = output_metrics(outputs["out"], oracle, rules.rtol, rules.atol)
    fig = {"cosine": m.cosine, "rel_l2": m.rel_l2, "max_abs": m.max_abs, "norm_ratio": m.norm_ratio,
           "nonfinite": m.nonfinite}
    if baseline_metrics is not None:
        fig["failures"] = parity_failures(rules, m, baseline_metrics, output_eps(outputs["out"]))
    return fig, m


# --- one shape ---------------------------------------------------------------------

def run_shape(dims: dict, args: argparse.Namespace, device: Any) -> dict:
    import torch

    from verifiers.problem import load_problem

    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import calibration, mismatched_scale, naming, oracle, routing

    problem = load_problem(PROBLEM_NAME)
    clock = Clock(device)
    res: dict[str, Any] = {"dims": dims}
    t0 = time.time()
    inputs = problem.make_inputs(dims, args.seed, device)
    partials = oracle.stage2_partials(inputs)
    ref = oracle.reduce_partials(partials, dims["top_k"])
    res["inputs_s"] = round(time.time() - t0, 2)
    res["routing"] = {"imbalance": routing.load_imbalance(inputs["topk_ids"], dims["E"]),
                      "rows_padded": int(inputs["num_padded"]),
                      **routing.padded_blocks_summary(inputs["block_expert"], dims["E"])}

    cal = calibration.scale_for(dims, device=device)
    on_bench = calibration.fp8_fractions(partials, cal.scale)
    res["calibration"] = {"scale": cal.scale, "scale_hex": cal.scale_hex, "calibration_amax": cal.amax,
                          "calibration_fractions": cal.fractions.model_dump(),
                          "bench_amax": float(partials.abs().max()), "bench_fractions": on_bench.model_dump(),
                          "source": cal.source}
    del partials

    arms = {name: problem.resolve_builder(problem.arm(name).build) for name in ("triton_bf16", "triton_fp8")}
    arms["mismatched_2s"] = mismatched_scale.build
    outs, launches = {}, {}
    for name, build in arms.items():
        outs[name] = problem.make_outputs(dims, device)
        launches[name] = build(inputs, outs[name])
        launches[name]()
    clock.sync()

    base_fig, base_m = parity_figures(problem, outs["triton_bf16"], ref)
    res["parity"] = {"triton_bf16": base_fig}
    for name in ("triton_fp8", "mismatched_2s"):
        fig, _ = parity_figures(problem, outs[name], ref, base_m)
        res["parity"][name] = fig
    for name, launch in launches.items():
        res["parity"][name]["kernels"] = list(launch.kernel_names)
        res["parity"][name]["scale_check"] = naming.check_scale_consistency(launch.kernel_names)
    del ref

    res["kernels"] = {}
    for name in ("triton_bf16", "triton_fp8"):
        kt = kernel_times(launches[name], clock, args.profile_iters)
        gemm, red = launches[name].kernel_names
        res["kernels"][name] = {"gemm": gemm, "gemm_ms": kt[gemm]["ms_per_call"], "reduce": red,
                                "reduce_ms": kt[red]["ms_per_call"],
                                "segment_ms": kt[gemm]["ms_per_call"] + kt[red]["ms_per_call"]}
    kb, kf = res["kernels"]["triton_bf16"], res["kernels"]["triton_fp8"]
    res["kernel_speedups"] = {"gemm": kb["gemm_ms"] / kf["gemm_ms"], "reduce": kb["reduce_ms"] / kf["reduce_ms"],
                              "segment": kb["segment_ms"] / kf["segment_ms"]}

    res["ab"] = ab_rounds(launches["triton_bf16"], launches["triton_fp8"], clock, args.rounds, args.calls)

    ceiling = copy_bandwidth(clock, device, oracle.reduce_bytes(dims, fp8=False))
    res["copy_ceiling"] = ceiling
    res["reduce_bandwidth"] = {}
    for name, fp8 in (("triton_bf16", False), ("triton_fp8", True)):
        nbytes = oracle.reduce_bytes(dims, fp8)
        gbps = nbytes / (res["kernels"][name]["reduce_ms"] / 1e3) / 1e9
        res["reduce_bandwidth"][name] = {"bytes": nbytes, "gbps": gbps, "fraction_of_copy": gbps / ceiling["gbps"]}
    del launches, outs, inputs
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return res


def run_verifier(shapes: list[dict]) -> dict:
    """``verifiers.api.verify`` with the fp8 arm as candidate, on every bench shape."""
    from verifiers.api import VerifyOptions, verify

    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.oracle import DIM_NAMES

    texts = ["x".join(str(d[n]) for n in DIM_NAMES) for d in shapes]
    t = time.time()
    report = verify(PROBLEM_NAME, "arm:triton_fp8", baseline="triton_bf16", shapes=texts, options=VerifyOptions())
    return {"summary": report.summary(), "verdict": str(report.verdict), "complete": report.complete,
            "seconds": round(time.time() - t, 1), "report": json.loads(report.model_dump_json())}


# --- report ------------------------------------------------------------------------

def _shape_label(d: dict) -> str:
    return f"M={d['M']} N={d['N']} K={d['K']} E={d['E']} top_k={d['top_k']}"


def markdown(report: dict) -> str:
    lines = [f"# MoE stage-2 segment, bf16 vs fp8 partials ({report['environment'].get('gpu', report['environment']['device'])})",
             "", f"torch {report['environment']['torch']}, triton {report['environment']['triton']}, "
             f"git {report['environment']['git']}, {report['environment']['when']}."
             + (" **Smoke run on CPU (interpreter): timings are meaningless.**" if report["smoke"] else ""), ""]
    for r in report["shapes"]:
        lines += [f"## {_shape_label(r['dims'])}", ""]
        if "error" in r:
            lines += [f"ERROR: {r['error']}", ""]
            continue
        c, rt = r["calibration"], r["routing"]
        lines += [f"Routing: busiest expert {rt['imbalance']:.2f}x the mean load; {rt['blocks']} blocks of 64 rows "
                  f"(max {rt['max_blocks']} on one expert, {rt['idle_experts']} idle experts).", "",
                  f"Scale s = {c['scale']:.6g} (`{c['scale_hex']}`); on the bench inputs: amax*s = "
                  f"{c['bench_amax'] * c['scale']:.1f}, saturated {c['bench_fractions']['saturated']:.2e}, "
                  f"flushed {c['bench_fractions']['flushed']:.2e}, subnormal {c['bench_fractions']['subnormal']:.2e}.", "",
                  "| arm | GEMM kernel | GEMM ms | reduce kernel | reduce ms | segment ms |", "|---|---|---|---|---|---|"]
        for name, k in r["kernels"].items():
            lines.append(f"| {name} | `{k['gemm']}` | {k['gemm_ms']:.4f} | `{k['reduce']}` | {k['reduce_ms']:.4f} | "
                         f"{k['segment_ms']:.4f} |")
        s = r["kernel_speedups"]
        lines += ["", f"Speedups (profiler): GEMM {s['gemm']:.3f}x, reduce {s['reduce']:.3f}x, **segment {s['segment']:.3f}x**; "
                  f"events A/B over {len(r['ab']['rounds'])} rounds: {r['ab']['speedup_median']:.3f}x "
                  f"(range {r['ab']['speedup_min']:.3f}-{r['ab']['speedup_max']:.3f}).", "",
                  "| arm | cosine | rel L2 | max abs | parity failures | scale-tag check |", "|---|---|---|---|---|---|"]
        for name, p in r["parity"].items():
            fails = "; ".join(p.get("failures", [])) or ("-" if "failures" in p else "(baseline)")
            tags = "; ".join(p["scale_check"]) or "ok"
            lines.append(f"| {name} | {p['cosine']:.6f} | {p['rel_l2']:.4e} | {p['max_abs']:.4g} | {fails} | {tags} |")
        cb = r["copy_ceiling"]
        lines += ["", f"Copy ceiling: {cb['gbps']:.0f} GB/s (d2d copy, {cb['bytes_moved'] / 1e9:.2f} GB moved)."]
        for name, b in r["reduce_bandwidth"].items():
            lines.append(f"- reduce {name}: {b['bytes'] / 1e9:.3f} GB in {r['kernels'][name]['reduce_ms']:.4f} ms = "
                         f"{b['gbps']:.0f} GB/s ({b['fraction_of_copy']:.1%} of the copy)")
        lines.append("")
    v = report.get("verifier")
    if v:
        lines += ["## verifiers.api.verify (arm:triton_fp8 vs triton_bf16)", ""]
        lines += (["```", v["summary"], "```"] if "summary" in v else [f"ERROR: {v.get('error')}"])
        lines.append("")
    return "\n".join(lines)


def summary_table(report: dict) -> str:
    head = (f"{'shape':<42} {'gemm bf16':>9} {'gemm fp8':>9} {'red bf16':>9} {'red fp8':>9} {'seg x':>6} "
            f"{'A/B x':>6} {'red GB/s':>9} {'copy GB/s':>9} {'cos fp8':>9} {'parity':>6}")
    rows = [head, "-" * len(head)]
    for r in report["shapes"]:
        if "error" in r:
            rows.append(f"{_shape_label(r['dims']):<42} ERROR {r['error'][:80]}")
            continue
        kb, kf = r["kernels"]["triton_bf16"], r["kernels"]["triton_fp8"]
        ok = "PASS" if not r["parity"]["triton_fp8"]["failures"] and not r["parity"]["triton_fp8"]["scale_check"] else "FAIL"
        rows.append(f"{_shape_label(r['dims']):<42} {kb['gemm_ms']:9.4f} {kf['gemm_ms']:9.4f} {kb['reduce_ms']:9.4f} "
                    f"{kf['reduce_ms']:9.4f} {r['kernel_speedups']['segment']:6.3f} {r['ab']['speedup_median']:6.3f} "
                    f"{r['reduce_bandwidth']['triton_fp8']['gbps']:9.0f} {r['copy_ceiling']['gbps']:9.0f} "
                    f"{r['parity']['triton_fp8']['cosine']:9.6f} {ok:>6}")
    return "\n".join(rows)


def parse_shapes(text: str) -> list[dict]:
    from verifiers.problem import parse_shape

    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.oracle import DIM_NAMES, check_dims

    return [check_dims(parse_shape(s, DIM_NAMES)) for s in text.split(";") if s.strip()]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from verifiers.problem import load_problem

    if args.smoke:
        device = torch.device("cpu")
        shapes = [dict(load_problem(PROBLEM_NAME).smoke_shapes[0])]
        args.rounds, args.calls, args.profile_iters = 1, 1, 1
    else:
        if not torch.cuda.is_available():
            print("no CUDA device: run with --smoke on CPU, or on the H200", file=sys.stderr)
            return 2
        device = torch.device("cuda")
        shapes = parse_shapes(args.shapes or DEFAULT_SHAPES)
    if args.shapes and args.smoke:
        shapes = parse_shapes(args.shapes)
    report = {"smoke": args.smoke, "environment": _environment(device), "args": vars(args), "shapes": []}
    for dims in shapes:
        t = time.time()
        try:
            r = run_shape(dims, args, device)
        except Exception as exc:  # keep going: one shape's failure must not hide the others
            import traceback

            r = {"dims": dims, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        r["wall_s"] = round(time.time() - t, 1)
        report["shapes"].append(r)
    if not args.smoke and not args.no_verifier:
        if device.type == "cuda":
            torch.cuda.empty_cache()
        try:
            report["verifier"] = run_verifier(shapes)
        except Exception as exc:
            import traceback

            report["verifier"] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "moe_stage2_smoke" if args.smoke else "moe_stage2_h200"
    (out / f"{stem}.json").write_text(json.dumps(report, indent=1, default=str))
    (out / f"{stem}.md").write_text(markdown(report))
    print(f"wrote {out / (stem + '.json')} and {out / (stem + '.md')}")
    if "verifier" in report:
        print(report["verifier"].get("summary") or f"verifier ERROR: {report['verifier'].get('error')}")
    print(summary_table(report))
    return 1 if any("error" in r for r in report["shapes"]) else 0


if __name__ == "__main__":
    sys.exit(main())

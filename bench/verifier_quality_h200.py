"""How good is the verifier's timing on the H200? A/A interval width, false positives, cost.

    python bench/verifier_quality_h200.py [--out bench/results] [--repeats 20] [--rounds 12]
    python bench/verifier_quality_h200.py --smoke      # CPU, the tests' fixture problem, < 1 min

Runs ``verifiers.api.verify`` ``--repeats`` times with the candidate *being* the baseline
arm (an A/A verification: ``arm:cublas_blockscale`` against ``cublas_blockscale``) on the
4096x2048x7168 fp8 block-scale GEMM, each in its own worker process, and reports:

- the A/B interval half-width ``(ci_high - ci_low) / 2`` per run (goal <= 1 %);
- false positives: runs whose verdict is FASTER or SLOWER (goal: none in 20);
- device seconds per verdict: the wall time of each verify call, worker start-up, CUDA
  init, parity, profiling and timing included (goal <= 60 s).

The problem is the card's ``flydsl_fp8_blockscale_gemm`` (its cuBLAS arm) when it imports,
else ``bench/problems/blockscale_cublas_aa.py`` (the same F.scaled_mm call). Writes
``verifier_quality_h200.json`` (every run's summary and the first full report) and
``verifier_quality_h200.md`` under ``--out`` and prints the table last.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CARD_PROBLEM = "flydsl_fp8_blockscale_gemm"
CARD_ARM = "cublas_blockscale"
FALLBACK_PROBLEM = str(REPO / "bench" / "problems" / "blockscale_cublas_aa.py")
SMOKE_PROBLEM = str(REPO / "tests" / "fixtures" / "cpu_matmul_problem.py")
GOALS = {"half_width": 0.01, "false_positives": 0, "seconds_per_verdict": 60.0}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="CPU fixture problem, 2 repeats, tiny sizes")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    ap.add_argument("--repeats", type=int, default=None, help="A/A verifications (default 20; smoke 2)")
    ap.add_argument("--shape", default=None, help="MxNxK (default 4096x2048x7168; smoke 128x128x128)")
    ap.add_argument("--problem", default=None, help="problem name or file (default: the card's, else the fallback)")
    ap.add_argument("--arm", default=None, help="the arm verified against itself")
    ap.add_argument("--rounds", type=int, default=None, help="A/B rounds (default: VerifyOptions' 12; smoke 5)")
    ap.add_argument("--block-ms", type=float, default=None, help="block duration (default: VerifyOptions' 20 ms)")
    ap.add_argument("--device", default=None, help="auto | cuda | cuda:N (smoke: cpu)")
    return ap.parse_args(argv)


def pick_problem(args: argparse.Namespace) -> tuple[str, str]:
    """(problem, arm): the card's cuBLAS arm when its problem imports, else the fallback."""
    if args.smoke:
        return args.problem or SMOKE_PROBLEM, args.arm or "torch_mm"
    if args.problem:
        return args.problem, args.arm or CARD_ARM
    from verifiers.problem import load_problem

    try:
        problem = load_problem(CARD_PROBLEM)
        problem.arm(args.arm or CARD_ARM)
        return CARD_PROBLEM, args.arm or CARD_ARM
    except Exception as exc:  # the card's problem is not importable here: use the fallback
        print(f"note: {CARD_PROBLEM} unavailable ({type(exc).__name__}: {exc}); using {FALLBACK_PROBLEM}", file=sys.stderr)
        return FALLBACK_PROBLEM, args.arm or CARD_ARM


def make_options(args: argparse.Namespace) -> Any:
    from verifiers.options import VerifyOptions

    opts: dict[str, Any] = {"hidden_shapes": False, "time_limit_s": 300.0}
    if args.smoke:
        opts.update(device=args.device or "cpu", rounds=args.rounds or 5, flush_bytes=1 << 20,
                    block_ms=args.block_ms or 5.0, seeds=[0], profile=True)
    else:
        opts.update(device=args.device or "cuda")
        if args.rounds:
            opts["rounds"] = args.rounds
        if args.block_ms:
            opts["block_ms"] = args.block_ms
    return VerifyOptions(**opts)


def run_once(problem: str, arm: str, shape: str, options: Any) -> tuple[dict[str, Any], Any]:
    from verifiers.api import verify

    t0 = time.perf_counter()
    report = verify(problem, f"arm:{arm}", baseline=arm, shapes=[shape], options=options)
    seconds = time.perf_counter() - t0
    shape_report = report.shape_reports[0]
    timing = shape_report.timing
    row: dict[str, Any] = {
        "verdict": report.verdict,
        "complete": report.complete,
        "seconds": seconds,
        "worker_seconds": shape_report.seconds,
        "stage_seconds": {k: round(v.seconds, 3) for k, v in shape_report.stages.items()},
        "stages": {k: v.status for k, v in shape_report.stages.items()},
    }
    if timing and timing.ab and timing.ab.speedup is not None:
        row.update(
            speedup=timing.ab.speedup, ci_low=timing.ab.ci_low, ci_high=timing.ab.ci_high,
            half_width=(timing.ab.ci_high - timing.ab.ci_low) / 2,
            aa_spread=timing.aa_spread, noise_floor=timing.noise_floor,
            median_ms=timing.ab.median_a_ms, calls_per_block=timing.ab.calls_per_block,
            rounds=len(timing.ab.rounds),
        )
    row["reason"] = "; ".join(f"{k}: {v.reason}" for k, v in shape_report.stages.items() if v.status != "PASS")[:1000]
    return row, report


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    timed = [r for r in rows if "half_width" in r]
    hw = [r["half_width"] for r in timed]
    false_pos = [r for r in rows if r["verdict"] in ("FASTER", "SLOWER")]
    secs = [r["seconds"] for r in rows]
    summary = {
        "runs": len(rows),
        "timed_runs": len(timed),
        "verdicts": {v: sum(r["verdict"] == v for r in rows) for v in sorted({r["verdict"] for r in rows})},
        "half_width_median": statistics.median(hw) if hw else None,
        "half_width_max": max(hw) if hw else None,
        "false_positives": len(false_pos),
        "seconds_per_verdict_mean": statistics.mean(secs) if secs else None,
        "seconds_per_verdict_max": max(secs) if secs else None,
        "speedup_median": statistics.median([r["speedup"] for r in timed]) if timed else None,
    }
    summary["goals_met"] = {
        "half_width <= 1%": summary["half_width_max"] is not None and summary["half_width_max"] <= GOALS["half_width"],
        "no false FASTER/SLOWER": summary["false_positives"] == 0 and len(timed) == len(rows),
        "<= 60 s per verdict": summary["seconds_per_verdict_max"] is not None
        and summary["seconds_per_verdict_max"] <= GOALS["seconds_per_verdict"],
    }
    return summary


def markdown(meta: dict[str, Any], rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    lines = [
        f"# Verifier quality: A/A on {meta['problem']} ({meta['arm']}) at {meta['shape']}",
        "",
        f"{meta['time_utc']} on {meta['device']} ({meta['platform']}), torch {meta['torch']}, "
        f"{summary['runs']} runs{' (smoke)' if meta['smoke'] else ''}.",
        "",
        "| run | verdict | speedup | 95 % interval | half-width | A/A spread | floor | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows):
        if "half_width" in r:
            lines.append(
                f"| {i} | {r['verdict']} | {r['speedup']:.4f} | [{r['ci_low']:.4f}, {r['ci_high']:.4f}] | "
                f"{r['half_width']:.2%} | {r['aa_spread']:.2%} | {r['noise_floor']:.2%} | {r['seconds']:.1f} |"
            )
        else:
            lines.append(f"| {i} | {r['verdict']} | - | - | - | - | - | {r['seconds']:.1f} |")
    lines += ["", "| measure | value | goal | met |", "|---|---|---|---|"]
    lines += _summary_rows(summary)
    return "\n".join(lines) + "\n"


def _summary_rows(summary: dict[str, Any]) -> list[str]:
    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v:.2%}"

    met = summary["goals_met"]
    spv = summary["seconds_per_verdict_max"]
    return [
        f"| A/A half-width (median / max) | {pct(summary['half_width_median'])} / {pct(summary['half_width_max'])} | <= 1 % | {met['half_width <= 1%']} |",
        f"| false FASTER/SLOWER | {summary['false_positives']} of {summary['runs']} | 0 | {met['no false FASTER/SLOWER']} |",
        f"| seconds per verdict (mean / max) | {summary['seconds_per_verdict_mean']:.1f} / {spv:.1f} | <= 60 | {met['<= 60 s per verdict']} |",
        f"| verdicts | {summary['verdicts']} | all NO_DIFFERENCE | |",
    ]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    problem, arm = pick_problem(args)
    shape = args.shape or ("128x128x128" if args.smoke else "4096x2048x7168")
    repeats = args.repeats or (2 if args.smoke else 20)
    options = make_options(args)
    rows: list[dict[str, Any]] = []
    first_report = None
    for i in range(repeats):
        row, report = run_once(problem, arm, shape, options)
        rows.append(row)
        first_report = first_report or report
        hw = f"{row['half_width']:.2%}" if "half_width" in row else "-"
        print(f"[{i + 1}/{repeats}] {row['verdict']} half-width {hw} in {row['seconds']:.1f} s", file=sys.stderr)
    prov = first_report.provenance if first_report else None
    meta = {
        "problem": problem if not problem.endswith(".py") else Path(problem).name,
        "arm": arm, "shape": shape, "smoke": args.smoke,
        "time_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": prov.device_name if prov else "?", "platform": prov.platform if prov else "?",
        "torch": prov.torch_version if prov else "?", "options": options.model_dump(),
    }
    summary = summarize(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "verifier_quality_smoke" if args.smoke else "verifier_quality_h200"
    (out / f"{stem}.json").write_text(json.dumps(
        {"meta": meta, "summary": summary, "runs": rows,
         "first_report": json.loads(first_report.model_dump_json()) if first_report else None},
        indent=1, default=str))
    (out / f"{stem}.md").write_text(markdown(meta, rows, summary))
    print(f"wrote {out / (stem + '.json')} and {out / (stem + '.md')}")
    print("\n| measure | value | goal | met |\n|---|---|---|---|")
    print("\n".join(_summary_rows(summary)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

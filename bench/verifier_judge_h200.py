"""The judge design on the H200, side by side with today's (git 357582d) in one run.

    python bench/verifier_judge_h200.py --plan aa --old OLD_ROOT --out DIR [--repeats 20]
    python bench/verifier_judge_h200.py --plan cards --old OLD_ROOT --out DIR
    python bench/verifier_judge_h200.py --plan smoke --old OLD_ROOT --out DIR   # CPU, the fixture problem

``OLD_ROOT`` is a checkout of today's verifier (``git archive 357582d``). Each design runs in
its own worker process (``--worker``) with its own tree first on ``sys.path``, so both use
the same interpreter, torch and GPU in the same call. Plans:

- ``aa``: repeated A/A verifications (the cuBLAS block-scale arm against itself, the
  fallback problem ``bench/problems/blockscale_cublas_aa.py``, 4096x2048x7168, default
  options), designs interleaved in batches: verdicts, 95 % half-widths, seconds per verdict;
- ``cards``: the card's honest Triton twin (``arm:triton_twin``) against cuBLAS on the
  card's four shapes, both designs; then the GPU attack candidates
  (``tests/fixtures/gpu_candidates``) and an A/A run with a foreign process loading the GPU.

Writes ``verifier_judge_h200_<plan>.json`` / ``.md`` under ``--out`` and prints the tables.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
AA_PROBLEM = "bench/problems/blockscale_cublas_aa.py"
AA_SHAPE = "4096x2048x7168"
CARD = "flydsl_fp8_blockscale_gemm"
CARD_SHAPES = ["4096x65536x1536", "4096x2048x7168", "16384x1536x7168", "16384x7168x768"]
ATTACKS = ["memo_fingerprint", "memo_version", "side_stream", "cuda_graph", "helper_context", "leftover_spin"]
SPINNER = r"""
import time, torch
x = torch.empty(1, device="cuda")
print("spinner ready", flush=True)
while True:
    torch.cuda._sleep(1_000_000)
    torch.cuda.synchronize()
"""


# ------------------------------------------------------------------ the worker (one design)
def _row(report: Any, seconds: float) -> dict[str, Any]:
    rows = []
    for s in report.shape_reports:
        t = s.timing
        ab = t.ab if t else None
        row: dict[str, Any] = {"shape": s.shape, "verdict": s.verdict,
                               "stages": {k: v.status for k, v in s.stages.items()},
                               "stage_seconds": {k: round(v.seconds, 2) for k, v in s.stages.items()},
                               "reasons": {k: v.reason[:600] for k, v in s.stages.items() if v.status not in ("PASS",)}}
        if s.verdict in ("FAIL", "ERROR", "INCONCLUSIVE"):
            row["log_tail"] = (s.log_tail or "")[-1500:]
            row["integrity_changes"] = list(getattr(s, "integrity_changes", []))[:6]
        if ab is not None and ab.speedup is not None:
            row.update(speedup=ab.speedup, ci_low=ab.ci_low, ci_high=ab.ci_high,
                       half_width=(ab.ci_high - ab.ci_low) / 2, median_a_ms=ab.median_a_ms, median_b_ms=ab.median_b_ms,
                       calls_per_block=ab.calls_per_block, noise_floor=t.noise_floor)
            for key in ("timer_floor_ms", "cross_timer_floor_ms", "baseline_drift", "primary_verdict", "cross_verdict",
                        "neighbour_watch", "neighbours", "checked_calls", "protocol", "failures", "notes", "aa_prep_gap_ms"):
                if hasattr(t, key):
                    row[key] = getattr(t, key)
            cross = getattr(t, "ab_cross", None)
            if cross is not None and cross.speedup is not None:
                row.update(cross_speedup=cross.speedup, cross_ci=[cross.ci_low, cross.ci_high])
            checks = getattr(t, "clock_checks", None)
            if checks:
                row["clock_gaps_ms"] = {c.arm: round(c.gap_ms, 5) for c in checks}
                row["prep_ms"] = {c.arm: round(c.prep_ms, 4) for c in checks if getattr(c, "prep_ms", None) is not None}
            warm = getattr(t, "warmup", None)
            if warm:  # what one call costs inside a block (preparation, call, sampled read)
                row["block_wall_per_call_ms"] = {w.arm: round(w.wall_per_call_ms, 4) for w in warm}
                row["warmup_batches"] = {w.arm: getattr(w, "batches", None) for w in warm}
            row["solo_baseline_ms"] = getattr(t, "solo_baseline_ms", None)
            row["aa_half_width"] = ((t.aa.ci_high - t.aa.ci_low) / 2) if getattr(t, "aa", None) and t.aa.ci_low else None
        rows.append(row)
    return {"verdict": report.verdict, "seconds": seconds, "shapes": rows,
            "stage_seconds": {k: round(v.seconds, 2) for k, v in report.stages.items()}}


def _brief(row: dict[str, Any]) -> str:
    """The figures of one job on one line (the log keeps them if the result files do not come back)."""
    try:
        return _figures(row)
    except Exception as exc:  # a summary line never costs the results
        return f"(no summary: {exc})"


def _figures(row: dict[str, Any]) -> str:
    parts = []
    for s in row.get("shapes", []):
        if "speedup" in s:
            parts.append(f"{s['shape']} {s['verdict']} sp {s['speedup']:.4f} [{s['ci_low']:.4f},{s['ci_high']:.4f}] "
                         f"hw {s['half_width']:.4f} aa_hw {s.get('aa_half_width') or 0:.4f} k {s.get('calls_per_block')} "
                         f"drift {s.get('baseline_drift') or 0:+.3f} cross {s.get('cross_speedup', 0):.4f} "
                         f"stages {s.get('stage_seconds')} wall/call {s.get('block_wall_per_call_ms')}")
        else:
            parts.append(f"{s.get('shape')} {s.get('verdict')} {str(s.get('reasons', ''))[:300]}")
    return " | ".join(parts)


def worker(args: argparse.Namespace) -> int:
    from verifiers.api import verify
    from verifiers.options import VerifyOptions

    jobs = json.loads(Path(args.jobs).read_text())
    out = []
    for job in jobs:
        opts = VerifyOptions(**job.get("options", {}))
        spinner = None
        if job.get("neighbour"):
            spinner = subprocess.Popen([sys.executable, "-c", SPINNER], stdout=subprocess.PIPE, text=True,
                                       start_new_session=True)
            spinner.stdout.readline()
        t0 = time.perf_counter()
        try:
            report = verify(job["problem"], job["candidate"], job.get("baseline"), job["shapes"], opts)
            row = _row(report, time.perf_counter() - t0)
        except Exception as exc:  # report the failure of the design, keep going
            row = {"verdict": "BENCH_ERROR", "error": f"{type(exc).__name__}: {exc}", "seconds": time.perf_counter() - t0}
        finally:
            if spinner is not None:
                spinner.kill()
                spinner.wait()
        row.update(name=job["name"], design=args.design)
        out.append(row)
        print(f"[{args.design}] {job['name']}: {row['verdict']} in {row['seconds']:.1f} s {_brief(row)}", file=sys.stderr,
              flush=True)
        Path(args.result).write_text(json.dumps(out, default=str))
    return 0


# ------------------------------------------------------------------ the driver
DEADLINE = [float("inf")]


def run_design(design: str, root: Path, jobs: list[dict[str, Any]], out: Path, tag: str) -> list[dict[str, Any]]:
    import tempfile

    if time.monotonic() > DEADLINE[0]:
        print(f"[{design}] {tag}: skipped, the time budget is spent", file=sys.stderr)
        return []
    scratch = Path(tempfile.mkdtemp(prefix="bench-"))
    jobs_file, result = scratch / f"jobs_{design}_{tag}.json", scratch / f"rows_{design}_{tag}.json"
    jobs_file.write_text(json.dumps(jobs))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    left = max(DEADLINE[0] - time.monotonic(), 30.0)
    try:
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", "--design", design, "--jobs",
                        str(jobs_file), "--result", str(result)], cwd=root, env=env, check=False,
                       timeout=None if left == float("inf") else left)
    except subprocess.TimeoutExpired:
        print(f"[{design}] {tag}: stopped at the time budget", file=sys.stderr)
    return json.loads(result.read_text()) if result.exists() else []


def run_steps(steps: list[tuple[str, str, list[dict[str, Any]]]], old: Path, out: Path, tag: str,
              rows: dict[str, list], cards: dict[str, list], results: dict[str, Any]) -> None:
    """Run (design, "aa" | "cards", jobs) steps in order, today's design from ``old``, every
    other from this tree; the summary so far goes to partial.json after each step."""
    for i, (design, kind, jobs_) in enumerate(steps):
        if not jobs_:
            continue
        got = run_design(design, old if design == "old" else HERE, jobs_, out, f"{tag}_{i}")
        (rows if kind == "aa" else cards)[design] += got
        results["aa"] = {d: summarize_aa(r) for d, r in rows.items()}
        results["cards"] = cards
        (out / "partial.json").write_text(json.dumps({"summary": results["aa"], "raw": {"aa": rows, "cards": cards}},
                                                     default=str))


def aa_jobs(n: int, smoke: bool) -> list[dict[str, Any]]:
    if smoke:
        return [{"name": f"aa{i}", "problem": "tests/fixtures/cpu_matmul_problem.py", "candidate": "arm:torch_mm",
                 "baseline": "torch_mm", "shapes": ["128x128x128"],
                 "options": {"device": "cpu", "rounds": 5, "flush_bytes": 1 << 20, "hidden_shapes": False}} for i in range(n)]
    return [{"name": f"aa{i}", "problem": AA_PROBLEM, "candidate": "arm:cublas_blockscale", "baseline": "cublas_blockscale",
             "shapes": [AA_SHAPE], "options": {"device": "cuda", "hidden_shapes": False, "time_limit_s": 300}}
            for i in range(n)]


def per_call(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same jobs on the per-call GPU protocol (a host round trip around every call)."""
    return [{**j, "name": "per_call_" + j["name"], "options": {**j["options"], "gpu_protocol": "per_call"}} for j in jobs]


def chained(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same jobs on the chained GPU protocol (calls ordered on the device by interprocess events)."""
    return [{**j, "options": {**j["options"], "gpu_protocol": "chained"}} for j in jobs]


def card_jobs(design: str, smoke: bool) -> list[dict[str, Any]]:
    if smoke:
        return [{"name": "twin", "problem": "tests/fixtures/cpu_matmul_problem.py", "candidate": "arm:bmm",
                 "baseline": "torch_mm", "shapes": ["128x128x128"],
                 "options": {"device": "cpu", "rounds": 5, "flush_bytes": 1 << 20, "hidden_shapes": False}}]
    base = {"device": "cuda", "hidden_shapes": False, "time_limit_s": 400}
    jobs = [{"name": "twin_vs_cublas", "problem": CARD, "candidate": "arm:triton_twin", "baseline": "cublas_blockscale",
             "shapes": CARD_SHAPES, "options": base}]
    attacks = ATTACKS if design == "new" else ["memo_fingerprint", "helper_context"]
    for name in attacks:
        jobs.append({"name": f"attack:{name}", "problem": CARD, "candidate": f"{HERE}/tests/fixtures/gpu_candidates/{name}.py:build",
                     "baseline": "cublas_blockscale", "shapes": [AA_SHAPE], "options": base})
    jobs.append({"name": "aa_with_neighbour", "problem": AA_PROBLEM, "candidate": "arm:cublas_blockscale",
                 "baseline": "cublas_blockscale", "shapes": [AA_SHAPE], "neighbour": True,
                 "options": {"device": "cuda", "hidden_shapes": False, "time_limit_s": 300}})
    return jobs


def summarize_aa(rows: list[dict[str, Any]]) -> dict[str, Any]:
    timed = [s for r in rows for s in r.get("shapes", []) if "half_width" in s]
    hw = [s["half_width"] for s in timed]
    secs = [r["seconds"] for r in rows]
    return {
        "runs": len(rows), "verdicts": {v: sum(r["verdict"] == v for r in rows) for v in sorted({r["verdict"] for r in rows})},
        "false_verdicts": sum(r["verdict"] in ("FASTER", "SLOWER") for r in rows),
        "half_width_median": statistics.median(hw) if hw else None, "half_width_max": max(hw) if hw else None,
        "seconds_median": statistics.median(secs) if secs else None, "seconds_max": max(secs) if secs else None,
        "seconds_after_first_median": statistics.median(secs[1:]) if len(secs) > 1 else None,
        "speedup_median": statistics.median([s["speedup"] for s in timed]) if timed else None,
        "timer_floor_ms": statistics.median([s["timer_floor_ms"] for s in timed if s.get("timer_floor_ms")]) if any(
            s.get("timer_floor_ms") for s in timed) else None,
    }


def markdown(meta: dict[str, Any], results: dict[str, Any]) -> str:
    lines = [f"# Verifier judge design on {meta['device']} ({meta['plan']}), {meta['time_utc']}", "",
             f"Command: `{meta['command']}`", "", f"torch {meta['torch']}, old design: git 357582d (today's main)", ""]
    if "aa" in results:
        lines += ["## Repeated A/A (cuBLAS block-scale, 4096x2048x7168, default options)", "",
                  "| design | runs | verdicts | false FASTER/SLOWER | half-width median | max | s/verdict median | max | after 1st |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for design, s in results["aa"].items():
            def pct(v):
                return "-" if v is None else f"{v:.2%}"

            def sec(v):
                return "-" if v is None else f"{v:.1f}"

            lines.append(f"| {design} | {s['runs']} | {s['verdicts']} | {s['false_verdicts']} | {pct(s['half_width_median'])} | "
                         f"{pct(s['half_width_max'])} | {sec(s['seconds_median'])} | {sec(s['seconds_max'])} | "
                         f"{sec(s['seconds_after_first_median'])} |")
        lines.append("")
    if "cards" in results:
        lines += ["## Twin vs cuBLAS, attacks, a foreign GPU process", "",
                  "| design | job | shape | verdict | speedup [95 %] | judge-side clock | timer floor ms | s |", "|---|---|---|---|---|---|---|---|"]
        for design, rows in results["cards"].items():
            for r in rows:
                for s in r.get("shapes", []) or [{"shape": "-", "verdict": r["verdict"]}]:
                    sp = f"{s['speedup']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]" if "speedup" in s else "-"
                    cr = f"{s['cross_speedup']:.3f}" if "cross_speedup" in s else "-"
                    fl = f"{s['timer_floor_ms']:.4f}" if s.get("timer_floor_ms") else "-"
                    why = "; ".join(f"{k}: {v[:120]}" for k, v in s.get("reasons", {}).items() if v)[:240]
                    lines.append(f"| {design} | {r['name']} | {s['shape']} | {s['verdict']} | {sp} | {cr} | {fl} | "
                                 f"{r['seconds']:.1f} |" + (f" {why}" if s["verdict"] not in ("FASTER", "SLOWER", "NO_DIFFERENCE") else ""))
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plan", choices=("aa", "cards", "smoke", "final", "run3", "run4"))
    ap.add_argument("--old", help="root of today's verifier (git archive 357582d)")
    ap.add_argument("--out", default=str(HERE / "bench" / "results"))
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--old-repeats", type=int, default=8)
    ap.add_argument("--budget-s", type=float, default=None, help="start no new job after this many seconds")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--design")
    ap.add_argument("--jobs")
    ap.add_argument("--result")
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    old = Path(args.old).resolve()
    if args.budget_s:
        DEADLINE[0] = time.monotonic() + args.budget_s
    smoke = args.plan == "smoke"
    results: dict[str, Any] = {}
    raw: dict[str, Any] = {}
    n_old_final = 0
    if args.plan in ("aa", "smoke", "final"):
        n_new, n_old = (2, 2) if smoke else (args.repeats, args.old_repeats)
        rows: dict[str, list] = {"new": [], "old": []}
        batch = 2 if smoke else 5
        i = 0
        if args.plan == "final":  # one worker (its bytecode cache warms once); today's runs go last
            n_old_final, n_old, batch = n_old, 0, n_new
        while len(rows["new"]) < n_new or len(rows["old"]) < n_old:  # interleaved batches
            for design, root, n in (("new", HERE, n_new), ("old", old, n_old)):
                k = min(batch if design == "new" else max(1, n_old // 4 or 1), n - len(rows[design]))
                if k > 0:
                    rows[design] += run_design(design, root, aa_jobs(k, smoke), out, f"aa{i}")
            i += 1
            if time.monotonic() > DEADLINE[0]:
                break  # the budget is spent: what ran is what is reported
        results["aa"] = {d: summarize_aa(r) for d, r in rows.items()}
        raw["aa"] = rows
    if args.plan == "run3":
        rows = {"new": [], "old": []}
        cards = {"new": [], "old": []}
        twin = {d: [j for j in card_jobs(d, False) if j["name"] == "twin_vs_cublas"] for d in cards}
        attacks = [j for j in card_jobs("new", False) if j["name"] in
                   ("attack:side_stream", "attack:cuda_graph", "attack:leftover_spin")]
        steps = [("new", "aa", aa_jobs(args.repeats // 2, False)), ("old", "aa", aa_jobs(2, False)),
                 ("new", "cards", twin["new"]), ("old", "cards", twin["old"]),
                 ("new", "aa", aa_jobs(args.repeats - args.repeats // 2, False)),
                 ("old", "aa", aa_jobs(max(args.old_repeats - 2, 0), False)), ("new", "cards", attacks)]
        run_steps(steps, old, out, "run3", rows, cards, results)
        raw["aa"], raw["cards"] = rows, cards
    if args.plan == "run4":  # the chained protocol, the per-call one (default) and today's design, one call
        rows = {"new": [], "per_call": [], "old": []}
        cards = {"new": [], "old": []}
        twin = {d: [j for j in card_jobs(d, False) if j["name"] == "twin_vs_cublas"] for d in cards}
        attacks = [j for j in card_jobs("new", False) if j["name"] in
                   ("attack:side_stream", "attack:cuda_graph", "attack:leftover_spin", "attack:memo_fingerprint",
                    "attack:helper_context", "aa_with_neighbour")]
        first = min(2, args.repeats)
        steps = [("new", "aa", chained(aa_jobs(first, False))), ("per_call", "aa", per_call(aa_jobs(2, False))),
                 ("old", "aa", aa_jobs(min(2, args.old_repeats), False)),
                 ("new", "cards", chained(twin["new"])), ("old", "cards", twin["old"]),
                 ("new", "aa", chained(aa_jobs(args.repeats - first, False))),
                 ("old", "aa", aa_jobs(max(args.old_repeats - 2, 0), False)), ("new", "cards", chained(attacks))]
        run_steps(steps, old, out, "run4", rows, cards, results)
        raw["aa"], raw["cards"] = rows, cards
    if args.plan in ("cards", "smoke", "final"):
        cards: dict[str, list] = {"new": [], "old": []}
        jobs = {d: card_jobs(d, smoke) for d in cards}
        if args.plan == "final":  # today's figures for these come from the same-day cards run
            order = ["attack:side_stream", "attack:cuda_graph", "attack:leftover_spin", "aa_with_neighbour",
                     "twin_vs_cublas"]
            by_name = {j["name"]: j for j in jobs["new"]}
            cards["new"] = run_design("new", HERE, [by_name[n] for n in order], out, "final")
            jobs = {"new": [], "old": []}
        # the twin against cuBLAS for both designs first, then the attacks, new design first
        for part in (lambda j: j["name"] == "twin_vs_cublas" or j["name"] == "twin", lambda j: j["name"].startswith("attack"),
                     lambda j: j["name"] == "aa_with_neighbour"):
            for design, root in (("new", HERE), ("old", old)):
                chosen = [j for j in jobs[design] if part(j)]
                if chosen:
                    cards[design] += run_design(design, root, chosen, out, f"cards{len(cards[design])}")
        results["cards"] = raw["cards"] = cards
    if args.plan == "final" and n_old_final:
        rows["old"] = run_design("old", old, aa_jobs(n_old_final, False), out, "aa-old")
        results["aa"] = {d: summarize_aa(r) for d, r in rows.items()}
        raw["aa"] = rows
    device = "cpu"
    torch_version = "?"
    try:
        import torch

        torch_version = torch.__version__
        device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    except Exception:
        pass
    meta = {"plan": args.plan, "device": device, "torch": torch_version,
            "time_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": "python bench/verifier_judge_h200.py " + " ".join(argv or sys.argv[1:])}
    stem = f"verifier_judge_h200_{args.plan}"
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "summary": results.get("aa"), "raw": raw}, indent=1, default=str))
    text = markdown(meta, results)
    (out / f"{stem}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Issue 23's bench: can the verifier see a 3 % difference on this box, and what makes its noise?

    python bench/verifier_precision.py --part 1     # floor, 20 A/A, power pairs 0-9, CLI record (<= 9 min, H200)
    python bench/verifier_precision.py --part 2     # reverify of all cards (twin vs cuBLAS), attacks, power pairs 10-19
    python bench/verifier_precision.py --smoke      # both parts on CPU, tiny shapes, few runs (CI: tests/test_bench_precision_smoke.py)

Writes ``bench/results/<--out>/part<N>.json`` (every report's figures), ``part<N>.md`` and
``summary.md`` (both parts' tables with the goals beside the figures, rebuilt from the JSON
files present) and prints the table. Where a ``.whl`` folder sits in the repository root (the
H200 image lacks pydantic, mcp, cryptography), it first installs it as documented
(``pip install --no-index --no-deps --target /tmp/site .whl/*.whl``) and re-runs itself with
``/tmp/site`` on ``PYTHONPATH``.

The two parts are planned to fit one lent H200 session: two calls of <= 9 minutes each
(``--budget-s`` per part, default 500 s; the job list is ordered by what the issue needs most,
and a job whose expected time no longer fits the part's budget is skipped and listed, so a part
always ends cleanly with its partial results written after every job).

Part 1: the floor (``bench/timing_floor.py``: one process, events per call, flush outside,
12 rounds x 2 blocks of 50; on GPUs also one buffer set for both "arms", and two processes,
which isolate placement and per-process effects of the box itself), ``--repeats`` (20) A/A
verdicts at default options, the CLI ``verified`` record (``skill-server verify`` into a scratch
ledger, then ``history``), the first half of the 3 % power pairs and one 1 % pair; then, while
time is left, the floor's variants, the MPS probe and the ablation (A/A runs with one source of
noise changed each, ``ABLATION``).
Part 2: ``skill-server reverify --no-gates`` of all three cards (timed; the block-scale card's
binding is the Triton twin against cuBLAS on its four shapes, so its shapes are the twin row),
capped at 330 s; every GPU attack candidate; the second half of the power pairs and two more
1 % pairs.
Power pairs: ``arm:extra_big`` against ``base`` (must be SLOWER) and its mirror (FASTER),
interleaved; the table gives the measured difference beside the nominal one.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
WHEELS = HERE / ".whl"
SITE = "/tmp/site"

GPU = {"aa_problem": "bench/problems/blockscale_cublas_aa.py", "aa_arm": "cublas_blockscale", "shape": "4096x2048x7168",
       "card": "flydsl_fp8_blockscale_gemm", "card_baseline": "cublas_blockscale",
       "card_shapes": ["4096x65536x1536", "4096x2048x7168", "16384x1536x7168", "16384x7168x768"],
       "attacks": sorted(p.stem for p in (HERE / "tests/fixtures/gpu_candidates").glob("*.py") if not p.stem.startswith("_")),
       "options": {"device": "cuda", "hidden_shapes": False, "time_limit_s": 300},
       "flush_bytes": 256 << 20, "repeats": 20, "power_repeats": 20, "small_repeats": 3, "floor_runs": 8,
       "ablation_runs": 2, "reverify": True}
CPU = {"aa_problem": "tests/fixtures/cpu_matmul_problem.py", "aa_arm": "torch_mm", "shape": "128x128x128",
       "card": "tests/fixtures/cpu_matmul_problem.py", "card_baseline": "torch_mm", "card_shapes": ["96x96x96"],
       "attacks": ["timing_patcher"],
       "options": {"device": "cpu", "hidden_shapes": False, "time_limit_s": 120, "rounds": 5, "flush_bytes": 1 << 20,
                   "floor_calls": 10, "bootstrap_samples": 400, "seeds": [0, 1], "block_ms": 8.0},
       "flush_bytes": 1 << 20, "repeats": 1, "power_repeats": 1, "small_repeats": 0, "floor_runs": 1,
       "ablation_runs": 1, "reverify": False}
#: one source of noise changed per row (GPU: the gated protocol's parts; CPU smoke: the same machinery)
ABLATION = [
    ("profiler processes load the profiler only while nothing is timed (profiler_loads_during_timing off)",
     {"profiler_loads_during_timing": False}),
    ("today's per-call protocol (host round trip inside the arm's clock)", {"gpu_protocol": "per_call"}),
    ("gated, no slack pad (arm may queue after ready: host time in clocks)", {"gate_pad_us": 0.0}),
    ("no warm burst before blocks", {"warm_burst_ms": 0.0}),
    ("A/B baseline alternating between two processes (A, A')", {"ab_baselines": 2}),
    ("fewer calls per block (block_ms 5)", {"block_ms": 5.0}),
    ("more calls per block (block_ms 60)", {"block_ms": 60.0}),
    ("no cache flush (1 MiB)", {"flush_bytes": 1 << 20}),
    ("fewest sampled checks (8 per output)", {"check_samples": 8}),
]
ATTACK_DIR = {"gpu": "tests/fixtures/gpu_candidates", "cpu": "tests/fixtures/candidates"}
GOALS = {"aa_hw_median": 0.003, "aa_hw_max": 0.006, "floor_factor": 3.0, "seconds": 15.0, "power": 19 / 20,
         "reverify_s": 300.0}
#: what one job is expected to take (s) before any of its group ran (GPU: the H200 runs of
#: 2026-12-02 less the profiler processes' cut); once a group ran, the slowest of its last three runs is
#: the estimate
EXPECT = {"gpu": {"aa": 12.0, "ablation": 14.0, "mps": 14.0, "attack": 20.0, "twin": 70.0, "power_big": 9.0,
                  "mirror_big": 9.0, "power_small": 9.0, "mirror_small": 9.0},
          "cpu": {}}  # CPU smoke: a group's first job starts while any budget is left (CI's 10 s parts check the path)
REVERIFY_CAP_S = 330.0  # the reverify's goal is 300 s: past this it is stopped, so the part's other jobs still run
POWER_PROBLEM = "bench/problems/power_extra.py"
POWER_OPTIONS = {"profile": False, "seeds": [0, 1]}  # timing is what these measure; parity still runs (2 seeds + secret)


# ------------------------------------------------------------------ set-up
def ensure_wheels(argv: list[str]) -> None:
    """The H200 image has no pydantic / mcp / cryptography: the lead carries them in .whl."""
    if not WHEELS.is_dir() or os.environ.get("VERIFIER_PRECISION_WHEELS") == "1":
        return
    wheels = sorted(str(p) for p in WHEELS.glob("*.whl"))
    if wheels:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--no-cache-dir", "--upgrade", "--target", SITE, *wheels], check=True)
    env = dict(os.environ, VERIFIER_PRECISION_WHEELS="1")
    env["PYTHONPATH"] = os.pathsep.join([SITE, str(HERE)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *argv], env)


def _paths() -> None:
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(HERE) not in parts:  # the judge and its arms import the verifier from this tree
        os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE)] + parts)


# ------------------------------------------------------------------ one verification
def figures(report: Any, seconds: float) -> dict[str, Any]:
    s = report.shape_reports[0] if report.shape_reports else None
    row: dict[str, Any] = {"verdict": report.verdict, "seconds": round(seconds, 2),
                           "stages": {k: v.status for k, v in report.stages.items()}}
    if s is None:
        return row
    row["shapes"] = []
    for s in report.shape_reports:
        if s.hidden:
            continue
        t = s.timing
        one: dict[str, Any] = {"shape": s.shape, "verdict": s.verdict,
                               "reasons": {k: v.reason[:400] for k, v in s.stages.items() if v.status != "PASS"},
                               "stage_seconds": {k: round(v.seconds, 2) for k, v in s.stages.items()},
                               "phase_seconds": dict(getattr(s, "phase_seconds", {}) or {}),
                               "baseline_instance": s.baseline_instance}
        if t is not None and t.ab is not None and t.ab.speedup is not None:
            one.update(speedup=t.ab.speedup, ci_low=t.ab.ci_low, ci_high=t.ab.ci_high,
                       half_width=(t.ab.ci_high - t.ab.ci_low) / 2, calls_per_block=t.ab.calls_per_block,
                       noise_floor=t.noise_floor, protocol=t.protocol, timer_floor_ms=t.timer_floor_ms,
                       median_a_ms=t.ab.median_a_ms, median_b_ms=t.ab.median_b_ms, baseline_drift=t.baseline_drift,
                       late_calls=t.late_calls, gate_pad_us=t.gate_pad_us, inconclusive=t.inconclusive,
                       failures=t.failures[:3], box_load=t.box_load.model_dump() if t.box_load else None)
            if t.aa is not None and t.aa.ci_low is not None:
                one["aa_half_width"] = (t.aa.ci_high - t.aa.ci_low) / 2
                one["aa_speedup"] = t.aa.speedup
            if t.ab_cross is not None and t.ab_cross.speedup is not None:
                one.update(cross_speedup=t.ab_cross.speedup, cross_ci=[t.ab_cross.ci_low, t.ab_cross.ci_high])
            one["clock_gaps_ms"] = {c.arm: round(c.gap_ms, 5) for c in t.clock_checks}
            one["wall_per_call_ms"] = {w.arm: round(w.wall_per_call_ms, 4) for w in t.warmup}
        row["shapes"].append(one)
    return row


class Runner:
    """Runs the part's jobs in order; a job that would not end inside the part's budget (its
    expected time: ``EXPECT``, or the slowest run of its group so far) is skipped and listed."""

    def __init__(self, cfg: dict[str, Any], budget_s: float, log: list[dict[str, Any]], save: Any,
                 kind: str = "gpu") -> None:
        self.cfg, self.deadline, self.log, self.save = cfg, time.monotonic() + budget_s, log, save
        self.expect = dict(EXPECT[kind])
        self.skipped: list[str] = []
        # CPU smoke: the first A/A and the first attack run whatever the budget (what CI checks;
        # on a loaded two-core box the floor alone can outlast CI's 10 s parts)
        self.first_always = {"aa", "attack"} if kind == "cpu" else set()

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def left(self, group: str | None = None, name: str = "", expect_s: float | None = None) -> bool:
        need = expect_s if expect_s is not None else self.expect.get(group or "", 0.0)
        if self.remaining() > need or (group in self.first_always and not any(r.get("group") == group for r in self.log)):
            return True
        self.skipped.append(f"{group}: {name}" if name else str(group))
        print(f"[{group}] {name}: skipped, {max(self.remaining(), 0):.0f} s of the part's budget left "
              f"(needs ~{need:.0f} s)", file=sys.stderr, flush=True)
        return False

    def learn(self, group: str, row: dict[str, Any]) -> None:
        """The group's expected time from now on: the slowest of its last three runs (a
        process's first verification pays start-ups the later ones do not)."""
        if row["verdict"] != "BENCH_ERROR":
            recent = [r["seconds"] for r in self.log if r.get("group") == group and r["verdict"] != "BENCH_ERROR"]
            self.expect[group] = max(recent[-2:] + [row["seconds"]])

    def verify(self, group: str, name: str, problem: str, cand: str, baseline: str, shapes: list[str],
               **options: Any) -> dict[str, Any] | None:
        if not self.left(group, name):
            return None
        from verifiers.api import verify
        from verifiers.options import VerifyOptions

        opts = {**self.cfg["options"], **options}
        t0 = time.perf_counter()
        try:
            row = figures(verify(problem, cand, baseline, shapes, VerifyOptions(**opts)), time.perf_counter() - t0)
        except Exception as exc:  # the bench goes on; the row says what broke
            row = {"verdict": "BENCH_ERROR", "error": f"{type(exc).__name__}: {exc}"[:800],
                   "seconds": round(time.perf_counter() - t0, 2)}
        row.update(group=group, name=name, candidate=cand, baseline=baseline, options=options)
        self.learn(group, row)
        self.log.append(row)
        self.save()
        first = (row.get("shapes") or [{}])[0]
        hw = first.get("half_width")
        print(f"[{group}] {name}: {row['verdict']} {row['seconds']:.1f} s"
              + (f" speedup {first['speedup']:.4f} [{first['ci_low']:.4f}, {first['ci_high']:.4f}] hw {hw:.4%}"
                 f" k {first.get('calls_per_block')}" if hw is not None else f" {str(first.get('reasons', row.get('error', '')))[:300]}"),
              file=sys.stderr, flush=True)
        return row


# ------------------------------------------------------------------ the parts
def measure_floor(argv: list[str]) -> list[dict[str, Any]]:
    """``bench/timing_floor.py`` in a process of its own: this driver never opens the device,
    else its context sits on the GPU beside every verification and the verifier rightly reads
    each one as INCONCLUSIVE (another process held a context; first H200 run of this bench)."""
    got = subprocess.run([sys.executable, str(HERE / "bench" / "timing_floor.py"), *argv], capture_output=True,
                         text=True, cwd=str(HERE), timeout=600)
    if got.returncode != 0:
        raise RuntimeError((got.stderr or got.stdout)[-400:])
    return json.loads(got.stdout)


def floor_rows(cfg: dict[str, Any], device: str, smoke: bool, modes: tuple[str, ...]) -> list[dict[str, Any]]:
    rows = []
    for mode in modes:
        argv = ["--problem", cfg["aa_problem"], "--arm", cfg["aa_arm"], "--shape", cfg["shape"], "--device", device,
                "--mode", mode, "--runs", str(1 if mode != "one" else cfg["floor_runs"]),
                "--flush-bytes", str(cfg["flush_bytes"])] + (["--rounds", "6", "--calls", "10"] if smoke else [])
        try:
            got = measure_floor(argv)
        except Exception as exc:
            got = [{"mode": mode, "error": f"{type(exc).__name__}: {exc}"[:400]}]
        rows += got
        print(f"[floor] {mode}: " + ", ".join(f"{r['half_width']:.4%}" for r in got if "half_width" in r), file=sys.stderr)
    return rows


def power_pairs(run: Runner, cfg: dict[str, Any], first: int, last: int, small: range) -> None:
    """3 % pairs ``first`` .. ``last - 1`` then the 1 % pairs ``small``, each the power candidate
    then its mirror (interleaved, so a drift of the box hits both alike)."""
    power, shape = POWER_PROBLEM, cfg["shape"]
    for i in range(first, last):
        run.verify("power_big", f"extra_big #{i}", power, "arm:extra_big", "base", [shape], **POWER_OPTIONS)
        run.verify("mirror_big", f"mirror extra_big #{i}", power, "arm:base", "extra_big", [shape], **POWER_OPTIONS)
    for i in small:
        run.verify("power_small", f"extra_small #{i}", power, "arm:extra_small", "base", [shape], **POWER_OPTIONS)
        run.verify("mirror_small", f"mirror extra_small #{i}", power, "arm:base", "extra_small", [shape], **POWER_OPTIONS)


def part1(run: Runner, cfg: dict[str, Any], device: str, smoke: bool, out: dict[str, Any]) -> None:
    """The floor, the A/A runs, the first half of the power pairs and a 1 % pair, the CLI record;
    then, with the time that is left, the floor's variants, the MPS probe and the ablation."""
    out["floor"] = floor_rows(cfg, device, smoke, ("one", "same") if smoke else ("one",))
    for i in range(cfg["repeats"]):
        run.verify("aa", f"aa{i}", cfg["aa_problem"], f"arm:{cfg['aa_arm']}", cfg["aa_arm"], [cfg["shape"]])
    if cfg.get("cli", True) and run.left("cli", "CLI verify -> history", 60.0 if not smoke else 0.0):
        out["cli"] = cli_record(cfg, smoke)
    first, last = _pairs(cfg, 1)
    power_pairs(run, cfg, first, last, range(min(1, cfg["small_repeats"])))
    extras(run, cfg, device, smoke, out)


def extras(run: Runner, cfg: dict[str, Any], device: str, smoke: bool, out: dict[str, Any]) -> None:
    """While time is left: the floor's variants, the MPS probe and the ablation."""
    if not smoke and run.left("floor", "floor variants (one buffer set; two processes)", 30.0):
        out["floor"] = out.get("floor", []) + floor_rows(cfg, device, smoke, ("same", "two"))
    if not smoke and run.left("mps", "CUDA MPS probe", 60.0):
        out["mps"] = mps_rows(run, cfg, device)
    for label, change in (ABLATION[3:5] if smoke else ABLATION):
        for i in range(cfg["ablation_runs"]):
            run.verify("ablation", f"{label} #{i}", cfg["aa_problem"], f"arm:{cfg['aa_arm']}", cfg["aa_arm"],
                       [cfg["shape"]], **change)


def part3(run: Runner, cfg: dict[str, Any], device: str, smoke: bool, out: dict[str, Any]) -> None:
    """A third call where the session's device time allows: one card's reverify
    (``--reverify-card``), the 3 % mirror runs alone (``--mirror-pairs``: a re-run after a
    change to the power arms), more 1 % pairs (``--small-pairs``), then the extras part 1 had
    no time for."""
    if cfg.get("reverify_card") and run.left("reverify", f"skill-server reverify ({cfg['reverify_card']})", 60.0):
        out["reverify"] = reverify_all(run, cfg["reverify_card"])
    first, last = cfg.get("mirror_pairs") or (0, 0)
    for i in range(first, last):
        run.verify("mirror_big", f"mirror extra_big #{i}", POWER_PROBLEM, "arm:base", "extra_big", [cfg["shape"]],
                   **POWER_OPTIONS)
    first, last = cfg.get("small_pairs") or (cfg["small_repeats"], cfg["small_repeats"])
    power_pairs(run, cfg, 0, 0, range(first, last))
    extras(run, cfg, device, smoke, out)


def part2(run: Runner, cfg: dict[str, Any], device: str, smoke: bool, out: dict[str, Any]) -> None:
    """``skill-server reverify`` of every card (timed; on GPUs it holds the twin's four shapes),
    the attacks, the second half of the power pairs and the last 1 % pair."""
    if cfg.get("reverify") and run.left("reverify", "skill-server reverify (all cards)", 120.0):
        out["reverify"] = reverify_all(run)
    kind = "cpu" if smoke else "gpu"
    for name in cfg["attacks"]:
        run.verify("attack", name, cfg["card"] if not smoke else cfg["aa_problem"],
                   f"{HERE / ATTACK_DIR[kind] / name}.py:build", cfg["card_baseline"], [cfg["shape"]])
    if not cfg.get("reverify") or "blockscale" not in str((out.get("reverify") or {}).get("cards")):
        run.verify("twin", "twin vs baseline", cfg["card"], "arm:triton_twin" if not smoke else "arm:bmm",
                   cfg["card_baseline"], cfg["card_shapes"])
    first, last = _pairs(cfg, 2)
    power_pairs(run, cfg, first, last, range(min(1, cfg["small_repeats"]), cfg["small_repeats"]))


def _pairs(cfg: dict[str, Any], part: int) -> tuple[int, int]:
    """The 3 % pairs this part runs: ``--pairs FIRST:LAST``, else the first half of
    ``power_repeats`` in part 1 and the rest in part 2."""
    if cfg.get("pairs"):
        return cfg["pairs"]
    half = (cfg["power_repeats"] + 1) // 2
    return (0, half) if part == 1 else (half, cfg["power_repeats"])


def reverify_all(run: Runner, card: str | None = None) -> dict[str, Any]:
    """``skill-server reverify --no-gates --json`` of all three cards into a scratch ledger, in a
    process of its own (this driver never opens the device), stopped at the part's budget. The
    cards' bindings name the GPU arms (cuda: reference against baseline on the card's verifier
    shapes); ``--no-gates`` leaves out the gfx950 compile gates and the gfx950-emulated parity
    run, which say nothing about this box. Goal: <= 5 minutes for the three."""
    ledger = Path(tempfile.mkdtemp(prefix="precision-reverify-")) / "ledger.sqlite"
    cmd = [sys.executable, "-m", "skill_server.cli.entry", "--ledger", str(ledger), "reverify", "--no-gates", "--json"] \
        + (["--card", card] if card else [])
    limit = max(min(run.remaining() - 5.0, REVERIFY_CAP_S), 30.0)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(HERE))
    progress: list[str] = []  # each progress line with the seconds since the start: where the time went

    def pump() -> None:
        for line in proc.stderr:
            progress.append(f"{time.perf_counter() - t0:6.1f} s {line.rstrip()[:300]}")

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        stdout, _ = proc.communicate(timeout=limit)
        rc: Any = proc.returncode
    except subprocess.TimeoutExpired:  # the part's budget: stopped (SIGTERM ends its verifier), what it said is kept
        proc.terminate()
        try:
            stdout, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, _ = proc.communicate()
        rc = "timeout"
    reader.join(timeout=5)
    seconds = round(time.perf_counter() - t0, 1)
    cards = []
    try:
        data = json.loads(stdout)
        for c in data.get("cards", []):
            cards.append({"card": c.get("card_id"), "status": c.get("status"), "reason": str(c.get("reason"))[:300],
                          "shapes": [{k: sh.get(k) for k in ("shape", "verdict", "speedup", "interval")}
                                     for sh in c.get("shapes", [])]})
    except (json.JSONDecodeError, AttributeError):
        pass
    row = {"command": " ".join(cmd[2:]), "rc": rc, "seconds": seconds, "limit_s": round(limit), "cards": cards,
           "progress": progress[-120:]}
    print(f"[reverify] rc {rc}, {seconds} s: " + ", ".join(f"{c['card']} {c['status']}" for c in cards),
          file=sys.stderr, flush=True)
    return row


MPS_CONTROL = ("nvidia-cuda-mps-control", "/usr/local/nvidia/bin/nvidia-cuda-mps-control")


def mps_rows(run: Runner, cfg: dict[str, Any], device: str) -> dict[str, Any]:
    """Probe CUDA MPS (one GPU context for the judge and the arms, separate address spaces):
    a private control daemon (its own pipe and log folders; the compute mode is not touched),
    the two-process floor and two A/A runs through it, the daemon stopped afterwards. Only
    processes given ``CUDA_MPS_PIPE_DIRECTORY`` (the arms get ``CUDA_*``) connect to it."""
    import shutil

    control = next((c for c in MPS_CONTROL if shutil.which(c) or Path(c).is_file()), None)
    if control is None or not run.left():
        return {"probe": "no nvidia-cuda-mps-control" if control is None else "skipped: time budget"}
    root = Path(tempfile.mkdtemp(prefix="precision-mps-"))
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(root / "pipe"), "CUDA_MPS_LOG_DIRECTORY": str(root / "log")}
    for d in env.values():
        Path(d).mkdir()
    out: dict[str, Any] = {"control": control}
    got = subprocess.run([control, "-d"], env={**os.environ, **env}, capture_output=True, text=True, timeout=30)
    out["start_rc"], out["start_output"] = got.returncode, (got.stdout + got.stderr)[-500:]
    if got.returncode != 0:
        return out
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        probe = subprocess.run([sys.executable, "-c", "import torch; x = torch.ones(1, device='cuda'); "
                                "print(float((x + 1).item()))"], capture_output=True, text=True, timeout=120)
        out["client_probe"] = (probe.returncode, (probe.stdout + probe.stderr)[-300:])
        if probe.returncode == 0:
            try:
                out["floor_two_processes"] = measure_floor(
                    ["--problem", cfg["aa_problem"], "--arm", cfg["aa_arm"], "--shape", cfg["shape"], "--device", device,
                     "--mode", "two", "--runs", "1", "--flush-bytes", str(cfg["flush_bytes"])])
            except Exception as exc:
                out["floor_two_processes"] = f"{type(exc).__name__}: {exc}"[:400]
            for i in range(2):
                run.verify("mps", f"A/A under MPS #{i}", cfg["aa_problem"], f"arm:{cfg['aa_arm']}", cfg["aa_arm"],
                           [cfg["shape"]])
        server = sorted((root / "log").glob("*.log"))
        out["log_tail"] = "".join(p.read_text(errors="replace")[-400:] for p in server)[-1200:]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        stop = subprocess.run([control], input="quit\n", env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=30)
        out["stop_rc"] = stop.returncode
    return out


def cli_record(cfg: dict[str, Any], smoke: bool) -> dict[str, Any]:
    """``skill-server verify`` (recorded) then ``history``: a ``verified`` record in a scratch ledger."""
    ledger = Path(tempfile.mkdtemp(prefix="precision-ledger-")) / "ledger.sqlite"
    base = [sys.executable, "-m", "skill_server.cli.entry", "--ledger", str(ledger)]
    if smoke:  # the quickest card on CPU, its torch baseline against itself at the smallest smoke shape
        verify = base + ["verify", "flydsl_mxfp8_8wave_gemm", "--candidate", "arm:torch_dequant", "--baseline",
                         "torch_dequant", "--shape", "64x64x256", "--rounds", "5", "--device", "cpu", "--quiet"]
    else:
        verify = base + ["verify", cfg["card"], "--candidate", "arm:triton_twin", "--baseline", cfg["card_baseline"],
                         "--shape", cfg["shape"], "--quiet"]
    t0 = time.perf_counter()
    got = subprocess.run(verify, capture_output=True, text=True, cwd=str(HERE), timeout=600)
    seconds = time.perf_counter() - t0
    card = verify[verify.index("verify") + 1]
    hist = subprocess.run(base + ["history", card, "--json"], capture_output=True, text=True, cwd=str(HERE), timeout=120)
    records = []
    try:
        records = json.loads(hist.stdout).get("results", [])
    except (json.JSONDecodeError, AttributeError):
        pass
    verified = [r for r in records if isinstance(r, dict) and (r.get("evidence") or {}).get("level") == "verified"]
    return {"command": " ".join(verify[2:]), "rc": got.returncode, "seconds": round(seconds, 1),
            "verify_tail": (got.stdout + got.stderr)[-1500:], "history_rc": hist.returncode,
            "history_tail": (hist.stdout + hist.stderr)[-1500:], "records": len(records), "verified": len(verified)}


# ------------------------------------------------------------------ the table
def _first(row: dict[str, Any]) -> dict[str, Any]:
    return (row.get("shapes") or [{}])[0]


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.2%}"


def table(results: dict[str, Any]) -> str:
    rows: list[dict[str, Any]] = results.get("rows", [])
    by = lambda g: [r for r in rows if r.get("group") == g]  # noqa: E731
    lines = ["| what | measured | goal | met |", "|---|---|---|---|"]
    floor = [r["half_width"] for r in results.get("floor", []) if r.get("mode") == "one" and "half_width" in r]
    f_med = statistics.median(floor) if floor else None
    lines.append(f"| floor: one-process events loop, half-width median / max ({len(floor)} runs) | "
                 f"{_pct(f_med)} / {_pct(max(floor) if floor else None)} | (the box) | |")
    for mode, what in (("same", "one buffer set for both"), ("two", "two processes, no judge")):
        got = [r["half_width"] for r in results.get("floor", []) if r.get("mode") == mode and "half_width" in r]
        sp = [r["speedup"] for r in results.get("floor", []) if r.get("mode") == mode and "speedup" in r]
        if got:
            lines.append(f"| floor variant: {what} (half-width, ratio) | {_pct(got[0])}, {sp[0]:.4f} | (ablation) | |")
    aa = by("aa")
    if aa:
        hw = [_first(r).get("half_width") for r in aa if _first(r).get("half_width") is not None]
        nd = sum(r["verdict"] == "NO_DIFFERENCE" for r in aa)
        secs = [r["seconds"] for r in aa]
        med, mx = (statistics.median(hw), max(hw)) if hw else (None, None)
        lines.append(f"| A/A half-width median / max ({len(hw)} of {len(aa)} timed) | {_pct(med)} / {_pct(mx)} | "
                     f"<= 0.30 % / <= 0.60 % | {_met(med is not None and med <= GOALS['aa_hw_median'] and mx <= GOALS['aa_hw_max'])} |")
        xs = [(_first(r)["cross_ci"][1] - _first(r)["cross_ci"][0]) / 2 for r in aa if _first(r).get("cross_ci")]
        late = [sum((_first(r).get("late_calls") or {}).values()) for r in aa if _first(r).get("protocol") == "gated"]
        lines.append(f"| A/A on the judge's own clock: half-width median / max | "
                     f"{_pct(statistics.median(xs) if xs else None)} / {_pct(max(xs) if xs else None)} | "
                     f"(both clocks must agree for a verdict) | |")
        if late:
            lines.append(f"| gated: late calls per run, median / max (pad at the end: "
                         f"{_first(aa[-1]).get('gate_pad_us')} us) | {statistics.median(late)} / {max(late)} | few | |")
        if f_med:
            lines.append(f"| A/A median / floor median | {med / f_med:.1f}x | <= 3x | {_met(med is not None and med <= 3 * f_med)} |"
                         if med is not None else "| A/A / floor | - | <= 3x | no |")
        lines.append(f"| A/A verdicts NO_DIFFERENCE | {nd} / {len(aa)} ({_verdicts(aa)}) | 20 / 20 | {_met(nd == len(aa) and len(aa) >= 20)} |")
        lines.append(f"| seconds per verdict median / max | {statistics.median(secs):.1f} / {max(secs):.1f} | <= 15 | "
                     f"{_met(statistics.median(secs) <= GOALS['seconds'])} |")
    nominal = {"big": "3 %" if not results.get("smoke") else "30 %", "small": "1 %" if not results.get("smoke") else "10 %"}
    for group, want, goal in (("power_big", "SLOWER", ">= 19 / 20"), ("mirror_big", "FASTER", ">= 19 / 20")):
        got = by(group)
        if got:
            n = sum(r["verdict"] == want for r in got)
            lines.append(f"| {group}: {want} (extra work nominal {nominal['big']}, measured {_measured(got, group)}) | "
                         f"{n} / {len(got)} ({_verdicts(got)}) | {goal} | {_met(n >= GOALS['power'] * max(len(got), 20))} |")
    for group, wrong in (("power_small", "FASTER"), ("mirror_small", "SLOWER")):
        got = by(group)
        if got:
            n = sum(r["verdict"] == wrong for r in got)
            lines.append(f"| {group}: wrong direction ({wrong}; nominal {nominal['small']}, measured "
                         f"{_measured(got, group)}) | {n} / {len(got)} ({_verdicts(got)}) | 0 | {_met(n == 0)} |")
    rv = results.get("reverify")
    if rv:
        lines.append(f"| skill-server reverify, all cards (GPU arms, --no-gates) | {rv.get('seconds')} s, rc {rv.get('rc')}: "
                     + ", ".join(f"{c['card']} {c['status']}" for c in rv.get("cards", []))
                     + f" | <= 300 s, a verdict for every shape | {_met(rv.get('rc') in (0, 1) and rv.get('seconds', 1e9) <= GOALS['reverify_s'] and all(sh.get('verdict') not in (None, 'ERROR') for c in rv.get('cards', []) for sh in c.get('shapes', [])))} |")
        for c in rv.get("cards", []):
            if "blockscale" in str(c.get("card")) and c.get("shapes"):
                lines.append("| twin vs baseline (reverify of the block-scale card) | " + "; ".join(
                    f"{sh['shape']} {sh.get('verdict')}" + (f" {sh['speedup']:.3f}" if sh.get("speedup") else "")
                    for sh in c["shapes"]) + f" | a verdict per shape | "
                    f"{_met(all(sh.get('verdict') not in (None, 'FAIL', 'ERROR') for sh in c['shapes']))} |")
    att = by("attack")
    if att:
        beaten = [r for r in att if r["verdict"] != "FASTER" and r["verdict"] != "BENCH_ERROR"]
        lines.append(f"| attacks defeated (FAIL or not FASTER) | {len(beaten)} / {len(att)}: "
                     + ", ".join(f"{r['name']} {r['verdict']}" for r in att) + f" | all | {_met(len(beaten) == len(att))} |")
    for r in by("twin"):
        lines.append("| twin vs baseline | " + "; ".join(
            f"{s['shape']} {s['verdict']}" + (f" {s['speedup']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]" if "speedup" in s else "")
            for s in r.get("shapes", [])) + f" ({r['seconds']:.0f} s) | a verdict per shape | {_met(r['verdict'] not in ('FAIL', 'ERROR', 'BENCH_ERROR'))} |")
    cli = results.get("cli")
    if cli:
        lines.append(f"| CLI verify -> history: verified records | {cli.get('verified', 0)} (rc {cli.get('rc')}, "
                     f"{cli.get('seconds')} s) | 1 | {_met(cli.get('verified', 0) >= 1)} |")
    mps = by("mps")
    if mps or results.get("mps"):
        m = results.get("mps") or {}
        hw = [_first(r).get("half_width") for r in mps if _first(r).get("half_width") is not None]
        fl = m.get("floor_two_processes")
        fl_text = f"{fl[0]['half_width']:.2%}, ratio {fl[0]['speedup']:.4f}" if isinstance(fl, list) and fl else str(fl or "-")[:80]
        lines.append(f"| CUDA MPS probe: daemon rc {m.get('start_rc', '-')}, client {str(m.get('client_probe', '-'))[:40]}; "
                     f"two-process floor {fl_text}; A/A {_verdicts(mps) if mps else '-'} half-width "
                     f"{', '.join(_pct(h) for h in hw) or '-'} | (option) | |")
    abl = by("ablation")
    if abl:
        base = [_first(r).get("half_width") for r in aa if _first(r).get("half_width") is not None]
        lines += ["", "Ablation (A/A, one source changed; half-width median, its change against the default's):", "",
                  "| change | runs | verdicts | half-width median | vs default | s per verdict |", "|---|---|---|---|---|---|"]
        labels = list(dict.fromkeys(r["name"].rsplit(" #", 1)[0] for r in abl))
        for label in labels:
            got = [r for r in abl if r["name"].rsplit(" #", 1)[0] == label]
            hw = [_first(r).get("half_width") for r in got if _first(r).get("half_width") is not None]
            m = statistics.median(hw) if hw else None
            ratio = f"{m / statistics.median(base):.1f}x" if m is not None and base and statistics.median(base) > 0 else "-"
            lines.append(f"| {label} | {len(got)} | {_verdicts(got)} | {_pct(m)} | {ratio} | "
                         f"{statistics.median([r['seconds'] for r in got]):.1f} |")
    return "\n".join(lines) + "\n"


def problems(results: dict[str, Any]) -> list[str]:
    """What makes a run unusable whatever the box: harness errors, an A/A that FAILed, an
    attack that gained FASTER, a known difference read the wrong way, no verified record."""
    out = []
    for r in results.get("rows", []):
        g, v = r.get("group"), r["verdict"]
        if v in ("BENCH_ERROR", "ERROR"):
            out.append(f"{r['name']}: {v} {r.get('error') or _first(r).get('reasons')}")
        elif g in ("aa", "ablation") and v == "FAIL":
            out.append(f"{r['name']}: an A/A FAILed: {_first(r).get('reasons')}")
        elif g == "attack" and v == "FASTER":
            out.append(f"{r['name']}: the attack gained FASTER")
        elif (g, v) in (("power_big", "FASTER"), ("power_small", "FASTER"), ("mirror_big", "SLOWER"),
                        ("mirror_small", "SLOWER"), ("power_big", "FAIL"), ("mirror_big", "FAIL")):
            out.append(f"{r['name']}: {v}")
    cli = results.get("cli")
    if cli and "skipped" not in cli and not cli.get("verified"):
        out.append(f"CLI: no verified record (rc {cli.get('rc')}): {cli.get('verify_tail', '')[-300:]}")
    return out


def _measured(rows: list[dict[str, Any]], group: str) -> str:
    """The difference the verdicts measured: 1 / speedup - 1 when the candidate carries the
    extra work (power), speedup - 1 when the baseline does (mirror); median over the runs."""
    sp = [_first(r)["speedup"] for r in rows if _first(r).get("speedup")]
    if not sp:
        return "-"
    d = [(1 / x - 1) if group.startswith("power") else (x - 1) for x in sp]
    return f"{statistics.median(d):.2%} (range {min(d):.2%} .. {max(d):.2%})"


def _met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _verdicts(rows: list[dict[str, Any]]) -> str:
    names = sorted({r["verdict"] for r in rows})
    return ", ".join(f"{sum(r['verdict'] == v for r in rows)} {v}" for v in names)


# ------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", type=int, choices=(1, 2, 3), action="append",
                    help="1, 2 (default: both); 3: more 1 %% pairs (--small-pairs), then the ablation")
    ap.add_argument("--small-pairs", default=None, metavar="FIRST:LAST", help="part 3: the 1 %% pairs it makes")
    ap.add_argument("--mirror-pairs", default=None, metavar="FIRST:LAST", help="part 3: 3 %% mirror runs alone")
    ap.add_argument("--reverify-card", default=None, metavar="CARD", help="part 3: reverify this card first")
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny shapes, few runs")
    ap.add_argument("--out", default=None, help="folder under bench/results (default h200_precision, smoke: precision_smoke)")
    ap.add_argument("--repeats", type=int, default=None, help="A/A runs (default 20)")
    ap.add_argument("--power-repeats", type=int, default=None, help="runs of each 3 %% power test (default 20)")
    ap.add_argument("--pairs", default=None, metavar="FIRST:LAST",
                    help="the 3 %% power pairs this run makes (numbered FIRST .. LAST-1; default: part 1 the first "
                         "half of --power-repeats, part 2 the rest)")
    ap.add_argument("--summarize", action="store_true", help="run nothing: rebuild summary.md from the part<N>.json in --out")
    ap.add_argument("--no-cli", action="store_true", help="skip the CLI verify -> history record (CI's quick smoke)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="per part: start no job that would not end by then (default 500 s; smoke 400 s)")
    args = ap.parse_args(argv)
    if not args.smoke and not args.summarize:
        ensure_wheels(argv)
    _paths()
    cfg = dict(CPU if args.smoke else GPU)
    if args.repeats is not None:
        cfg["repeats"] = args.repeats
    cfg["cli"] = not args.no_cli
    if args.power_repeats is not None:
        cfg["power_repeats"] = args.power_repeats
    cfg["reverify_card"] = args.reverify_card
    for flag, key, value in (("--pairs", "pairs", args.pairs), ("--small-pairs", "small_pairs", args.small_pairs),
                             ("--mirror-pairs", "mirror_pairs", args.mirror_pairs)):
        if value is not None:
            cfg[key] = _pair_range(ap, flag, value)
    device = "cpu" if args.smoke else "cuda"
    out_dir = Path(args.out) if args.out and Path(args.out).is_absolute() else \
        HERE / "bench" / "results" / (args.out or ("precision_smoke" if args.smoke else "h200_precision"))
    out_dir.mkdir(parents=True, exist_ok=True)
    for part in [] if args.summarize else (args.part or [1, 2]):
        results: dict[str, Any] = {"rows": [], "smoke": args.smoke}
        path = out_dir / f"part{part}.json"

        def save() -> None:
            path.write_text(json.dumps({"meta": meta, **results}, indent=1, default=str))

        meta = {"part": part, "smoke": args.smoke, "time_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "command": "python bench/verifier_precision.py " + " ".join(argv), "device": _device_name(device),
                "git": _git()}
        run = Runner(cfg, args.budget_s or (400.0 if args.smoke else 500.0), results["rows"], save,
                     "cpu" if args.smoke else "gpu")
        results["skipped"] = run.skipped
        t0 = time.perf_counter()
        {1: part1, 2: part2, 3: part3}[part](run, cfg, device, args.smoke, results)
        meta["seconds"] = round(time.perf_counter() - t0, 1)
        save()
        (out_dir / f"part{part}.md").write_text(f"# Part {part}, {meta['device']}, {meta['time_utc']}\n\n"
                                                 f"`{meta['command']}`, {meta['seconds']} s\n\n" + table(results))
    merged: dict[str, Any] = {"rows": [], "smoke": args.smoke, "skipped": []}
    for part in (1, 2, 3):
        p = out_dir / f"part{part}.json"
        if p.exists():
            data = json.loads(p.read_text())
            merged["rows"] += data.get("rows", [])
            merged["skipped"] += data.get("skipped", [])
            merged["floor"] = merged.get("floor", []) + data.get("floor", [])  # part 3 adds the floor's variants
            for key in ("cli", "mps", "reverify"):
                if key in data:
                    merged[key] = data[key]
    ran = {f"{r.get('group')}: {r.get('name')}" for r in merged["rows"]}
    if "mps" in merged:
        ran.add("mps: CUDA MPS probe")
    if len(merged.get("floor", [])) > 1:
        ran.add("floor: floor variants (one buffer set; two processes)")
    merged["skipped"] = [s for s in merged["skipped"] if s not in ran]  # a later part may have run it
    text = table(merged)
    if merged["skipped"]:
        text += f"\nSkipped (the part's budget): {len(merged['skipped'])} job(s): " + "; ".join(merged["skipped"][:12]) + "\n"
    bad = problems(merged)
    text += "".join(f"\nPROBLEM: {b}" for b in bad)
    (out_dir / "summary.md").write_text(f"# Verifier precision ({'CPU smoke' if args.smoke else 'GPU'})\n\n" + text)
    print(text)
    return 1 if bad else 0


def _pair_range(ap: argparse.ArgumentParser, flag: str, value: str) -> tuple[int, int]:
    """``FIRST:LAST`` of a pair-numbering option, or the parser's usage error."""
    try:
        first, last = (int(x) for x in value.split(":"))
        if not 0 <= first <= last:
            raise ValueError
    except ValueError:
        ap.error(f"{flag} {value!r}: expected FIRST:LAST with 0 <= FIRST <= LAST, e.g. 10:20")
    return first, last


def _device_name(device: str) -> str:
    """Asked in a child process: this driver never holds a device context (see measure_floor)."""
    if device != "cuda":
        return "cpu"
    got = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.get_device_name(0))"],
                         capture_output=True, text=True, timeout=120)
    return got.stdout.strip() or device


def _git() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=str(HERE)).stdout.strip()
    except OSError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())

"""Shared helpers for the ledger / reverify / overlap tests: records, a throw-away
project, and the worker functions that child processes run."""
from __future__ import annotations

import copy
import itertools
import os
import shutil
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SKILLS = REPO / "skills"
BLOCKSCALE = "flydsl_fp8_blockscale_gemm"
MXFP8 = "flydsl_mxfp8_8wave_gemm"
MOE = "flydsl_prefill_moe_stage2_fp8partial"
CARDS = {BLOCKSCALE, MXFP8, MOE}

GFX950 = {"device": "AMD Instinct MI355X", "generation": "gfx950", "runtime": "rocm",
          "libraries": {"flydsl": "0.5.0", "torch": "2.13.0"}}
H200 = {"device": "NVIDIA H200", "generation": "sm_90", "runtime": "cuda", "libraries": {"torch": "2.13.0"}}
CPU = {"device": "cpu (x86_64)", "generation": "x86_64", "runtime": "cpu", "libraries": {}}


def record(**over: Any) -> dict[str, Any]:
    """A valid record for the block-scale card; keyword arguments replace fields."""
    base = {
        "card_id": BLOCKSCALE,
        "shape": "4096x2048x7168",
        "baseline": {"name": "ck_blockscale", "time_ms": 0.2},
        "candidate": {"name": "flydsl_8wave", "time_ms": 0.19},
        "verdict": "FASTER",
        "speedup": 1.0526,
        "interval": [1.04, 1.06],
        "parity": {"cosine": 1.0, "max_abs": 0.03125, "mismatches": 0},
        "parity_passed": True,
        "platform": copy.deepcopy(GFX950),
        "git_rev": "41a379d",
        "recorded_by": "test-agent",
        "source": "manual",
    }
    base.update(over)
    return base


def make_project(tmp: Path, cards: tuple[str, ...] = (BLOCKSCALE, MXFP8, MOE)) -> Path:
    """A project folder with copies of the cards and of their kernel folders (problem,
    probes, ...), so lint and re-verification see a whole project. Returns the skills folder."""
    skills = tmp / "skills"
    for cid in cards:
        shutil.copytree(SKILLS / cid, skills / cid)
        shutil.copytree(REPO / "kernels" / cid, tmp / "kernels" / cid,
                        ignore=shutil.ignore_patterns("__pycache__", "gfx950_targets.py"))
    return skills


# ------------------------------------------------------------------ verifier reports
def output_metrics(cosine: float = 1.0, max_abs: float = 0.0, mismatches: int = 0):
    from verifiers.judge.metrics import OutputMetrics

    return OutputMetrics(numel=16, nonfinite=0, mismatches=mismatches, max_abs=max_abs, rel_l2=max_abs / 10,
                         cosine=cosine, norm_ratio=1.0)


def shape_report(shape: str, speedup: float | None, verdict: str | None = None, parity_ok: bool = True,
                 hidden: bool = False, baseline: str | None = None):
    """One ``verifiers.report.ShapeReport`` as the verifier writes it (timing arm A = baseline)."""
    from verifiers.judge.metrics import OracleStats
    from verifiers.judge.parity import OutputComparison, ParityCase, ParityResult
    from verifiers.report import ShapeReport, StageResult
    from verifiers.judge.timing import Comparison, TimingResult

    m = output_metrics(1.0 if parity_ok else 0.5, 0.01 if parity_ok else 3.0, 0 if parity_ok else 12)
    case = ParityCase(shape=shape, seed=0, status="PASS" if parity_ok else "FAIL", outputs=[OutputComparison(
        output="out", oracle=OracleStats(numel=16, std=1.0, nonfinite=0, max_abs=4.0), candidate=m, candidate_run2=m,
        baseline=output_metrics(1.0, 0.02), runs_agree=True, run_disagreements=0)])
    parity = ParityResult(status="PASS" if parity_ok else "FAIL", cases=[case],
                          reason="" if parity_ok else "12 elements out of tolerance")
    stages = {"parity": StageResult(name="parity", status=parity.status, reason=parity.reason)}
    timing = None
    if speedup is not None and not hidden and parity_ok:
        v = verdict or ("FASTER" if speedup > 1.01 else "SLOWER" if speedup < 0.99 else "NO_DIFFERENCE")
        timing = TimingResult(status="PASS", verdict=v if v in ("FASTER", "SLOWER", "NO_DIFFERENCE") else None,
                              ab=Comparison(name="A/B", arm_a="baseline", arm_b="candidate", calls_per_block=3,
                                            speedup=speedup, ci_low=speedup * 0.99, ci_high=speedup * 1.01,
                                            median_a_ms=speedup, median_b_ms=1.0))
        stages["timing"] = StageResult(name="timing", status="PASS")
    final = ("FAIL" if not parity_ok else "INCONCLUSIVE" if hidden or speedup is None
             else verdict or timing.verdict)  # type: ignore[union-attr]
    return ShapeReport(shape=shape, hidden=hidden, verdict=final, stages=stages, parity=parity, timing=timing,
                       baseline_arm=baseline, dims=None if hidden else _dims(shape))


def _dims(shape: str) -> dict[str, int] | None:
    parts = shape.split("x")
    return dict(zip("MNK", map(int, parts))) if len(parts) == 3 and all(p.isdigit() for p in parts) else None


_REPORTS = itertools.count()


def report_platform(platform: dict) -> dict:
    """verification_report() keyword arguments for one of GFX950 / H200 / CPU."""
    props = {"rocm": {"gcnArchName": f"{platform.get('generation')}:sramecc+:xnack-"},
             "cuda": {"capability": "9.0"}, "cpu": {}}[platform["runtime"]]
    return {"platform": platform["runtime"], "device": platform["device"], "props": props,
            "machine": platform.get("generation") if platform["runtime"] == "cpu" else "x86_64"}


def verification_report(problem: str, rows: list, platform: str = "rocm", device: str = "AMD Instinct MI355X",
                        props: dict | None = None, candidate: str = "arm:x", machine: str = "x86_64"):
    """A VerificationReport as the verifier writes it (each one distinct: a real report
    carries its own time and secret seeds)."""
    from verifiers.report import VerificationReport

    rep = VerificationReport(problem=problem, card_id=problem, candidate=candidate, shape_reports=rows,
                             baseline=next((r.baseline_arm for r in rows if r.baseline_arm), None))
    rep.provenance.platform, rep.provenance.device_name = platform, device
    rep.provenance.device_properties = props if props is not None else {"gcnArchName": "gfx950:sramecc+:xnack-"}
    rep.provenance.torch_version, rep.provenance.git_revision, rep.provenance.git_dirty = "2.13.0", "41a379d7", True
    rep.provenance.machine = machine
    rep.provenance.harness_digest = "ab" * 32
    rep.provenance.time_utc = f"2026-07-20T10:00:00+00:00#{next(_REPORTS)}"
    return rep


# ------------------------------------------------------------ child-process workers
def write_records(path: str, worker: int, count: int) -> None:
    """Record ``count`` results one transaction each (a concurrent writer)."""
    from skill_server.ledger.results import Ledger, validate_record

    ledger = Ledger(path)
    for i in range(count):
        rec = validate_record(record(notes=f"worker {worker} record {i}", shape=f"{64 * (worker + 1)}x{128 + i}x256"),
                              known_cards=CARDS)
        ledger.record([rec])


def write_until_killed(path: str, stop_at: int, marker: str) -> None:
    """Record results; on record number ``stop_at`` stop *inside* the transaction (after
    the result row, before its arm rows), tell the parent and wait to be killed."""
    from skill_server.ledger import results as ledger_mod
    from skill_server.ledger import sql as ledger_sql
    calls = {"n": 0}

    def hook(_rec: Any) -> None:
        calls["n"] += 1
        if calls["n"] == stop_at:
            Path(marker).write_text("in transaction")
            time.sleep(120)

    ledger_sql.TEST_HOOK_AFTER_RESULT_ROW = hook
    led = ledger_mod.Ledger(path)
    for i in range(stop_at + 5):
        led.record([ledger_mod.validate_record(record(notes=f"record {i}"), known_cards=CARDS)])


def write_forever(path: str, marker: str) -> None:
    """Record batches of results in a loop until killed (for a kill at a random moment)."""
    from skill_server.ledger.results import Ledger, validate_record

    led = Ledger(path)
    batch = [validate_record(record(notes="x" * 2000, shape=f"{64 * (j + 1)}x1024x1024"), known_cards=CARDS)
             for j in range(5)]
    first = True
    while True:
        led.record(batch)
        if first:
            Path(marker).write_text("started")
            first = False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True

"""The precision bench's plan (issue 23): a part never starts a job it cannot finish inside
its budget, says which it skipped, and its table puts the measured power difference beside
the nominal one. Pure bookkeeping: no verification runs here."""
from __future__ import annotations

import importlib.util
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("verifier_precision_bench", ROOT / "bench" / "verifier_precision.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_job_that_would_not_fit_the_budget_is_skipped_and_listed():
    bench = _bench()
    log: list[dict] = []
    run = bench.Runner(bench.GPU, 100.0, log, lambda: None, "gpu")
    assert run.left("aa", "aa0")  # 14 s expected, 100 s left
    run.expect["aa"] = 30.0
    run.deadline = time.monotonic() + 20.0
    assert not run.left("aa", "aa5")  # 30 s expected, 20 s left: not started
    assert run.skipped == ["aa: aa5"]
    assert run.left("power_big", "extra_big #0")  # 9 s fits
    assert not run.left("reverify", "all cards", 120.0)


def test_the_expected_time_follows_the_groups_recent_runs():
    bench = _bench()
    log = [{"group": "aa", "verdict": "NO_DIFFERENCE", "seconds": s} for s in (28.0, 12.0, 11.0)]
    run = bench.Runner(bench.GPU, 500.0, log, lambda: None, "gpu")
    run.learn("aa", {"verdict": "NO_DIFFERENCE", "seconds": 12.5})
    assert run.expect["aa"] == 12.5  # the first, slow run (template start-up) no longer counts
    run.learn("aa", {"verdict": "BENCH_ERROR", "seconds": 0.1})
    assert run.expect["aa"] == 12.5


def test_the_cpu_smoke_always_runs_its_first_aa_and_attack():
    bench = _bench()
    log: list[dict] = []
    run = bench.Runner(bench.CPU, 0.0, log, lambda: None, "cpu")
    assert run.left("aa", "aa0") and run.left("attack", "timing_patcher")
    assert not run.left("twin", "twin vs baseline")
    log.append({"group": "aa", "verdict": "NO_DIFFERENCE", "seconds": 20.0})
    assert not run.left("aa", "aa1")


def test_the_table_gives_the_measured_power_difference_beside_the_nominal():
    bench = _bench()

    def row(group, speedup, verdict):
        return {"group": group, "name": group, "verdict": verdict, "seconds": 8.0,
                "shapes": [{"speedup": speedup, "ci_low": speedup, "ci_high": speedup, "half_width": 0.001}]}

    rows = [row("power_big", 1 / 1.03, "SLOWER"), row("power_big", 1 / 1.031, "SLOWER"),
            row("mirror_big", 1.029, "FASTER"), row("power_small", 1 / 1.01, "SLOWER")]
    text = bench.table({"rows": rows, "smoke": False})
    big = next(line for line in text.splitlines() if line.startswith("| power_big"))
    assert "nominal 3 %" in big and "measured 3.05%" in big, big
    mirror = next(line for line in text.splitlines() if line.startswith("| mirror_big"))
    assert "measured 2.90%" in mirror, mirror
    small = next(line for line in text.splitlines() if line.startswith("| power_small"))
    assert "nominal 1 %" in small and "measured 1.00%" in small, small


def test_the_reverify_row_holds_its_time_against_the_goal_and_the_twin_shapes():
    bench = _bench()
    rv = {"rc": 0, "seconds": 280.0, "cards": [
        {"card": "flydsl_fp8_blockscale_gemm", "status": "NOT_APPLICABLE_HERE",
         "shapes": [{"shape": "4096x2048x7168", "verdict": "SLOWER", "speedup": 0.2}]},
        {"card": "flydsl_mxfp8_8wave_gemm", "status": "NOT_APPLICABLE_HERE", "shapes": []}]}
    text = bench.table({"rows": [], "reverify": rv})
    line = next(x for x in text.splitlines() if "skill-server reverify" in x)
    assert "280.0 s" in line and line.endswith("| <= 300 s | yes |"), line
    twin = next(x for x in text.splitlines() if x.startswith("| twin vs baseline (reverify"))
    assert "4096x2048x7168 SLOWER 0.200" in twin, twin
    rv["seconds"] = 331.0
    assert bench.table({"rows": [], "reverify": rv}).count("**no**") == 1


def test_the_twenty_power_pairs_are_split_between_the_parts():
    bench = _bench()
    cfg = dict(bench.GPU)
    assert bench._pairs(cfg, 1) == (0, 10) and bench._pairs(cfg, 2) == (10, 20)
    cfg["pairs"] = (8, 20)  # part 1 ran out of time after 8 pairs: part 2 makes the rest
    assert bench._pairs(cfg, 2) == (8, 20)

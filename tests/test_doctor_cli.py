"""`skill-server doctor` on this CPU box: runs in under a minute, exits 0, says what it cannot
check here and why, and prints JSON and text from the same model."""
from __future__ import annotations

import pytest
from doctor_support import blocker_dir, by_id, doctor_json, run_doctor_cli

from skill_server.doctor.model import DoctorFindings
from skill_server.doctor.plan import CHECKS

GPU_CHECKS = ("device", "caches", "flush_eviction", "kernel_names")


@pytest.fixture(scope="module")
def full_report():
    return doctor_json()


def test_doctor_runs_every_check_in_under_a_minute_and_exits_0(full_report):
    report, wall = full_report
    assert wall < 60, f"doctor took {wall:.1f} s"
    model = DoctorFindings.model_validate(report)
    ids = [c.id for c in model.checks]
    plain = [c.id for c in CHECKS if c.id not in ("cards", "card_tools")]
    card_tools = ["aiter"]  # the block-scale card's doctor_checks.py (its ROCm baseline)
    assert [i for i in ids if not i.startswith("card:") and i not in card_tools] == plain
    assert [i for i in ids if i in card_tools] == card_tools
    cards = [i for i in ids if i.startswith("card:")]
    assert sorted(cards) == ["card:flydsl_fp8_blockscale_gemm", "card:flydsl_mxfp8_8wave_gemm",
                             "card:flydsl_prefill_moe_stage2_fp8partial"]
    assert sum(model.summary.counts.values()) == len(model.checks)


def test_gpu_checks_are_not_applicable_here_with_the_reason(full_report):
    checks = by_id(full_report[0])
    for cid in GPU_CHECKS:
        assert checks[cid]["status"] == "not_applicable", checks[cid]
        assert "no GPU" in checks[cid]["finding"] and "CPU build" in checks[cid]["finding"], checks[cid]
    assert checks["rocm"]["status"] == "not_applicable" and "not a ROCm box" in checks["rocm"]["finding"]
    assert checks["aiter"]["status"] == "not_applicable" and "ROCm-only" in checks["aiter"]["finding"]
    # the runtimes check still loads what it can and says why nothing is loaded here
    assert checks["runtimes"]["status"] == "not_applicable"
    assert "libamdhip64.so.7" in checks["runtimes"]["finding"]


def test_what_works_on_cpu_is_checked_for_real(full_report):
    checks = by_id(full_report[0])
    assert checks["torch"]["status"] == "ok" and checks["torch"]["details"]["version"].startswith("2.")
    assert checks["linker"]["status"] == "ok" and "LLD" in checks["linker"]["details"]["version"]
    assert checks["flydsl"]["status"] == "ok" and checks["flydsl"]["details"]["expected"] == "0.5.0"
    floor = checks["timer_floor"]
    assert floor["status"] == "ok" and floor["details"]["samples"] == 200 and floor["details"]["median_us"] > 0
    assert "aten::" in checks["profiler"]["finding"]
    # the block-scale card's capability probe is false for the FlyDSL wheel; its fallback kernel is present
    card = checks["card:flydsl_fp8_blockscale_gemm"]
    assert card["status"] == "warn" and "fallback" in card["finding"]
    assert "check-kernel flydsl_fp8_blockscale_gemm" in card["fix"]


def test_text_and_json_come_from_one_model(full_report, tmp_path):
    model = DoctorFindings.model_validate(full_report[0])
    text = model.text().splitlines()
    assert len(text) == len(model.checks) + 2  # header, one line per check, summary
    assert text[-1] == model.summary.line
    proc, _ = run_doctor_cli("--check", "linker")
    assert proc.returncode == 0 and proc.stdout.splitlines()[1].split()[:2] == ["ok", "linker"]


def test_doctor_needs_neither_mcp_nor_triton_nor_flydsl(tmp_path):
    """The H200 image carries torch (and pydantic, pyyaml) but maybe not mcp: the doctor's import
    path must not need it, and missing libraries are named, never a traceback."""
    blocked = blocker_dir(tmp_path, mcp="missing", triton="missing", flydsl="missing")
    report, _ = doctor_json("--check", "torch", "--check", "flydsl", "--check", "triton", "--check", "cards",
                            pythonpath_first=blocked)
    checks = by_id(report)
    assert checks["torch"]["status"] == "ok"
    assert checks["flydsl"]["status"] == "missing" and checks["flydsl"]["fix"] == "pip install flydsl==0.5.0"
    assert checks["triton"]["status"] == "missing" and "pip install triton" in checks["triton"]["fix"]
    assert all(k.startswith("card:") for k in checks if k not in ("torch", "flydsl", "triton"))


def test_unknown_check_or_bad_budget_is_a_clear_error():
    proc, _ = run_doctor_cli("--check", "gpu_magic")
    assert proc.returncode == 2 and "unknown doctor check(s) ['gpu_magic']" in proc.stderr and "linker" in proc.stderr
    proc, _ = run_doctor_cli("--budget", "0")
    assert proc.returncode == 2 and "--budget must be a positive" in proc.stderr
    assert "Traceback" not in proc.stderr

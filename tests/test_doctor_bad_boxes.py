"""Bad boxes: a broken ROCm tree, a missing torch, a check that hangs, a check that crashes its
process. Doctor names each missing or broken piece, exits 0, and one bad check never takes
the others (or the whole run) down with it."""
from __future__ import annotations

import subprocess

from doctor_support import blocker_dir, broken_rocm_tree, by_id, doctor_json


def _no_process_left(marker: str) -> bool:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return not any(marker in line for line in out.splitlines())


def test_broken_rocm_tree_is_named_piece_by_piece(tmp_path):
    root = broken_rocm_tree(tmp_path, linker='echo "ld.lld: error while loading shared libraries: libLLVM.so.19" >&2; exit 127',
                            rocprof="echo 'ImportError: rocpd' >&2; exit 1")
    report, _ = doctor_json("--check", "rocm", "--check", "linker", "--check", "rocprofv3",
                            env={"ROCM_PATH": str(root)})
    checks = by_id(report)
    assert checks["rocm"]["status"] == "failed" and f"ROCM_PATH={root} is not a ROCm install" in checks["rocm"]["finding"]
    linker = checks["linker"]
    assert linker["status"] == "failed" and str(root / "llvm/bin/ld.lld") in linker["finding"]
    assert "exited 127" in linker["finding"] and "libLLVM.so.19" in linker["finding"] and "rocm-llvm" in linker["fix"]
    assert checks["rocprofv3"]["status"] == "failed" and "exited 1" in checks["rocprofv3"]["finding"]
    assert report["summary"]["to_fix"] == ["rocm", "linker", "rocprofv3"]


def test_rocm_path_that_does_not_exist(tmp_path):
    report, _ = doctor_json("--check", "rocm", env={"ROCM_PATH": str(tmp_path / "nowhere")})
    rocm = by_id(report)["rocm"]
    assert rocm["status"] == "failed" and "does not exist" in rocm["finding"] and "ROCM_PATH" in rocm["fix"]


def test_missing_torch_names_it_and_everything_that_needs_it_says_so(tmp_path):
    blocked = blocker_dir(tmp_path, torch="missing")
    report, _ = doctor_json("--check", "torch", "--check", "device", "--check", "timer_floor", "--check", "caches",
                            "--check", "linker", pythonpath_first=blocked)
    checks = by_id(report)
    assert checks["torch"]["status"] == "missing" and "pip install torch" in checks["torch"]["fix"]
    for cid in ("device", "timer_floor", "caches"):
        assert checks[cid]["status"] == "not_applicable", checks[cid]
        assert "needs an importable torch" in checks[cid]["finding"] or "needs a usable GPU" in checks[cid]["finding"]
    assert checks["linker"]["status"] == "ok"  # what does not need torch is still checked


def test_a_hung_check_is_timed_out_and_the_rest_still_run(tmp_path):
    blocked = blocker_dir(tmp_path, triton="hang")
    report, wall = doctor_json("--check", "triton", "--check", "linker", "--check", "rocprofv3", "--check-timeout", "4",
                               pythonpath_first=blocked)
    checks = by_id(report)
    assert checks["triton"]["status"] == "failed" and checks["triton"]["finding"].startswith("timed out after 4 s")
    assert checks["linker"]["status"] == "ok" and checks["rocprofv3"]["status"] == "not_applicable"
    assert wall < 30
    assert _no_process_left(str(blocked)), "the hung check process was left running"


def test_a_hung_tool_is_killed_with_its_process_group(tmp_path):
    root = broken_rocm_tree(tmp_path, linker=f"sleep 600 # {tmp_path.name}")
    report, wall = doctor_json("--check", "linker", "--check", "rocm", "--check-timeout", "4",
                               env={"ROCM_PATH": str(root)})
    checks = by_id(report)
    assert checks["linker"]["status"] == "failed" and "timed out after 4 s" in checks["linker"]["finding"]
    assert checks["rocm"]["status"] == "failed"
    assert wall < 30
    assert _no_process_left(tmp_path.name), "the hung ld.lld outlived the doctor"


def test_a_crashing_check_is_reported_with_its_signal(tmp_path):
    blocked = blocker_dir(tmp_path, triton="crash")
    report, _ = doctor_json("--check", "triton", "--check", "linker", pythonpath_first=blocked)
    checks = by_id(report)
    assert checks["triton"]["status"] == "failed" and "died (signal 11, SIGSEGV) during this check" in checks["triton"]["finding"]
    assert checks["linker"]["status"] == "ok"


def test_the_budget_bounds_the_whole_run(tmp_path):
    blocked = blocker_dir(tmp_path, triton="hang")
    report, wall = doctor_json("--check", "triton", "--check", "rocprofv3", "--budget", "4", pythonpath_first=blocked)
    checks = by_id(report)
    assert wall < 20
    assert checks["triton"]["status"] == "failed" and "budget ran out during this check" in checks["triton"]["finding"]
    assert checks["rocprofv3"]["status"] == "failed" and "budget was spent" in checks["rocprofv3"]["finding"]

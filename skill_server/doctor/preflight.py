"""Before a verification: refuse, with the doctor's own line, on a box that cannot run it.

The verify front ends (``skill-server verify``, the service's ``verify`` behind the MCP tool)
call :func:`verify_refusal`; None means go ahead. It runs the doctor's checks a verification
depends on (``doctor_plan.VERIFY_CHECKS``: torch, the GPU, one HIP/CUDA runtime, the
profiler; the profiler only when the run profiles) in the doctor's check process, with its
time limits, so a broken ROCm install that would hang the verifier's worker refuses in
seconds instead. A CPU build of torch asked for ``auto`` or ``cpu`` verifies on the CPU by
design (CI does): that case is answered from torch's ``version.py`` without importing it.
The arms' own needs (aiter for the CK baseline) are refused by the arms with their own line.
"""
from __future__ import annotations

import importlib.util
import re
import threading
import time
from pathlib import Path

from skill_server.doctor import runner as doctor_runner
from skill_server.doctor.plan import VERIFY_CHECKS
from skill_server.doctor.result import BLOCKING, CheckResult

PREFLIGHT_BUDGET_S = 60.0
# A long-lived server verifies many times on one box: a passed preflight is remembered for this
# long per (device, profile), so each run_verifier call does not pay a doctor process (10-20 s on
# a GPU box). A refusal is never remembered: fixing the box takes effect on the next call, and a
# box that breaks within the window still fails in the verifier itself (ERROR, with its reason).
PASSED_TTL_S = 600.0
_passed: dict[tuple[str, bool], float] = {}
_passed_lock = threading.Lock()


def peek_torch_build() -> str | None:
    """``rocm`` / ``cuda`` / ``cpu`` from the installed torch's ``version.py`` (not imported);
    None when torch is absent or the file does not say."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        text = (Path(list(spec.submodule_search_locations)[0]) / "version.py").read_text()
    except OSError:
        return None
    found = {}
    for name in ("hip", "cuda"):
        m = re.search(rf"^{name}\s*(?::[^=\n]*)?=\s*(.+?)\s*$", text, re.MULTILINE)
        if m is None:
            return None
        found[name] = m.group(1) not in ("None", "''", '""')
    return "rocm" if found["hip"] else "cuda" if found["cuda"] else "cpu"


def _line(check: CheckResult) -> str:
    fix = f" (fix: {check.fix})" if check.fix else ""
    return f"doctor {check.id}: {check.status}: {check.finding}{fix}"


def verify_refusal(device: str | None = None, profile: bool = True, budget_s: float = PREFLIGHT_BUDGET_S) -> str | None:
    """None when this box can run a verification on ``device`` (auto | cpu | cuda[:N]), else
    the doctor's lines for what is missing, one per check, joined by newlines."""

    choice = (device or "auto").strip().lower()
    # gfx950-emulated runs on the CPU; verify() itself names a missing FlyDSL / ld.lld / llvm-objdump
    wants_gpu = choice not in ("auto", "cpu", "gfx950-emulated")
    build = peek_torch_build()
    if build == "cpu" and not wants_gpu:
        return None
    if choice in ("cpu", "gfx950-emulated"):
        checks = ["torch"]
    elif build == "cpu":  # a GPU asked of a CPU build: the device check's line says so
        checks = ["torch", "device"]
    else:
        checks = [c for c in VERIFY_CHECKS if profile or c != "profiler"]
    key = (choice, bool(profile))
    with _passed_lock:
        if time.monotonic() - _passed.get(key, float("-inf")) < PASSED_TTL_S:
            return None
    report = doctor_runner.run_doctor(checks, budget_s=budget_s)
    lines = [_line(c) for c in report.checks if c.status in BLOCKING]
    if wants_gpu and not lines:
        device_check = next((c for c in report.checks if c.id == "device"), None)
        if device_check is not None and device_check.status == "not_applicable":
            lines.append(_line(device_check) + f"; --device {choice} needs a GPU")
    if lines and not wants_gpu and choice == "auto" and any(c.id == "device" and c.status in BLOCKING for c in report.checks):
        lines.append("to verify on the CPU of this box deliberately, pass --device cpu")
    if not lines:
        with _passed_lock:
            _passed[key] = time.monotonic()
    return "\n".join(lines) or None

"""Real conditions for the doctor tests: the CLI run as a user runs it, a ``sitecustomize``
that makes an import fail, hang or crash the process, and ROCm trees whose tools are broken."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# find_spec on a blocked name: "missing" raises ModuleNotFoundError, "hang" sleeps, "crash"
# kills the process with SIGSEGV (what a segfault inside a ROCm library looks like from outside)
_SITECUSTOMIZE = '''
import importlib.abc, os, signal, sys, time
_RULES = {rules!r}
class _DoctorTestBlocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        how = _RULES.get(name)
        if how == "missing":
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        if how == "hang":
            time.sleep(600)
        if how == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        return None
sys.meta_path.insert(0, _DoctorTestBlocker())
'''


def blocker_dir(tmp: Path, **rules: str) -> Path:
    """A folder whose sitecustomize applies ``rules`` (module name -> missing | hang | crash)."""
    folder = tmp / "sitecustomize_dir"
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(_SITECUSTOMIZE.format(rules=rules))
    return folder


def broken_rocm_tree(tmp: Path, linker: str = "exit 127", rocprof: str | None = None) -> Path:
    """``<tmp>/rocm`` holding an ``llvm/bin/ld.lld`` (and optionally ``bin/rocprofv3``) that are
    shell scripts running ``linker`` / ``rocprof``; no ``.info/version``, no HIP library."""
    root = tmp / "rocm"
    tools = [(root / "llvm" / "bin" / "ld.lld", linker)] + ([(root / "bin" / "rocprofv3", rocprof)] if rocprof else [])
    for path, body in tools:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    return root


def run_doctor_cli(*args: str, pythonpath_first: Path | None = None, env: dict[str, str] | None = None,
                   timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    """``python -m skill_server.cli.entry doctor ARGS`` in a fresh process; (result, wall seconds)."""
    full = dict(os.environ, **(env or {}))
    parts = ([str(pythonpath_first)] if pythonpath_first else []) + [str(REPO)]
    full["PYTHONPATH"] = os.pathsep.join(parts)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "skill_server.cli.entry", "doctor", *args], capture_output=True, text=True,
                          timeout=timeout, env=full, cwd=REPO)
    return proc, time.monotonic() - t0


def doctor_json(*args: str, **kw) -> tuple[dict, float]:
    proc, wall = run_doctor_cli("--json", *args, **kw)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    return json.loads(proc.stdout), wall


def by_id(report: dict) -> dict[str, dict]:
    return {c["id"]: c for c in report["checks"]}

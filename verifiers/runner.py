"""Run one worker subprocess with a time limit and stream its progress back.

Each shape is verified in a fresh ``python -m verifiers.worker verify`` process: nothing a
candidate does (patches, threads, allocator state, compiled caches in memory) survives into
the next shape. The parent sends a random nonce on the worker's stdin before the candidate
is imported; a report without it is not the harness's. The harness's own files are hashed
before and after: a candidate that edits them fails.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from verifiers import integrity, locations
from verifiers.options import VerifyOptions
from verifiers.report import STAGES, Flag, ShapeReport, StageResult
from verifiers.worker import PROGRESS_PREFIX

REPO_ROOT = Path(__file__).resolve().parent.parent
WorkerProgress = Callable[[int, int, str], None]


def worker_command(
    problem: str, candidate: str, shape: str, baseline: str | None, options: VerifyOptions,
    report_out: Path, label: str | None = None, hidden: bool = False,
) -> list[str]:
    cmd = [
        options.python or sys.executable, "-m", "verifiers.worker", "verify",
        "--problem", problem, "--candidate", candidate, "--shape", shape,
        "--options-json", options.model_dump_json(), "--report-out", str(report_out), "--nonce-stdin",
    ]
    if baseline:
        cmd += ["--baseline", baseline]
    if label:
        cmd += ["--label", label]
    if hidden:
        cmd.append("--hidden")
    return cmd


def _failed_report(label: str, hidden: bool, verdict: str, stage: str, status: str, reason: str, log: str) -> ShapeReport:
    report = ShapeReport(shape=label, hidden=hidden, verdict=verdict, log_tail=log)
    report.stages = {n: StageResult(name=n, status="SKIPPED", reason=f"worker did not finish ({stage})") for n in STAGES}
    report.stages[stage] = StageResult(name=stage, status=status, reason=reason)
    report.flags.append(Flag(code="worker", severity="fail", message=reason, shape=label))
    return report


def run_worker(
    problem: str,
    candidate: str,
    shape: str,
    baseline: str | None,
    options: VerifyOptions,
    progress: WorkerProgress | None = None,
    label: str | None = None,
    hidden: bool = False,
    extra_digest_files: list[Path] | None = None,
) -> ShapeReport:
    label = label or shape
    nonce = secrets.token_hex(16)
    digest_before = integrity.harness_digest(extra_digest_files)
    log: deque[str] = deque(maxlen=200)
    last = {"message": "starting", "candidate_imported": False}
    with tempfile.TemporaryDirectory(prefix="verifier-") as tmp:
        report_path = Path(tmp) / "shape_report.json"
        cmd = worker_command(problem, candidate, shape, baseline, options, report_path, label, hidden)
        env = dict(os.environ)
        env["PYTHONPATH"] = locations.child_pythonpath(env.get("PYTHONPATH"))  # a checkout first; a wheel is on the path
        env.setdefault("PYTHONUNBUFFERED", "1")
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1, cwd=os.getcwd(), env=env, start_new_session=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(nonce + "\n")
        proc.stdin.close()

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith(PROGRESS_PREFIX):
                    try:
                        msg = json.loads(line[len(PROGRESS_PREFIX):])
                    except ValueError:
                        log.append(line.rstrip("\n"))
                        continue
                    last["message"] = str(msg.get("message", ""))
                    if last["message"] == "candidate imported":
                        last["candidate_imported"] = True
                    if progress:
                        progress(int(msg.get("done", 0)), int(msg.get("total", 1)), f"{label}: {last['message']}")
                else:
                    log.append(line.rstrip("\n"))

        reader = threading.Thread(target=pump, name="verifier-worker-reader", daemon=True)
        reader.start()
        try:
            proc.wait(timeout=options.time_limit_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(proc)
        reader.join(timeout=10)
        elapsed = time.monotonic() - t0
        log_tail = "\n".join(log)[-6000:]
        if timed_out:
            return _failed_report(
                label, hidden, "FAIL", _stage_of(last["message"]), "FAIL",
                f"time limit of {options.time_limit_s:.0f} s exceeded during: {last['message']}", log_tail,
            )
        if not report_path.exists():
            # the harness catches its own errors and always writes a report: a process that
            # ended without one after importing the candidate was ended by the candidate
            culprit = last["candidate_imported"]
            return _failed_report(
                label, hidden, "FAIL" if culprit else "ERROR", _stage_of(last["message"]),
                "FAIL" if culprit else "ERROR",
                f"worker exited with code {proc.returncode} without a report during: {last['message']}", log_tail,
            )
        try:
            report = ShapeReport.model_validate_json(report_path.read_text())
        except (ValidationError, ValueError) as exc:
            return _failed_report(label, hidden, "ERROR", "load", "ERROR", f"unreadable worker report: {exc}", log_tail)
    if report.nonce != nonce:
        return _failed_report(
            label, hidden, "FAIL", "integrity", "FAIL",
            "the report does not carry the nonce the harness sent: it was not written by the harness", log_tail,
        )
    report.nonce = ""
    report.log_tail = log_tail
    digest_after = integrity.harness_digest(extra_digest_files)
    report.provenance.harness_digest = digest_before
    if digest_after != digest_before:
        report.stages["integrity"] = StageResult(
            name="integrity", status="FAIL", reason="the harness's source files changed during the run"
        )
        report.verdict = "FAIL"
    report.seconds = max(report.seconds, elapsed)
    return report


def _stage_of(message: str) -> str:
    m = message.lower()
    if m.startswith("parity"):
        return "parity"
    if "profil" in m:
        return "signature"
    if "warm-up" in m or "a/a" in m or "a/b" in m:
        return "timing"
    return "load"


def _kill(proc: subprocess.Popen) -> None:
    """Kill the worker's process group (it was started in its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass

"""Start the judge process for one verification, relay its progress, and check its work.

The caller's side of the trust boundary; it never imports torch or a candidate:

* the judge runs with a fresh copy of the trusted bytecode as its ``pycache_prefix``, in its
  own session, forked from a warm template or exec'd (``verifiers.launch.judge_launch``) with the
  arm allow-list as its initial environment; it gets a random key, the job and the caller's
  environment on stdin, and answers on its stdout with authenticated lines
  (``verifiers.ipc.channel``); a forged line fails the run;
* before the judge starts, the project's ``__pycache__`` folders are listed; the judge
  sends the digests of every source file it and the baseline arms loaded before any
  candidate process existed. After the judge ends (however it ends), every one of those
  files is hashed again and the bytecode audited (``verifiers.launch.files``): a change fails
  every shape, and a planted ``.pyc`` is deleted;
* a time limit covers the whole judge; on expiry it is asked to stop (SIGTERM), then its
  process group is killed. A judge that ends without a report after the candidate was
  started is the candidate's doing (FAIL); before, it is the harness's (ERROR).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from verifiers import locations
from verifiers.launch import bytecode
from verifiers.ipc import channel
from verifiers.launch import files
from verifiers.launch import judge_launch
from verifiers.arms import sandbox
from verifiers.arms.candidate import CandidateSpec
from verifiers.ipc.job import JudgeJob
from verifiers.options import VerifyOptions
from verifiers.report import STAGES, Flag, ShapeReport, StageResult

REPO_ROOT = locations.CODE_ROOT
STARTUP_ALLOWANCE_S = 180.0
# an arm's prepare step (a CK JIT build: minutes) runs outside the time limit, up to this long
PREPARE_LIMIT_S = 3600.0
Progress = Callable[[int, int, str], None]


@dataclass
class _Listen:
    reader: channel.Reader
    progress: Progress | None
    manifest: dict[str, str | None] = field(default_factory=dict)
    prefixes: list[dict[str, Any]] = field(default_factory=list)
    candidate_started: bool = False
    preparing_since: float | None = None  # the judge runs an arm's prepare step: the limit pauses
    prepared_s: float = 0.0
    result: dict[str, Any] | None = None
    tamper: str | None = None
    last: str = "starting the judge"
    log: deque = field(default_factory=lambda: deque(maxlen=300))


def failed_report(label: str, hidden: bool, verdict: str, stage: str, status: str, reason: str,
                  log: str = "") -> ShapeReport:
    report = ShapeReport(shape=label, hidden=hidden, verdict=verdict, log_tail=log)
    report.stages = {n: StageResult(name=n, status="SKIPPED", reason=f"not reached ({stage})") for n in STAGES}
    report.stages[stage] = StageResult(name=stage, status=status, reason=reason)
    report.flags.append(Flag(code="judge", severity="fail" if status in ("FAIL", "ERROR") else "warn",
                             message=reason, shape=label))
    return report


class VerifyCancelled(Exception):
    """The caller cancelled the verification (``cancel`` was set): the judge and its arms
    were stopped and no report exists."""


def run_judge(problem: str, candidate: CandidateSpec, shapes: list[str], baseline: str | None,
              baselines: dict[str, str], options: VerifyOptions, progress: Progress | None = None,
              hidden_labels: list[str] | None = None, cancel: threading.Event | None = None) -> list[ShapeReport]:
    """Verify every shape in one judge process; the shape reports, visible then hidden.
    ``cancel`` set while it runs stops the judge (its process group) and raises VerifyCancelled;
    so does any exception in this thread (a KeyboardInterrupt on SIGINT included)."""
    hidden_labels = hidden_labels or []
    key = channel.new_key()
    # on a GPU the arms share /dev/shm (torch's IPC reference counters), so the run's folders go elsewhere
    shm_shared = sandbox.may_use_gpu(options.device)
    work = Path(tempfile.mkdtemp(prefix="verifier-run-", dir=None if shm_shared else bytecode.scratch_root()))
    prefix = bytecode.CACHE.fresh_prefix()
    pycache_before = files.pycache_snapshot()
    job = JudgeJob(problem=problem, candidate=candidate, baseline=baseline, baselines=dict(baselines), shapes=shapes,
                   options=options, sys_path=[p for p in sys.path if p], cwd=os.getcwd(), work_dir=str(work),
                   secrets=sandbox.secret_paths())
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    listen = _Listen(channel.Reader(key), progress)
    t0 = time.monotonic()
    proc = judge_launch.launch(prefix, env, job.sys_path, job.cwd or "/", listen.log)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        try:  # the preamble, then the envelope (verifiers.launch.judge_start); stdin then stays open:
            # the judge watches it, and its end of file (this process gone, however) stops the judge
            proc.stdin.write(json.dumps({"sys_path": job.sys_path}) + "\n")
            proc.stdin.write(json.dumps({"key": key, "job": job.model_dump(mode="json"), "env": env}) + "\n")
            proc.stdin.flush()
        except OSError:
            pass
        readers = [threading.Thread(target=_pump_channel, args=(proc, listen), daemon=True),
                   threading.Thread(target=_pump_log, args=(proc.stderr, listen.log), daemon=True)]
        for r in readers:
            r.start()
        limit = options.time_limit_s * max(len(shapes), 1) + STARTUP_ALLOWANCE_S
        timed_out = _wait(proc, listen, t0, limit, cancel)
    except BaseException:
        _stop(proc)
        shutil.rmtree(work, ignore_errors=True)
        bytecode.remove(prefix)
        raise
    _stop(proc)
    if cancel is not None and cancel.is_set():
        shutil.rmtree(work, ignore_errors=True)
        bytecode.remove(prefix)
        raise VerifyCancelled("the verification was cancelled; its judge and arms were stopped")
    for r in readers:
        r.join(timeout=10)
    elapsed = time.monotonic() - t0
    log_tail = "\n".join(listen.log)[-6000:]
    reports = _reports(listen, shapes, hidden_labels, timed_out, limit, proc.returncode, log_tail)
    # -- what the judge relied on, checked after it is gone
    changes = files.changed(listen.manifest, files.digest_files(listen.manifest)) if listen.manifest else []
    planted = files.audit_pycache(pycache_before, files.pycache_snapshot())
    problems = [f"file {c}" for c in changes] + [f"planted bytecode deleted: {p}" for p in planted]
    if not listen.manifest and listen.candidate_started:
        problems.append("the judge never sent its file manifest")
    for report in reports:
        if problems:
            report.integrity_changes += problems
            report.stages["integrity"] = StageResult(name="integrity", status="FAIL",
                                                     reason="files changed during the run: " + "; ".join(problems[:6]))
            report.verdict = "FAIL"
        report.seconds = max(report.seconds, elapsed)
    for entry in listen.prefixes:
        try:
            bytecode.CACHE.merge(Path(entry["dir"]), {str(k): str(v) for k, v in dict(entry["digests"]).items()})
        except (KeyError, TypeError, ValueError, OSError):
            pass
    shutil.rmtree(work, ignore_errors=True)
    bytecode.remove(prefix)
    return reports


def _wait(proc: judge_launch.JudgeProcess, listen: _Listen, t0: float, limit: float,
          cancel: threading.Event | None = None) -> bool:
    """Wait for the judge; True when it ran past ``limit`` seconds, not counting the time its
    arms' prepare steps took (each bounded by PREPARE_LIMIT_S). Returns at once when
    ``cancel`` is set."""
    while True:
        try:
            proc.wait(timeout=0.25)
            return False
        except subprocess.TimeoutExpired:
            pass
        if cancel is not None and cancel.is_set():
            listen.last = "cancelled by the caller"
            return False
        now = time.monotonic()
        since = listen.preparing_since
        if since is not None:
            if now - since > PREPARE_LIMIT_S:
                listen.last = f"an arm's prepare step ran past {PREPARE_LIMIT_S:.0f} s"
                return True
            continue
        if now - t0 - listen.prepared_s > limit:
            return True


def _reports(listen: _Listen, shapes: list[str], hidden: list[str], timed_out: bool, limit: float,
             code: int | None, log: str) -> list[ShapeReport]:
    labels = [(s, False) for s in shapes] + [(h, True) for h in hidden]
    culprit = listen.candidate_started
    if listen.tamper:
        return [failed_report(lbl, hid, "FAIL", "integrity", "FAIL", listen.tamper, log) for lbl, hid in labels]
    if timed_out:
        reason = f"time limit of {limit:.0f} s exceeded during: {listen.last}"
        return [failed_report(lbl, hid, "FAIL" if culprit else "ERROR", "timing" if "A/B" in listen.last else "load",
                              "FAIL" if culprit else "ERROR", reason, log) for lbl, hid in labels]
    result = listen.result
    if result is None or "shapes" not in result:
        why = (result or {}).get("error") if result else None
        reason = (f"the judge ended (exit code {code}) without a report during: {listen.last}"
                  + (f" ({why})" if why else ""))
        status = "FAIL" if culprit and not why else "ERROR"
        return [failed_report(lbl, hid, status, "load", status, reason, log) for lbl, hid in labels]
    out = []
    try:
        for item in result["shapes"]:
            out.append(ShapeReport.model_validate(item))
    except (ValidationError, TypeError) as exc:
        return [failed_report(lbl, hid, "ERROR", "load", "ERROR", f"unreadable judge report: {exc}", log)
                for lbl, hid in labels]
    for report in out:
        report.log_tail = (report.log_tail + "\n" + log)[-6000:] if log else report.log_tail
    return out


def _pump_channel(proc: judge_launch.JudgeProcess, listen: _Listen) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        try:
            msg = listen.reader.parse(line)
        except channel.TamperError as exc:
            listen.tamper = f"{exc}: the report cannot be trusted"
            _kill_group(proc)
            continue
        if msg is None:
            listen.log.append(line.rstrip("\n")[:2000])
            continue
        payload = msg.payload if isinstance(msg.payload, dict) else {}
        if msg.kind == "progress":
            listen.last = str(payload.get("message", ""))[:300]
            if listen.progress:
                try:
                    listen.progress(int(payload.get("done", 0)), int(payload.get("total", 1)), listen.last)
                except Exception:
                    pass
        elif msg.kind == "manifest":
            listen.manifest.update({str(k): (None if v is None else str(v)) for k, v in dict(payload.get("files", {})).items()})
        elif msg.kind == "bytecode":
            listen.prefixes = [p for p in payload.get("prefixes", []) if isinstance(p, dict)]
        elif msg.kind == "candidate":
            listen.candidate_started = True
        elif msg.kind == "preparing" and not listen.candidate_started:
            if payload.get("active"):
                listen.preparing_since = listen.preparing_since or time.monotonic()
            elif listen.preparing_since is not None:
                listen.prepared_s += time.monotonic() - listen.preparing_since
                listen.preparing_since = None
        elif msg.kind == "result":
            if listen.result is not None:
                listen.tamper = "the judge's channel carried two results"
            listen.result = payload


def _pump_log(stream, log: deque) -> None:
    for line in stream:
        log.append(line.rstrip("\n")[:2000])


def _kill_group(proc: judge_launch.JudgeProcess) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


def _stop(proc: judge_launch.JudgeProcess) -> None:
    """Ask the judge to end (it kills its arms), then kill whatever is left in its group."""
    try:
        proc.stdin.close()  # the judge's watch on its stdin sees the end of file
    except (OSError, AttributeError):
        pass
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=5)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            pass
    _kill_group(proc)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass

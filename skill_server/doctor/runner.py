"""``skill-server doctor``: what a first run on this box needs, checked in under a minute.

The checks (``doctor_plan.CHECKS``) run in a check process (``doctor_child``) that reports
each one as it starts and ends; this process enforces a time limit per check and an overall
budget. A check that hangs (a broken driver call) or kills its process (a crash in a ROCm
library) is reported ``failed`` with what happened, the check process is killed with its
whole process group, and a fresh one carries on with the remaining checks. Doctor diagnoses,
it never fails: every outcome is a report.

This module imports neither torch nor the MCP SDK (pydantic and the stdlib only), so
``python -m skill_server.cli.entry doctor --json`` runs on an image with torch and nothing else.
"""
from __future__ import annotations

import os
import platform
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from verifiers import locations
from skill_server.doctor.result import CheckResult, result

from skill_server.doctor.child import ChildEvent, ChildRequest
from skill_server.doctor.model import DoctorFindings, summarise
from skill_server.doctor.plan import BY_ID, CheckSpec, blocked, select

DEFAULT_BUDGET_S = 55.0
#: interpreter start and the check process's own imports, before its first check
STARTUP_LIMIT_S = 20.0
LOG_TAIL_CHARS = 400
#: a server hands out a report this young again instead of starting another run
REUSE_S = 30.0


def _log_tail(log: Path) -> str:
    try:
        text = log.read_text(errors="replace").strip()
    except OSError:
        return ""
    return " | ".join(text[-LOG_TAIL_CHARS:].splitlines()[-3:])


def _died(proc: subprocess.Popen) -> str:
    code = proc.wait()
    if code < 0:
        try:
            return f"signal {-code}, {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def _kill(proc: subprocess.Popen) -> None:
    """Kill the check process and everything it started (it leads its own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


class _Run:
    """One doctor run: pending checks, results so far, the clock."""

    def __init__(self, specs: list[CheckSpec], budget_s: float, check_timeout_s: float | None,
                 skills_dir: str | None) -> None:
        self.pending = list(specs)
        self.done: dict[str, list[CheckResult]] = {}
        self.deadline = time.monotonic() + budget_s
        self.budget_s = budget_s
        self.check_timeout_s = check_timeout_s
        self.skills_dir = skills_dir

    def limit(self, spec: CheckSpec) -> float:
        limit = spec.limit_s if self.check_timeout_s is None else min(spec.limit_s, self.check_timeout_s)
        return max(0.0, min(limit, self.deadline - time.monotonic()))

    def record(self, spec: CheckSpec, results: list[CheckResult]) -> None:
        self.done[spec.id] = results
        self.pending = [p for p in self.pending if p.id != spec.id]

    def settle_blocked(self) -> None:
        """Resolve, without a process, the pending checks whose needs already failed."""
        for spec in list(self.pending):
            if all(need_id in self.done for need_id in _deciders(spec)):
                skipped = blocked(spec, self.done)
                if skipped is not None:
                    self.record(spec, [skipped])

    def out_of_budget(self) -> None:
        for spec in list(self.pending):
            self.record(spec, [result(spec.id, spec.title, "failed",
                                      f"not run: the doctor's {self.budget_s:.0f} s budget was spent by earlier checks",
                                      f"run `skill-server doctor --check {spec.id}` on its own")])

    def run_child(self) -> None:
        """Start a check process for the pending checks and follow it until it ends or is killed."""
        read_fd, write_fd = os.pipe()
        log = Path(tempfile.mkstemp(prefix="skill-doctor-", suffix=".log")[1])
        env = dict(os.environ, PYTHONPATH=locations.child_pythonpath(os.environ.get("PYTHONPATH")))
        request = ChildRequest(checks=[p.id for p in self.pending], prior=self.done, skills_dir=self.skills_dir)
        try:
            with log.open("wb") as log_fh:
                # -P: the caller's working directory is not put on the check process's import path
                proc = subprocess.Popen(
                    [sys.executable, "-P", "-m", "skill_server.doctor.child", str(write_fd)], stdin=subprocess.PIPE,
                    stdout=log_fh, stderr=subprocess.STDOUT, pass_fds=(write_fd,), env=env, start_new_session=True)
            os.close(write_fd)
            try:
                assert proc.stdin is not None
                proc.stdin.write(request.model_dump_json().encode())
                proc.stdin.close()
            except BrokenPipeError:
                pass
            self._follow(proc, read_fd, log)
        finally:
            os.close(read_fd)
            log.unlink(missing_ok=True)

    def _follow(self, proc: subprocess.Popen, read_fd: int, log: Path) -> None:
        sel = selectors.DefaultSelector()
        sel.register(read_fd, selectors.EVENT_READ)
        buffer = b""
        current: CheckSpec | None = None
        budget_bound = False
        until = time.monotonic() + min(STARTUP_LIMIT_S, max(0.0, self.deadline - time.monotonic()))
        try:
            while True:
                wait = until - time.monotonic()
                ready = sel.select(timeout=max(0.0, wait)) if wait > 0 else []
                if not ready:  # the current check (or the start-up) ran out of time
                    _kill(proc)
                    self._timed_out(current, log, budget_bound)
                    return
                chunk = os.read(read_fd, 65536)
                if not chunk:  # the check process ended
                    if current is not None:
                        self.record(current, [result(current.id, current.title, "failed",
                                                     f"the check process died ({_died(proc)}) during this check; "
                                                     f"its last output: {_log_tail(log) or 'none'}"[:600],
                                                     "a crash inside a driver or library: send this doctor JSON back "
                                                     "(and dmesg on a GPU box)")])
                    elif self.pending and proc.wait() != 0:
                        self._startup_failed(proc, log)
                    else:
                        proc.wait()
                    return
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    try:
                        event = ChildEvent.model_validate_json(line)
                        spec = BY_ID[event.id]
                    except (ValidationError, KeyError):
                        _kill(proc)
                        self._protocol_broken(current, line)
                        return
                    if event.event == "start":
                        current = spec
                        limit = self.limit(spec)
                        budget_bound = limit < self.limit_used(spec)
                        until = time.monotonic() + limit
                    else:
                        self.record(spec, event.results)
                        current = None
                        until = time.monotonic() + 5.0  # the next start event (or the end) follows at once
        finally:
            sel.close()
            if proc.poll() is None:
                _kill(proc)

    def _timed_out(self, current: CheckSpec | None, log: Path, budget_bound: bool) -> None:
        if current is None:
            if time.monotonic() >= self.deadline:
                return  # budget spent: out_of_budget reports the rest
            self._startup_failed(None, log, timed_out=True)
            return
        if budget_bound:
            self.record(current, [result(current.id, current.title, "failed",
                                         f"stopped: the doctor's {self.budget_s:.0f} s budget ran out during this check",
                                         f"run `skill-server doctor --check {current.id}` on its own")])
            return
        self.record(current, [result(current.id, current.title, "failed",
                                     f"timed out after {self.limit_used(current):.0f} s (a hung call: a broken driver, "
                                     f"ROCm install or tool?); its last output: {_log_tail(log) or 'none'}"[:600],
                                     f"run `skill-server doctor --check {current.id}` again; if it hangs again send the "
                                     "doctor JSON back (and dmesg on a GPU box)")])

    def _protocol_broken(self, current: CheckSpec | None, line: bytes) -> None:
        for spec in [current] if current is not None else list(self.pending):
            self.record(spec, [result(spec.id, spec.title, "failed",
                                      f"the check process sent an unreadable report: {line[:200]!r}",
                                      "send this doctor JSON back (a doctor bug)")])

    def limit_used(self, spec: CheckSpec) -> float:
        return spec.limit_s if self.check_timeout_s is None else min(spec.limit_s, self.check_timeout_s)

    def _startup_failed(self, proc: subprocess.Popen | None, log: Path, timed_out: bool = False) -> None:
        how = f"did not start within {STARTUP_LIMIT_S:.0f} s" if timed_out else f"ended ({_died(proc)}) before its first check"
        for spec in list(self.pending):
            self.record(spec, [result(spec.id, spec.title, "failed",
                                      f"the check process {how}: {_log_tail(log) or 'no output'}"[:600],
                                      f"check that `{sys.executable} -c 'import skill_server'` works here")])


def _deciders(spec: CheckSpec) -> set[str]:
    return {"torch" if need == "torch" else "device" for need in spec.needs}


def run_doctor(checks: list[str] | None = None, budget_s: float = DEFAULT_BUDGET_S,
               check_timeout_s: float | None = None, skills_dir: str | Path | None = None) -> DoctorFindings:
    """Run the doctor's checks (all, or ``checks`` with what they need) and report.

    ``budget_s`` bounds the whole run; ``check_timeout_s`` caps every check's own limit.
    Raises ValueError only for unknown check ids."""
    specs = select(checks)
    t0 = time.monotonic()
    run = _Run(specs, budget_s, check_timeout_s, str(skills_dir) if skills_dir else None)
    while run.pending:
        run.settle_blocked()
        if not run.pending:
            break
        if time.monotonic() >= run.deadline:
            run.out_of_budget()
            break
        before = len(run.pending)
        run.run_child()
        if len(run.pending) == before:  # nothing progressed: never loop on a process that cannot start
            run.out_of_budget()
            break
    ordered = [r for spec in specs for r in run.done.get(spec.id, [])]
    wall = time.monotonic() - t0
    return DoctorFindings(host=socket.gethostname(), python=platform.python_version(), generated_at=datetime.now(UTC),
                        wall_s=round(wall, 2), budget_s=budget_s, checks=ordered, summary=summarise(ordered, wall))


_shared_lock = threading.Lock()
_shared_last: tuple[float, tuple[tuple[str, ...], str], DoctorFindings] | None = None


def shared_run(checks: list[str] | None = None, skills_dir: str | Path | None = None,
               reuse_s: float = REUSE_S) -> DoctorFindings:
    """:func:`run_doctor` for a long-lived server: one run at a time (a caller that waited gets
    the report just made), and a report of the same checks younger than ``reuse_s`` again, so
    many clients asking at once cost one run."""
    global _shared_last
    key = (tuple(s.id for s in select(checks)), str(skills_dir))
    with _shared_lock:
        if _shared_last is not None and _shared_last[1] == key and time.monotonic() - _shared_last[0] < reuse_s:
            return _shared_last[2]
        report = run_doctor(checks, skills_dir=skills_dir)
        _shared_last = (time.monotonic(), key, report)
        return report

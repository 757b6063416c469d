"""The judge's view of the processes it started: their trees, their CPU clocks, stop/resume.

- The judge makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): a
  process an arm double-forks, or ``setsid``s away, is re-parented to the judge rather
  than to init, so it stays in the judge's tree and is seen (and killed).
- ``descendants`` walks ``/proc`` (parent links of every process): any process below an
  arm, or any child of the judge that is not an arm, is a process an arm started.
- ``children_cpu_s`` reads an arm's reaped-children CPU time (``cutime + cstime``): a
  helper that did work and was reaped between two checks still leaves it there.
- ``CpuClock`` reads another process's CPU time (every thread) with nanosecond
  resolution (``clock_getcpuclockid``): on CPU the judge times an arm with it, from its
  own process, so an arm cannot report its own time.
- ``stop`` / ``resume``: SIGSTOP / SIGCONT, waiting until the kernel shows the state.
- ``sched_profile``: what the scheduler and the resource limits grant a process (every
  thread's nice value, CPU affinity, policy and real-time priority; the process's rlimits).
  As root an arm can change these for *other* processes (Landlock mediates none of them):
  the judge compares the trusted processes' profiles while a candidate exists.

Linux only (the verifier's platforms: Linux CPU, CUDA and ROCm boxes).
"""
from __future__ import annotations

import ctypes
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36

_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, arg: int) -> bool:
    return _libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) == 0


def become_subreaper() -> bool:
    return prctl(PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent() -> bool:
    """The calling process gets SIGKILL when its parent exits (set before any arm code runs)."""
    return prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def make_undumpable() -> bool:
    """Other processes of the same (non-root) user can no longer ptrace this one or read
    its memory, environment or descriptors through /proc."""
    return prctl(PR_SET_DUMPABLE, 0)


def make_dumpable() -> bool:
    """Undo ``make_undumpable`` (a process forked from an undumpable one inherits it)."""
    return prctl(PR_SET_DUMPABLE, 1)


@dataclass(frozen=True)
class SchedProfile:
    threads: frozenset[tuple[int, tuple[int, ...], int, int]]  # (nice, CPUs, policy, rt priority) per thread
    limits: tuple[tuple[int, int, int], ...]  # (resource, soft, hard)

    def differences(self, now: "SchedProfile") -> list[str]:
        """What ``now`` has that this profile did not: thread settings no thread had, limits changed."""
        out = []
        for nice, cpus, policy, prio in sorted(now.threads - self.threads):
            out.append(f"a thread at nice {nice}, CPUs {_cpus(cpus)}, policy {policy}, priority {prio} "
                       f"(before: {'; '.join(_thread_text(t) for t in sorted(self.threads)) or 'none'})")
        before = {r: (soft, hard) for r, soft, hard in self.limits}
        for r, soft, hard in now.limits:
            if before.get(r) != (soft, hard):
                out.append(f"rlimit {_LIMIT_NAMES.get(r, r)} {before.get(r)} -> {(soft, hard)}")
        return out


def _cpus(cpus: tuple[int, ...]) -> str:
    return "{" + ",".join(map(str, cpus[:8])) + (",..." if len(cpus) > 8 else "") + "}"


def _thread_text(t: tuple[int, tuple[int, ...], int, int]) -> str:
    return f"nice {t[0]}, CPUs {_cpus(t[1])}, policy {t[2]}, priority {t[3]}"


def _limit_names() -> dict[int, str]:
    import resource

    return {getattr(resource, n): n for n in dir(resource) if n.startswith("RLIMIT_")}


_LIMIT_NAMES = _limit_names()


def sched_profile(pid: int) -> SchedProfile | None:
    """The profile of a live process (None once it is gone)."""
    import resource

    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return None
    threads = set()
    for tid in tids:
        try:
            threads.add((os.getpriority(os.PRIO_PROCESS, tid), tuple(sorted(os.sched_getaffinity(tid))),
                         os.sched_getscheduler(tid), os.sched_getparam(tid).sched_priority))
        except OSError:  # the thread ended meanwhile
            continue
    limits = []
    for r in sorted(_LIMIT_NAMES):
        try:
            soft, hard = resource.prlimit(pid, r)
        except (OSError, ValueError):
            continue
        limits.append((r, soft, hard))
    return SchedProfile(frozenset(threads), tuple(limits))


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    state: str
    comm: str
    cutime_ticks: int
    cstime_ticks: int


def proc_info(pid: int) -> ProcInfo | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm is in parentheses and may itself contain spaces or parentheses
    lo, hi = raw.find("("), raw.rfind(")")
    if lo < 0 or hi < 0:
        return None
    fields = raw[hi + 2:].split()
    try:
        return ProcInfo(pid=pid, ppid=int(fields[1]), state=fields[0], comm=raw[lo + 1: hi],
                        cutime_ticks=int(fields[13]), cstime_ticks=int(fields[14]))
    except (IndexError, ValueError):
        return None


def all_processes() -> dict[int, ProcInfo]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = proc_info(int(entry))
            if info is not None:
                out[info.pid] = info
    return out


def descendants(root: int, table: dict[int, ProcInfo] | None = None) -> list[ProcInfo]:
    """Every live process below ``root`` (zombies included), parents before children."""
    table = table if table is not None else all_processes()
    children: dict[int, list[ProcInfo]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info)
    out, stack = [], list(children.get(root, ()))
    while stack:
        info = stack.pop()
        out.append(info)
        stack.extend(children.get(info.pid, ()))
    return out


def children_cpu_s(pid: int) -> float | None:
    info = proc_info(pid)
    if info is None:
        return None
    return (info.cutime_ticks + info.cstime_ticks) / os.sysconf("SC_CLK_TCK")


def describe(info: ProcInfo) -> str:
    try:
        cmd = Path(f"/proc/{info.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = ""
    return f"pid {info.pid} ({info.comm}{': ' + cmd[:120] if cmd else ''})"


def kill_tree(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def reap_zombies() -> list[int]:
    """Reap every exited child of this process (orphans adopted as subreaper included)."""
    reaped = []
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped.append(pid)


class CpuClock:
    """Another process's CPU time (all its threads), read from this process."""

    def __init__(self, pid: int) -> None:
        clock = ctypes.c_int()
        err = _libc.clock_getcpuclockid(pid, ctypes.byref(clock))
        if err != 0:
            raise OSError(err, f"clock_getcpuclockid({pid}) failed: {os.strerror(err)}")
        self.pid, self.clock_id = pid, clock.value

    def ns(self) -> int:
        return time.clock_gettime_ns(self.clock_id)


def stop(pid: int, timeout_s: float = 2.0) -> bool:
    """SIGSTOP ``pid`` and wait until it shows as stopped; False if it is gone."""
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = proc_info(pid)
        if info is None or info.state in ("Z", "X"):
            return False
        if info.state in ("T", "t"):
            return True
        time.sleep(0.0002)
    return False


def resume(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass

"""The judge's handle on one arm process: start it, ask it one thing at a time, stop it.

Every request has a deadline. Whatever goes wrong on the arm's side (it exits, crashes,
closes its socket, answers late, answers garbage, or its code raises) becomes an
``ArmFailure`` naming the arm and what it was asked to do; the judge then blames the
arm's owner (the candidate: FAIL; a baseline: ERROR) and never crashes itself.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from verifiers import locations
from verifiers.arms.env import arm_environment
from verifiers.arms.zygote import BOOT, main
from verifiers.ipc import wire
from verifiers.launch import procwatch

REPO_ROOT = locations.CODE_ROOT


class ArmFailure(Exception):
    def __init__(self, label: str, where: str, reason: str) -> None:
        super().__init__(f"{label}: {where}: {reason}")
        self.label, self.where, self.reason = label, where, reason


class Zygote:
    """The judge's handle on the zygote (``verifiers.arms.zygote``): exec'd by ``Zygote(...)``
    (callers outside a judge), or forked by the judge from itself (``fork_here``)."""

    def __init__(self, pycache_prefix: Path, profile: bool, triton: bool, sys_path: list[str],
                 cwd: str | None = None, cpu: bool = False) -> None:

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cmd = [sys.executable, "-I", "-X", f"pycache_prefix={pycache_prefix}", "-c", BOOT, str(REPO_ROOT),
               str(theirs.fileno())]
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                pass_fds=[theirs.fileno()], env=arm_environment(cpu=cpu), cwd=cwd or os.getcwd())
        theirs.close()
        assert proc.stdout is not None
        self._attach(ours, proc.pid, proc.stdout, proc)
        self.setup(pycache_prefix, profile, triton, sys_path)

    @classmethod
    def fork_here(cls) -> "Zygote":
        """Fork the zygote from the calling process (the judge, before it has read its job):
        the child keeps only its socket and a log pipe, stdin on /dev/null; ``setup`` later."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        log_r, log_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                os.close(log_r)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.close(null)
                os.dup2(log_w, 1)
                os.dup2(log_w, 2)
                os.close(log_w)
                sys.stdout.reconfigure(line_buffering=True)
                sys.stderr.reconfigure(line_buffering=True)

                main(theirs.detach())
            finally:
                os._exit(1)
        theirs.close()
        os.close(log_w)
        self = cls.__new__(cls)
        self._attach(ours, pid, os.fdopen(log_r, "rb"), _ForkedChild(pid))
        return self

    def _attach(self, sock: socket.socket, pid: int, log: Any, proc: Any) -> None:
        self.sock, self.pid, self.proc = sock, pid, proc
        self.prefix = Path()
        self._ready = False
        self.log: deque[str] = deque(maxlen=100)
        threading.Thread(target=_pump_lines, args=(log, self.log), daemon=True).start()

    def setup(self, pycache_prefix: Path, profile: bool, triton: bool, sys_path: list[str],
              cwd: str | None = None, env: dict[str, str] | None = None) -> None:
        """Where torch and pydantic live, the zygote's bytecode prefix and folder, what to
        preload, and the arms' environment (the caller's allow-list now: a forked zygote
        started with the template's)."""
        self.prefix = pycache_prefix
        try:
            wire.send(self.sock, {"sys_path": list(sys_path), "prefix": str(pycache_prefix), "cwd": cwd,
                                  "profile": profile, "triton": triton, "env": env})
        except wire.WireError as exc:
            raise ArmFailure("zygote", "setup", str(exc)) from None

    def _request(self, message: dict[str, Any], timeout_s: float, fds: list[int] | tuple[int, ...] = ()) -> dict[str, Any]:
        self.wait_ready(timeout_s)
        try:
            wire.send(self.sock, message, fds)
            reply, got = wire.recv(self.sock, time.monotonic() + timeout_s)
        except wire.WireError as exc:
            tail = " | ".join(list(self.log)[-5:])
            raise ArmFailure("zygote", str(message.get("op")), f"{exc} {tail}".strip()) from None
        for fd in got:
            os.close(fd)
        if reply.get("ok") is not True:
            raise ArmFailure("zygote", str(message.get("op")), str(reply.get("error")))
        return reply

    def wait_ready(self, timeout_s: float) -> None:
        if not self._ready:
            try:
                hello, _ = wire.recv(self.sock, time.monotonic() + timeout_s)
            except wire.WireError as exc:
                raise ArmFailure("zygote", "start", f"{exc} {' | '.join(list(self.log)[-5:])}".strip()) from None
            self._ready = bool(hello.get("ok"))

    def fork(self, arm_fd: int, log_fd: int, prefix: Path, write_bytecode: bool, timeout_s: float,
             sandbox: dict[str, Any] | None = None) -> int:
        reply = self._request({"op": "fork", "prefix": str(prefix), "write_bytecode": write_bytecode,
                               "sandbox": sandbox}, timeout_s, [arm_fd, log_fd])
        return int(reply["pid"])

    def seal(self) -> None:
        self._request({"op": "seal"}, 30.0)

    def close(self) -> None:
        end_server(self.sock, self.proc)


def end_server(sock: socket.socket, proc: Any, timeout_s: float = 5.0) -> None:
    """Ask a process serving requests on ``sock`` (a zygote, a judge template) to exit, kill
    it if it has not within ``timeout_s``, and close the socket. ``proc``: a ``Popen`` or
    ``_ForkedChild``."""
    try:
        wire.send(sock, {"op": "exit"})
    except wire.WireError:
        pass
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout_s)
    sock.close()


class _ForkedChild:
    """``wait`` and ``kill`` of a child forked by this process (what ``Popen`` gives an exec'd one)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.returncode = pid, None

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while self.returncode is None:
            try:
                got, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped already (the judge reaps every child as subreaper)
                self.returncode = 0
                break
            if got == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
            time.sleep(0.005)
        return self.returncode

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _pump_lines(stream: Any, log: deque) -> None:
    for raw in stream:
        log.append((raw.decode(errors="replace") if isinstance(raw, bytes) else raw).rstrip("\n")[:2000])
    stream.close()


class ArmHandle:
    def __init__(self, label: str, role: str, zygote: Zygote, pycache_prefix: Path, write_bytecode: bool,
                 timeout_s: float = 120.0, sandbox: dict[str, Any] | None = None) -> None:
        self.label, self.role = label, role
        self.log: deque[str] = deque(maxlen=300)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        log_r, log_w = os.pipe()
        try:
            self.pid = zygote.fork(theirs.fileno(), log_w, pycache_prefix, write_bytecode, timeout_s, sandbox)
        finally:
            theirs.close()
            os.close(log_w)
        self.sock = ours
        self.cpu = procwatch.CpuClock(self.pid)
        self.alive = True
        self.stopped = False
        self._reader = threading.Thread(target=_pump_lines, args=(os.fdopen(log_r, "rb"), self.log),
                                        name=f"arm-log-{label}", daemon=True)
        self._reader.start()
        self.sandbox = self._sandbox_status(timeout_s)

    def _sandbox_status(self, timeout_s: float) -> dict[str, Any]:
        """The first message of every arm: what confined it, sent before any arm code ran."""
        try:
            first, got = wire.recv(self.sock, time.monotonic() + timeout_s)
        except wire.WireError as exc:
            self.kill()
            raise ArmFailure(self.label, "sandbox", f"the arm ended before reporting its sandbox ({exc})") from None
        for fd in got:
            os.close(fd)
        return dict(first.get("sandbox") or {})

    def log_tail(self, chars: int = 3000) -> str:
        return "\n".join(self.log)[-chars:]

    # -- requests --------------------------------------------------------------------
    def request(self, message: dict[str, Any], timeout_s: float, fds: list[int] | tuple[int, ...] = ()) -> dict[str, Any]:
        op = str(message.get("op"))
        if not self.alive:
            raise ArmFailure(self.label, op, "the arm process is no longer running")
        self.resume()
        try:
            wire.send(self.sock, message, fds)
            reply, got = wire.recv(self.sock, time.monotonic() + timeout_s)
        except wire.WireTimeout:
            self.kill()
            raise ArmFailure(self.label, op, f"no answer within {timeout_s:.3g} s (hung); the process was killed") from None
        except wire.WireError as exc:
            gone = self._exit_code() is not None
            self.kill()
            why = "the process ended" if gone else str(exc)
            raise ArmFailure(self.label, op, f"{why} (crashed, exited, or closed its channel)") from None
        for fd in got:  # an arm never sends descriptors
            os.close(fd)
        if reply.get("ok") is not True:
            error = str(reply.get("error", "no reason given"))[:4000]
            raise ArmFailure(self.label, str(reply.get("where", op)), error)
        return reply

    def _exit_code(self) -> int | None:
        """The arm is the zygote's child: only whether it is gone can be seen from here."""
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            info = procwatch.proc_info(self.pid)
            if info is None or info.state in ("Z", "X"):
                return -1
            time.sleep(0.01)
        return None

    # -- scheduling ------------------------------------------------------------------
    def suspend(self) -> None:
        if self.alive and not self.stopped:
            if not procwatch.stop(self.pid):
                raise ArmFailure(self.label, "suspend", "the process could not be stopped (it exited?)")
            self.stopped = True

    def resume(self) -> None:
        if self.alive and self.stopped:
            procwatch.resume(self.pid)
            self.stopped = False

    # -- teardown --------------------------------------------------------------------
    def close(self, timeout_s: float = 5.0) -> int | None:
        """Ask the arm to exit, kill it if it does not; the exit code (None if killed)."""
        if self.alive:
            self.resume()
            try:
                wire.send(self.sock, {"op": "exit"})
                wire.recv(self.sock, time.monotonic() + timeout_s)
            except wire.WireError:
                pass
        code = self._gone(timeout_s)
        self.kill()
        return code

    def _gone(self, timeout_s: float) -> int | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            info = procwatch.proc_info(self.pid)
            if info is None or info.state in ("Z", "X"):
                return 0
            time.sleep(0.005)
        return None

    def kill(self) -> None:
        self.alive = False
        try:
            os.kill(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._gone(5.0)
        try:
            self.sock.close()
        except OSError:
            pass
        self._reader.join(timeout=2)

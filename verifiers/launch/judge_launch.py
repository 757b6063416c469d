"""Starting a judge process for the runner: forked from a warm template, or exec'd fresh.

The template (``verifiers.launch.judge_start.serve``) is started once per caller process and
configuration -- interpreter, ``sys.path`` and the arm allow-list environment it runs
with -- and forks each judge in milliseconds instead of the seconds an interpreter start
and a torch import take. A configuration change (another ``sys.path``, an environment
variable the arms may see) starts a new template; one whose judges are done is closed.
``SKILL_SERVER_WARM_JUDGE=0`` turns templates off (every judge exec'd); a template that
cannot start is reported on the judge's log and the judge is exec'd instead.

``launch`` returns an object with the part of ``subprocess.Popen``'s interface the runner
uses (``stdin``, ``stdout``, ``stderr``, ``pid``, ``poll``, ``wait``, ``send_signal``,
``kill``, ``returncode``); either way the judge leads its own session.
"""
from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Protocol

from verifiers import locations
from verifiers.launch import bytecode
from verifiers.launch import procwatch
from verifiers.ipc import wire
from verifiers.arms.env import arm_environment
from verifiers.arms.handle import end_server
from verifiers.launch.judge_start import FRESH_BOOT, TEMPLATE_BOOT
from verifiers.settings import verifier_settings

REPO_ROOT = locations.CODE_ROOT
WARM_ENV = "SKILL_SERVER_WARM_JUDGE"
TEMPLATE_START_S = 180.0


class JudgeProcess(Protocol):
    pid: int
    stdin: Any
    stdout: Any
    stderr: Any
    returncode: int | None

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int | None: ...
    def send_signal(self, sig: int) -> None: ...
    def kill(self) -> None: ...


def judge_command(prefix: Path) -> list[str]:
    """The command line of an exec'd judge."""
    return [sys.executable, "-I", "-X", f"pycache_prefix={prefix}", "-c", FRESH_BOOT, str(REPO_ROOT), str(os.getpid())]


def warm_enabled(env: dict[str, str] | None = None) -> bool:
    return verifier_settings(env).warm_judge


class Template:
    """One warm template process and the judges it forked that are not reaped yet."""

    def __init__(self, key: tuple, sys_path: list[str], env: dict[str, str]) -> None:
        self.key, self.active = key, set()
        self.prefix = bytecode.CACHE.fresh_prefix(private=True)
        self.log: deque[str] = deque(maxlen=50)
        self.lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-X", f"pycache_prefix={self.prefix}", "-c", TEMPLATE_BOOT, str(REPO_ROOT),
             str(theirs.fileno())], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            pass_fds=[theirs.fileno()], env=env, cwd="/")
        theirs.close()
        self.sock = ours
        threading.Thread(target=_pump, args=(self.proc.stderr, self.log), daemon=True).start()
        try:
            wire.send(self.sock, {"sys_path": sys_path})
            hello, _ = wire.recv(self.sock, time.monotonic() + TEMPLATE_START_S)
        except wire.WireError as exc:
            self.close()
            raise OSError(f"the judge template did not start ({exc}): {' | '.join(self.log) or 'no output'}") from None
        if not hello.get("ok"):
            self.close()
            raise OSError(f"the judge template did not start: {hello}")
        # the template imported torch and the harness and runs no job: what it compiled is
        # trusted bytecode (the judges it forks get prefixes of their own)
        bytecode.CACHE.merge(self.prefix, bytecode.tree_digests(self.prefix))
        self.pid = self.proc.pid
        self.sched = procwatch.sched_profile(self.pid)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def usable(self) -> bool:
        """Alive, and its scheduling and limits as they were when it started: every judge
        inherits them, so a template another process reniced, re-pinned or limited (as root
        a candidate may) is never forked from again."""
        if not self.alive():
            return False
        now = procwatch.sched_profile(self.pid)
        return now is not None and self.sched is not None and not self.sched.differences(now)

    def _ask(self, message: dict[str, Any], fds: list[int] = ()) -> dict[str, Any]:
        with self.lock:
            wire.send(self.sock, message, fds)
            reply, got = wire.recv(self.sock, time.monotonic() + 30.0)
        for fd in got:
            os.close(fd)
        return reply

    def fork(self, prefix: Path, cwd: str) -> "ForkedJudge":
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        try:
            reply = self._ask({"op": "fork", "prefix": str(prefix), "cwd": cwd}, [stdin_r, stdout_w, stderr_w])
        except wire.WireError:
            for fd in (stdin_w, stdout_r, stderr_r):
                os.close(fd)
            raise
        finally:
            for fd in (stdin_r, stdout_w, stderr_w):
                os.close(fd)
        pid = int(reply["pid"])
        with self.lock:
            self.active.add(pid)
        return ForkedJudge(self, pid, os.fdopen(stdin_w, "w", buffering=1), os.fdopen(stdout_r, "r"),
                           os.fdopen(stderr_r, "r"))

    def reap(self, pid: int) -> int | None:
        try:
            code = self._ask({"op": "reap", "pid": pid}).get("code")
        except wire.WireError:
            code = None
        with self.lock:
            self.active.discard(pid)
        return int(code) if isinstance(code, int) else None

    def close(self) -> None:
        end_server(self.sock, self.proc)
        bytecode.remove(self.prefix)


class ForkedJudge:
    """A judge forked by a template: a zombie until the template reaps it on ``poll``."""

    def __init__(self, template: Template, pid: int, stdin: Any, stdout: Any, stderr: Any) -> None:
        self.template, self.pid = template, pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        info = procwatch.proc_info(self.pid)
        if info is not None and info.state not in ("Z", "X"):
            return None
        code = self.template.reap(self.pid)
        self.returncode = code if code is not None else -1  # -1: its status was lost with the template
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"judge {self.pid}", timeout or 0.0)
            time.sleep(0.01)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_TEMPLATES: list[Template] = []
_LOCK = threading.Lock()


# read when used, never while the template imports torch and the harness: a change needs no new
# template (the judge gets the caller's environment, the zygote its allow-list, per run)
_NOT_IN_KEY = ("SKILL_SERVER_", "XDG_")
_NOT_IN_KEY_NAMES = frozenset({"HOME", "USER", "LOGNAME", "TMPDIR", "SHELL", "TERM"})


def _template(sys_path: list[str], env: dict[str, str]) -> Template:
    imports = {k: v for k, v in env.items() if not k.startswith(_NOT_IN_KEY) and k not in _NOT_IN_KEY_NAMES}
    key = (sys.executable, tuple(sys_path), tuple(sorted(imports.items())))
    with _LOCK:
        for t in list(_TEMPLATES):
            if (t.key != key and not t.active) or not t.usable():
                _TEMPLATES.remove(t)
                t.close()
        for t in _TEMPLATES:
            if t.key == key:
                return t
        t = Template(key, sys_path, env)
        _TEMPLATES.append(t)
        return t


def template_pids() -> list[int]:
    """The live templates' pids (their forks share their command line)."""
    with _LOCK:
        return [t.pid for t in _TEMPLATES if t.alive()]


def launch(prefix: Path, caller_env: dict[str, str], sys_path: list[str], cwd: str,
           log: deque | None = None) -> JudgeProcess:
    """A judge process whose initial environment is the arm allow-list of ``caller_env``."""
    env = arm_environment(caller_env)
    if warm_enabled(caller_env):
        try:
            return _template(sys_path, env).fork(prefix, cwd)
        except (OSError, wire.WireError, KeyError, ValueError) as exc:
            if log is not None:
                log.append(f"runner: no warm judge template ({exc}); the judge is started afresh")
    return subprocess.Popen(judge_command(prefix), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1, env=env, cwd=cwd, start_new_session=True)


def close_templates() -> None:
    with _LOCK:
        while _TEMPLATES:
            _TEMPLATES.pop().close()


atexit.register(close_templates)


def _pump(stream: Any, log: deque) -> None:
    for raw in stream:
        log.append(raw.decode(errors="replace").rstrip("\n")[:500])
    stream.close()

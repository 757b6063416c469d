"""How a judge process comes to exist: exec'd fresh, or forked from a warm template.

Either way the judge's stdin carries two lines, written by ``verifiers.launch.runner``:

1. a *preamble*, ``{"sys_path": [...]}`` -- public; read without buffering, so nothing of
   line 2 is in the process when it forks its zygote;
2. the *envelope*, ``{"key", "job", "env"}`` -- the channel key, the job and the caller's
   environment, read by ``verifiers.judge.process.main`` only after the zygote is forked.

A judge process (and so its zygote and every arm) starts with the arm allow-list
environment (``verifiers.arms.env``); the caller's full environment reaches the judge's
``os.environ`` through the envelope, never its initial environment block, which an arm
could read from its own memory.

The **template** (``serve``) is an interpreter that has imported torch and the harness,
holds nothing of any job, and forks one judge per request: the judge then skips the
seconds of interpreter start and torch import. It never runs job code itself; each fork
starts from the same clean image, so no state passes from one verification to the next.
"""
from __future__ import annotations

import os
import socket
import sys

# exec'd judge: ``python -I -X pycache_prefix=P -c FRESH_BOOT <repo root> <caller pid>``
FRESH_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); from verifiers.launch.judge_start import fresh; "
              "fresh(int(sys.argv[2]))")
# template: ``python -I -X pycache_prefix=P -c TEMPLATE_BOOT <repo root> <socket fd>``
TEMPLATE_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); from verifiers.launch.judge_start import serve; "
                 "serve(int(sys.argv[2]))")
# imported once in the template, so a forked judge and its zygote find them loaded
PRELOAD = ("torch", "verifiers.judge.process", "verifiers.judge.session", "verifiers.judge.timing", "verifiers.judge.parity",
           "verifiers.arms.handle", "verifiers.arms.zygote", "verifiers.arms.process", "verifiers.arms.candidate", "verifiers.judge.kernel_trace",
           "verifiers.problem", "verifiers.arms.sandbox", "verifiers.ipc.shared_buffers", "verifiers.hw.device", "verifiers.options",
           "verifiers.provenance", "verifiers.hw.neighbours", "verifiers.launch.bytecode", "trace_readers")
MAX_PREAMBLE = 1 << 20


def read_preamble(fd: int = 0) -> dict:
    """Line 1 of stdin, a byte at a time: a buffered read would pull part of line 2 (the
    key and the job) into this process before the zygote is forked from it."""
    import json

    raw = bytearray()
    while len(raw) < MAX_PREAMBLE:
        b = os.read(fd, 1)
        if not b or b == b"\n":
            break
        raw += b
    try:
        data = json.loads(raw.decode())
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _extend_path(preamble: dict) -> None:
    sys.path += [p for p in preamble.get("sys_path", []) if isinstance(p, str) and p and p not in sys.path]


def die_with(parent: int) -> None:
    """Die (SIGKILL) when ``parent`` ends, however it ends; exit now if it already has.

    ``PR_SET_PDEATHSIG`` fires when the *thread* that created this process ends: here that is
    the caller's thread that waits for this judge until it is gone (``runner.run_judge``), or
    the template's only thread. The judge's watch on its stdin (``process.main``) covers the
    rest: the caller's end of that pipe closes when the caller exits, even on SIGKILL. The
    zygote and every arm die with their parent likewise (``verifiers.arms.zygote``)."""
    # lazy: only after the preamble adds the caller's sys.path (pydantic, torch); -I ignores PYTHONPATH
    from verifiers.launch import procwatch

    procwatch.die_with_parent()
    if os.getppid() != parent:  # the parent was gone before the signal was armed
        os._exit(137)


def fresh(parent: int) -> None:
    """Entry point of an exec'd judge; ``parent``: the caller's pid."""
    die_with(parent)
    _extend_path(read_preamble())  # -I ignores PYTHONPATH: the caller's path holds pydantic and torch
    # lazy: only after the preamble adds the caller's sys.path (pydantic, torch); -I ignores PYTHONPATH
    from verifiers.judge.process import main

    sys.exit(main())


def serve(fd: int) -> None:
    """The template's loop: ``fork`` (with the judge's stdin, stdout and stderr attached)
    answers the judge's pid; ``reap`` collects one exited judge's status (judges stay
    zombies until the caller asks, so their pid and process group cannot be reused while
    the caller may still signal them); ``exit`` or a closed socket ends the template."""
    # lazy: only after the preamble adds the caller's sys.path (pydantic, torch); -I ignores PYTHONPATH
    from verifiers.launch import procwatch
    # lazy: only after the preamble adds the caller's sys.path (pydantic, torch); -I ignores PYTHONPATH
    from verifiers.ipc import wire

    # ends when the caller's end of the socket closes (the caller exited, however): not with
    # PR_SET_PDEATHSIG, which fires when the *thread* that started it ends (a server's worker)
    control = socket.socket(fileno=fd)
    setup, _ = wire.recv(control)
    _extend_path(setup)
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    if os.geteuid() != 0:
        procwatch.make_undumpable()
    wire.send(control, {"ok": True, "pid": os.getpid()})
    def fork(msg: dict, fds: list[int]) -> dict:
        if len(fds) != 3:
            raise ValueError(f"a fork carries the judge's stdin, stdout and stderr, got {len(fds)} descriptors")
        template = os.getpid()
        pid = os.fork()
        if pid == 0:
            die_with(template)
            _judge_child(control, fds, str(msg.get("prefix") or ""), str(msg.get("cwd") or "/"))
        for f in fds:
            os.close(f)
        return {"ok": True, "pid": pid}

    wire.serve_requests(control, {"fork": fork,
                                  "reap": lambda msg, _fds: {"ok": True, "code": _reap(int(msg.get("pid", 0)))}})


def _reap(pid: int) -> int | None:
    try:
        got, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return os.waitstatus_to_exitcode(status) if got == pid else None


def _judge_child(control: socket.socket, fds: list[int], prefix: str, cwd: str) -> None:
    """In the forked judge: its own session (the caller kills the group), the caller's
    pipes as 0, 1 and 2, its own bytecode prefix, then the judge's ``main``."""
    # lazy: only after the preamble adds the caller's sys.path (pydantic, torch); -I ignores PYTHONPATH
    from verifiers.launch import procwatch

    code = 70
    try:
        control.close()
        os.setsid()
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
            os.close(fd)
        if os.geteuid() != 0:
            procwatch.make_dumpable()  # the template's setting; the judge decides its own later
        if prefix:
            sys.pycache_prefix = prefix
        try:
            os.chdir(cwd)
        except OSError:
            pass
        _extend_path(read_preamble())
        # lazy: only after the preamble adds the caller's sys.path (pydantic, torch); -I ignores PYTHONPATH
        from verifiers.judge.process import main

        code = main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # pragma: no cover - the last resort: say why on stderr
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)

"""The zygote: a clean process that has imported torch, and forks the arm processes.

Importing torch costs seconds; four arm processes per verification would pay it four
times. The judge forks its zygote from itself first thing, before it reads its job
(``verifiers.judge.process.main``; ``Zygote.fork_here``), so the zygote holds no job, no key, no
problem, no candidate and no caller environment; callers outside a judge exec one
(``python -I -X pycache_prefix=<copy> -c BOOT``). Its first message sets it up: the
caller's ``sys.path``, its bytecode prefix and folder, and whether to warm the profiler
and import Triton. On request it forks an arm; the child
closes the zygote's socket, takes the judge's socket and a log pipe as its only
connections, enters its sandbox (``verifiers.arms.sandbox``: the judge's allow-list, applied
before any arm code is imported; its status is the first message the judge reads), sets a
fresh bytecode prefix of its own (no bytecode written when the arm is untrusted) and runs
``verifiers.arms.process.serve``. CUDA/HIP is never initialised here, so
each child opens its own device context. The zygote dies with the judge, and every arm
dies with the zygote.
"""
from __future__ import annotations

import os
import socket
import sys

BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from verifiers.arms.zygote import main; main(int(sys.argv[2]))"


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _child(control: socket.socket, arm_fd: int, log_fd: int, prefix: str, write_bytecode: bool,
           policy: dict | None) -> None:
    # lazy: only after main's setup message (caller's sys.path, env, bytecode prefix); -I ignores PYTHONPATH
    from verifiers.arms import process as arm
    # lazy: only after main's setup message (caller's sys.path, env, bytecode prefix); -I ignores PYTHONPATH
    from verifiers.launch import procwatch
    # lazy: only after main's setup message (caller's sys.path, env, bytecode prefix); -I ignores PYTHONPATH
    from verifiers.arms import sandbox
    # lazy: only after main's setup message (caller's sys.path, env, bytecode prefix); -I ignores PYTHONPATH
    from verifiers.ipc import wire

    control.close()
    procwatch.die_with_parent()
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    sys.stdout.reconfigure(line_buffering=True)
    sys.stderr.reconfigure(line_buffering=True)
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = not write_bytecode
    sock = socket.socket(fileno=arm_fd)
    try:
        rules = sandbox.SandboxPolicy.model_validate(policy) if policy else None
        status = sandbox.enter(rules) if rules else sandbox.SandboxStatus(reason="the judge sent no policy")
        wire.send(sock, {"sandbox": status.model_dump()})
        if rules is not None and rules.required and not status.active:
            os._exit(3)
        arm.serve(sock)
    finally:
        os._exit(0)


def _warm_profiler() -> None:
    """The profiler's first use imports and initialises much of torch (seconds): done once
    here, on the CPU only, so every forked arm starts with it done."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]):
        torch.ones(2).add_(1)


def main(fd: int) -> None:
    # lazy: only after main's setup message (caller's sys.path, env, bytecode prefix); -I ignores PYTHONPATH
    from verifiers.launch import procwatch
    # lazy: only after main's setup message (caller's sys.path, env, bytecode prefix); -I ignores PYTHONPATH
    from verifiers.ipc import wire

    procwatch.die_with_parent()
    control = socket.socket(fileno=fd)
    try:
        setup, _ = wire.recv(control)  # the caller's sys.path, before anything beyond the stdlib
    except wire.WireError:
        os._exit(0)  # the judge ended before it needed a zygote
    if setup.get("op") == "exit":
        os._exit(0)
    if isinstance(setup.get("env"), dict):  # the allow-list of the caller's environment now (an arm's os.environ)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in setup["env"].items()})
        import tempfile

        tempfile.tempdir = None
    sys.path += [p for p in setup.get("sys_path", []) if p not in sys.path]
    if setup.get("prefix"):
        sys.pycache_prefix = str(setup["prefix"])
    if setup.get("cwd"):
        try:
            os.chdir(str(setup["cwd"]))
        except OSError:
            pass
    import torch  # noqa: F401

    if setup.get("profile"):
        _warm_profiler()
    if setup.get("triton"):
        try:
            import triton  # noqa: F401
            import triton.language  # noqa: F401
        except Exception:
            pass
    # lazy: only after main's setup message (caller's sys.path, env, bytecode prefix); -I ignores PYTHONPATH
    import trace_readers  # noqa: F401  (an arm's profile_stop reads its trace with it)
    # lazy: only after main's setup message (caller's sys.path, env, bytecode prefix); -I ignores PYTHONPATH
    import verifiers.arms.process  # noqa: F401  (the arm side of the harness, loaded before any fork)
    # lazy: only after main's setup message (caller's sys.path, env, bytecode prefix); -I ignores PYTHONPATH
    import verifiers.arms.candidate  # noqa: F401
    # lazy: only after main's setup message (caller's sys.path, env, bytecode prefix); -I ignores PYTHONPATH
    import verifiers.judge.kernel_trace  # noqa: F401
    # lazy: only after main's setup message (caller's sys.path, env, bytecode prefix); -I ignores PYTHONPATH
    import verifiers.problem  # noqa: F401
    # lazy: only after main's setup message (caller's sys.path, env, bytecode prefix); -I ignores PYTHONPATH
    import verifiers.arms.sandbox  # noqa: F401
    # lazy: only after main's setup message (caller's sys.path, env, bytecode prefix); -I ignores PYTHONPATH
    import verifiers.ipc.shared_buffers  # noqa: F401

    wire.send(control, {"ok": True, "pid": os.getpid()})

    def fork(msg: dict, fds: list[int]) -> dict:
        if len(fds) != 2:
            raise ValueError(f"a fork carries the arm's socket and log pipe, got {len(fds)} descriptors")
        pid = os.fork()
        if pid == 0:
            _child(control, fds[0], fds[1], str(msg["prefix"]), bool(msg.get("write_bytecode")), msg.get("sandbox"))
        for f in fds:
            os.close(f)
        return {"ok": True, "pid": pid}

    def seal(_msg: dict, _fds: list[int]) -> dict:
        import tempfile

        sys.pycache_prefix = tempfile.mkdtemp(prefix="verifier-sealed-")
        sys.dont_write_bytecode = True
        return {"ok": True}

    wire.serve_requests(control, {"fork": fork, "seal": seal}, before=_reap)

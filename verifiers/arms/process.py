"""An arm process: one arm's code and its buffers, nothing else.

Arm processes are forked by the zygote (``verifiers.arms.zygote``: ``python -I -B`` with
torch already imported, nothing else), each with one Unix socket to the judge, its own
stdout/stderr pipe and a fresh bytecode prefix of its own. The process holds the
arm's builder, the buffer sets the judge mapped into it and the launches ``build``
returned; it never sees an oracle output, a parity rule, another arm, a report, or
which case is hidden. It answers one command at a time (``verifiers.ipc.wire`` frames):

=============  ================================================================
op             what the arm does
=============  ================================================================
hello          import torch and the builder (a problem arm or the candidate)
build          map a buffer set, call ``build(inputs, outputs)``, keep the launch
call           one untimed ``launch()`` + device synchronise (parity, warm-up)
timed          one timed call: device events around ``launch()`` + synchronise on
               GPU, process CPU time on CPU; ``id = "null"`` times a no-op
link           open the judge's ``ready`` event, make ``done`` (chained protocol, GPUs)
chain          queue one call: wait for the judge's ``ready``, device events around
               ``launch()``, record ``done``; no synchronise (``verifiers.judge.session``)
times          the timed figures since the last ``times``
device_open    open the device context before the code arrives (a profiler process)
profile_*      torch.profiler around ``pcall`` launches; returns kernel records
release        drop a launch and its buffers
=============  ================================================================

Whatever the arm reports is only as good as the code in this process: the judge
checks every call's output itself, keeps its own clock beside the arm's, and treats a
candidate arm's figures as claims.
"""
from __future__ import annotations

import os
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from verifiers.arms.candidate import CandidateSpec, load_candidate
from verifiers.ipc import wire
from verifiers.ipc.shared_buffers import open_in_arm
from verifiers.judge.kernel_trace import CALL_PREFIX, from_chrome_trace
from verifiers.problem import load_problem


def _error(where: str, exc: BaseException) -> dict[str, Any]:
    text = f"{where} raised {type(exc).__name__}: {exc}"
    return {"ok": False, "where": where, "error": text[:4000], "trace": traceback.format_exc()[-3000:]}


class ArmRuntime:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.builder: Any = None
        self.launches: dict[str, Any] = {}
        self.kept: dict[str, Any] = {}
        self.gpu = False
        self.pending: list[Any] = []
        self.events: list[Any] = []
        self.profiler: Any = None
        self.ready: Any = None
        self.done: Any = None

    # -- set-up ----------------------------------------------------------------------
    def hello(self, msg: dict[str, Any]) -> dict[str, Any]:
        root = sys.path[0]
        sys.path[:] = [root] + [p for p in msg.get("sys_path", []) if p and p != root]
        import torch

        threads = msg.get("cpu_threads")
        device = str(msg.get("device", "cpu"))
        self.gpu = device.startswith("cuda")
        if self.gpu:
            torch.cuda.set_device(torch.device(device))
            torch.cuda.init()
            self.sync = torch.cuda.synchronize
            self.event = lambda: torch.cuda.Event(enable_timing=True)
        else:
            if threads:
                torch.set_num_threads(int(threads))
            self.sync = lambda: None
        if msg.get("profile"):
            import torch.profiler  # noqa: F401  (imported now, not in the middle of a timed phase)

        spec = CandidateSpec(msg["builder"]["kind"], msg["builder"]["target"], msg["builder"].get("function"))
        problem = None
        if spec.kind in ("arm", "emulated"):

            problem = load_problem(msg["problem"])
        self.builder = load_candidate(spec, problem)
        files = sorted({str(Path(m.__file__).resolve()) for m in list(sys.modules.values())
                        if isinstance(getattr(m, "__file__", None), str) and m.__file__.endswith(".py")})
        if msg.get("role") == "baseline":
            # its bytecode is what a trusted process compiled; later imports compile in memory,
            # so nothing written to disk once a candidate exists is ever read here
            sys.pycache_prefix = tempfile.mkdtemp(prefix="verifier-sealed-")
            sys.dont_write_bytecode = True
        return {"ok": True, "pid": os.getpid(), "files": files}

    # -- commands --------------------------------------------------------------------
    def build(self, msg: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        inputs, outputs, keep = open_in_arm(msg["set"], fds)
        launch = self.builder(dict(inputs), dict(outputs))
        if not callable(launch):
            return {"ok": False, "where": "build", "error": f"build must return a zero-argument launch callable, "
                                                             f"got {type(launch).__name__}"}
        self.sync()
        self.launches[msg["id"]] = launch
        self.kept[msg["id"]] = (inputs, outputs, keep)
        # what the builder says ran (a dispatch's variant and kernel instance): the judge
        # records it for trusted arms only, so a candidate's claim never reaches a report
        about = {k: str(getattr(launch, k))[:300] for k in ("variant", "kernel_instance") if hasattr(launch, k)}
        return {"ok": True, "about": about} if about else {"ok": True}

    def _launch(self, key: str) -> Any:
        if key == "null":
            return _null
        return self.launches[key]

    def call(self, msg: dict[str, Any]) -> dict[str, Any]:
        self._launch(msg["id"])()
        self.sync()
        return {"ok": True}

    def _next_events(self) -> tuple[Any, Any]:
        """The timing event pair of the next pending call (pooled: reused after ``times``)."""
        n = len(self.pending)
        while len(self.events) <= n:
            self.events.append((self.event(), self.event()))
        return self.events[n]

    def timed(self, msg: dict[str, Any]) -> dict[str, Any]:
        launch = self._launch(msg["id"])
        if self.gpu:
            start, end = self._next_events()
            start.record()
            launch()
            self.sync()
            end.record()
            self.pending.append((start, end))
        else:
            c0 = time.process_time_ns()
            launch()
            self.pending.append(time.process_time_ns() - c0)
        return {"ok": True}

    def link(self, msg: dict[str, Any]) -> dict[str, Any]:
        import base64

        import torch

        self.ready = torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), base64.b64decode(msg["ready"]))
        self.done = torch.cuda.Event(enable_timing=False, blocking=False, interprocess=True)
        return {"ok": True, "done": base64.b64encode(self.done.ipc_handle()).decode()}

    def chain(self, msg: dict[str, Any]) -> dict[str, Any]:
        import torch

        launch = self._launch(msg["id"])
        torch.cuda.current_stream().wait_event(self.ready)
        start, end = self._next_events()
        start.record()
        launch()
        end.record()
        self.done.record()
        self.pending.append((start, end))
        return {"ok": True}

    def times(self, _msg: dict[str, Any]) -> dict[str, Any]:
        if self.gpu:
            self.sync()
            ms = [float(s.elapsed_time(e)) for s, e in self.pending]
        else:
            ms = [v / 1e6 for v in self.pending]
        self.pending = []
        return {"ok": True, "ms": ms}

    def device_open(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Open the device context of a process forked ahead of its code (a candidate's profiler
        process), so that it opens before anything is timed rather than beside a timed phase."""
        import torch

        device = str(msg.get("device", ""))
        if device.startswith("cuda"):
            torch.cuda.set_device(torch.device(device))
            torch.cuda.init()
        return {"ok": True}

    def profile_warm(self, msg: dict[str, Any]) -> dict[str, Any]:
        """One empty profiler session on ``msg["device"]``, before anything is timed: the first
        start of the GPU profiler in a process costs seconds of host work (loading CUPTI: 5-6.5 s
        on the H200, with or without a context; a second start 1 ms). The judge has its profiler
        processes do it while it goes on (``verifiers.judge.profiler_arms``). Torch's
        profiler tears CUPTI down at the end of a session: a cuBLAS GEMM timed 0.1759 ms before
        and after (bench/results/h200_profiler_start)."""
        import torch
        from torch.profiler import ProfilerActivity, profile

        device = str(msg.get("device", ""))
        if not device.startswith("cuda"):
            return {"ok": True, "seconds": 0.0}
        t0 = time.perf_counter()
        torch.cuda.set_device(torch.device(device))  # the context, if CUPTI makes one, on the judge's device
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        prof.prepare_trace()
        prof.start_trace()
        prof.stop_trace()
        del prof, torch
        return {"ok": True, "seconds": round(time.perf_counter() - t0, 3)}

    def profile_start(self, _msg: dict[str, Any]) -> dict[str, Any]:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.gpu else [])
        self.sync()
        self.profiler = profile(activities=activities)
        self.profiler.__enter__()
        return {"ok": True}

    def pcall(self, msg: dict[str, Any]) -> dict[str, Any]:
        from torch.profiler import record_function


        launch = self._launch(msg["id"])
        with record_function(f"{CALL_PREFIX}{int(msg['i'])}"):
            launch()
        self.sync()
        return {"ok": True}

    def profile_stop(self, _msg: dict[str, Any]) -> dict[str, Any]:
        prof, self.profiler = self.profiler, None
        prof.__exit__(None, None, None)
        with tempfile.TemporaryDirectory(prefix="verifier-arm-trace-") as tmp:
            path = Path(tmp) / "trace.json"
            prof.export_chrome_trace(str(path))
            records = from_chrome_trace(path, cpu=not self.gpu)  # trace_readers streams the file
        return {"ok": True, "records": [r.model_dump() for r in records]}

    def release(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.launches.pop(msg["id"], None)
        self.kept.pop(msg["id"], None)
        return {"ok": True}


def _null() -> None:
    return None


def serve(sock: socket.socket) -> None:
    """The command loop of a forked arm process; never returns."""

    runtime = ArmRuntime(sock)
    handlers = {"build": None, "call": runtime.call, "timed": runtime.timed, "times": runtime.times,
                "link": runtime.link, "chain": runtime.chain,
                "device_open": runtime.device_open, "profile_warm": runtime.profile_warm,
                "profile_start": runtime.profile_start, "pcall": runtime.pcall, "profile_stop": runtime.profile_stop,
                "release": runtime.release}
    while True:
        try:
            msg, fds = wire.recv(sock)
        except wire.WireError:
            os._exit(0)  # the judge is gone
        op = msg.get("op")
        if op == "exit":
            wire.send(sock, {"ok": True})
            os._exit(0)
        try:
            if op == "hello":
                reply = runtime.hello(msg)
            elif op == "build":
                reply = runtime.build(msg, fds)
            elif op in handlers:
                reply = handlers[op](msg)
            else:
                reply = {"ok": False, "where": "protocol", "error": f"unknown op {op!r}"}
        except BaseException as exc:  # SystemExit, KeyboardInterrupt from arm code: reported, not fatal
            reply = _error(str(op), exc)
        try:
            wire.send(sock, reply)
        except wire.WireError:
            os._exit(0)
        if op == "hello" and msg.get("role") == "probe":
            os._exit(0)

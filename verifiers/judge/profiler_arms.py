"""Profiled calls run in processes of their own, which are never timed.

The runtime signature and the segment need a profiled trace of each arm; the timing needs arms
that never ran the profiler (on the H200 a baseline's calls ran 3-38 % slower, and noisier, once
CUPTI had been loaded in its process); and the profiler's first start in a process costs
5-6.5 s of host work on the H200 (loading CUPTI, with or without a context; a second start
1 ms: bench/results/h200_profiler_start). So the judge keeps the two apart:

- the baseline's profiler process is forked beside A and A' and loads the baseline (its device
  context opens there) before any candidate code exists, then loads the profiler on a thread of
  the judge while the judge goes on; it profiles the baseline at every shape;
- each shape's candidate profiler process is forked from the zygote with trusted code only,
  opens its device context before anything is timed, and loads the profiler meanwhile; it gets
  the candidate's code only after the shape's A/B rounds, runs the profiled calls and ends with
  its shape. No candidate code runs in it while anything is timed.

Loading the profiler is host work in a process that launches nothing; by default it overlaps the
timing (``VerifyOptions.profiler_loads_during_timing``; off, the judge waits for it before each
timed phase, the bench's ablation row). A load that fails costs only time: ``profile_start``
then loads the profiler itself.

The candidate's trace comes from a process running the same code on the same inputs as the
timed one: evidence against an honest mistake (a silent fallback, a ghost branch), not against a
candidate that behaves otherwise when profiled, which it could always detect in its own process.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future, TimeoutError as FutureTimeout
from typing import Any, Callable

from verifiers.arms.handle import ArmFailure
from verifiers.judge.blame import Blame


class ProfilerArm:
    """One arm process that runs profiled calls only. A thread of the judge opens it (``load``,
    else a bare device context) and then loads its profiler; the judge waits on ``opened``
    before anything is timed and on ``warmed`` before it profiles."""

    def __init__(self, arm: Any, device: str, timeout_s: float, load: Callable[[], Any] | None = None) -> None:
        self.arm = arm
        self.opened: Future = Future()
        self.warmed: Future = Future()
        threading.Thread(target=self._prepare, args=(load, device, timeout_s), daemon=True,
                         name=f"judge-profiler-{arm.handle.pid}").start()

    def _prepare(self, load: Callable[[], Any] | None, device: str, timeout_s: float) -> None:
        try:
            if load is not None:
                load()
            else:
                self._request({"op": "device_open", "device": device}, timeout_s)
            self.opened.set_result(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the judge's thread
            self.opened.set_exception(exc)
            self.warmed.set_exception(exc)
            return
        try:
            self._request({"op": "profile_warm", "device": device}, timeout_s)
            self.warmed.set_result(None)
        except BaseException as exc:  # noqa: BLE001
            self.warmed.set_exception(exc)

    def _request(self, message: dict[str, Any], timeout_s: float) -> None:
        # trusted code only runs in it so far: a failure here is no candidate's
        try:
            reply = self.arm.handle.request(message, timeout_s)
        except ArmFailure as exc:
            raise Blame(str(exc), self.arm, candidate=False) from None
        if not reply.get("ok", False):
            raise Blame(f"{self.arm.label}: {message['op']} failed: {str(reply.get('error', '?'))[:300]}", self.arm,
                        candidate=False)

    def wait_opened(self, timeout_s: float) -> None:
        """Raises the ``Blame`` of a failed load or device open."""
        try:
            self.opened.result(timeout=timeout_s)
        except FutureTimeout:
            raise Blame(f"{self.arm.label}: not loaded after {timeout_s:.0f} s", self.arm) from None

    def wait_warmed(self, timeout_s: float, note: Callable[[str], None]) -> float:
        """Seconds spent waiting for the profiler's load; a failed load is noted (the profiling
        stage then pays it), a failed open raises its ``Blame``."""
        t0 = time.perf_counter()
        self.wait_opened(timeout_s)
        try:
            self.warmed.result(timeout=timeout_s)
        except (Blame, FutureTimeout) as exc:
            why = exc.reason[:200] if isinstance(exc, Blame) else f"not done after {timeout_s:.0f} s"
            note(f"{self.arm.label}: the profiler's early load failed ({why}); it loads when profiling")
        return time.perf_counter() - t0

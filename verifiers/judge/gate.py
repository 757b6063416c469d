"""The gated protocol on GPUs: one call in flight, ordered on the device, both clocks device-side.

Per call, on the judge's stream: this call's values, poison, the cache flush, a *slack* pad,
the judge's start event ``j0`` and the interprocess event ``ready``; then one request to the
arm, whose stream queues ``wait(ready)``, its own start event, ``launch()``, its end event and
``done`` (the ``chain`` op: no host synchronise) and answers at once; then the judge queues
``wait(done)``, its end event ``j1`` and the sampled read, and waits (polling, never blocking
in the driver) until that has run before the next call is prepared.

Why this shape (docs/verifier.md, "Timing"):

- the gate is the one of every protocol here: call *i + 1*'s values reach memory an arm can
  map only after call *i*'s samples were taken, ordered on the device; nothing is staged in
  memory an arm maps, so no arm can batch, pipeline or pre-work calls;
- **no host latency inside either clock**. The per-call protocol's arm events bracket a host
  round trip (an idle stream records ``start``, the host then submits the launch, the end is
  recorded after the host's synchronise returns): 10-30 us of process-specific host time on a
  0.14 ms call. Here the arm queues its whole call while the judge's stream is still busy with
  the flush and the pad, so ``start`` -> kernel -> ``end`` run back to back on the device, and
  the judge's ``j0`` -> ``j1`` (its own events: the arm's call plus two context switches) ends
  when the device resolved ``done``, not when a host woke up;
- the judge checks that this held: an arm that answered after ``ready`` had fired, or a
  ``done`` that had already fired when the judge queued its wait, is a *late* call (host time
  inside a clock). Late calls are counted per arm and make the pad grow (``Pad.grow``); they are
  never dropped (an arm choosing which of its calls are late must not choose which count);
- one call in flight, unlike the chained protocol's pipeline: a judge host slower than the
  device (Python per call) cannot slip host time into the clocks, it only leaves the device
  idle between calls, outside both clocks.

Work an arm leaves on another stream after ``done``: its outputs are sampled as they are
after ``done`` (poison: FAIL), and device time it takes stretches the judge's next preparation
(``prep_ms``, compared across arms as in the chained protocol) or the idle probe after the block.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from verifiers.judge import checks, tensors
from verifiers.judge.session import CallRecord, CallTiming

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from verifiers.judge.session import Arm, BoundSet, CallRecord, CallTiming, Session

PAD_MAX_US = 2000.0
LATE_GROW = 0.05  # a block with more late calls than this fraction doubles the pad


class Pad:
    """Judge-side device time before ``ready``: the slack in which an arm's host queues its
    call. ``torch.cuda._sleep`` (a clock-counting spin, CUDA and ROCm builds of torch) when
    present, calibrated once; else fills of a small buffer."""

    def __init__(self, device: Any, us: float) -> None:
        import torch

        self.us = max(0.0, float(us))
        self.adaptive = self.us > 0  # 0: no pad at all (the bench's ablation), never grown
        self.device = device
        self._sleep = getattr(torch.cuda, "_sleep", None)
        self._cycles_per_us: float | None = None
        self._buf = None
        self._fill_us: float | None = None

    def _calibrate(self) -> None:
        import torch

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if self._sleep is not None:
            try:
                cycles = 200_000
                self._sleep(cycles)  # first launch loads the kernel
                self.device.sync()
                start.record()
                self._sleep(cycles)
                end.record()
                end.synchronize()
                self._cycles_per_us = cycles / max(start.elapsed_time(end) * 1e3, 1e-3)
                return
            except Exception:  # a build without it: fills instead
                self._sleep = None
        self._buf = torch.empty(1 << 20, dtype=torch.int32, device=self.device.torch_device)
        self._buf.fill_(1)
        self.device.sync()
        start.record()
        for _ in range(10):
            self._buf.fill_(2)
        end.record()
        end.synchronize()
        self._fill_us = max(start.elapsed_time(end) * 100.0, 0.5)

    def queue(self) -> None:
        if self.us <= 0:
            return
        if self._cycles_per_us is None and self._fill_us is None:
            self._calibrate()
        if self._cycles_per_us is not None:
            self._sleep(int(self.us * self._cycles_per_us))  # type: ignore[misc]
        else:
            for _ in range(max(1, round(self.us / (self._fill_us or 1.0)))):
                self._buf.fill_(3)  # type: ignore[union-attr]

    def grow(self) -> None:
        if self.adaptive:
            self.us = min(PAD_MAX_US, 2 * self.us)


def gated_calls(session: "Session", arm: "Arm", items: list[tuple["BoundSet | None", dict | None]],
                timeout_s: float, generator: "torch.Generator", pad: Pad
                ) -> tuple[list["CallTiming"], list["CallRecord | None"], int]:
    """A block of calls, one in flight; ``bound`` None is a no-op call (the timer floor).
    Returns the timings (``arm_ms`` filled later from the arm's ``times``), the records to
    check, and how many calls were late."""
    import torch


    link = session.link(arm)
    stream = torch.cuda.current_stream()
    event = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    calls: list[CallTiming] = []
    records: list[CallRecord | None] = []
    late = 0
    for bound, values in items:
        positions = session._positions(bound, generator)  # drawn now, in the judge's memory
        p0, q0, j0, j1 = event(), event(), event(), event()
        t0 = time.perf_counter_ns()
        p0.record()
        session._load_queued(bound, values)
        q0.record()  # the preparation compared across arms ends here: the pad may grow between blocks
        pad.queue()
        j0.record()
        link.ready.record()
        session.request(arm, {"op": "chain", "id": "null" if bound is None else bound.id}, timeout_s)
        was_late = bool(link.ready.query())  # the arm's call may have been queued after ready fired
        was_late = bool(link.done.query()) or was_late  # done already fired: j1 would be a host time
        stream.wait_event(link.done)
        j1.record()
        samples = {name: (idx, checks.gather(session._output(bound, name), idx)) for name, idx in positions.items()}
        changed = [] if bound is None else [tensors.bitwise_differs(bound.buffers.inputs[n], bound.values[n])
                                            for n in session.changing]
        after = event()
        after.record()
        _wait(session, after, arm, timeout_s)
        wall = (time.perf_counter_ns() - t0) / 1e6
        late += was_late
        calls.append(CallTiming(arm_ms=None, judge_ms=float(j0.elapsed_time(j1)), wall_ms=wall,
                                prep_ms=float(p0.elapsed_time(q0)), total_ms=wall))
        if bound is None:
            records.append(None)
        else:
            records.append(CallRecord(bound, bound.values, bound.poison_run,
                                      {name: (idx, got.cpu()) for name, (idx, got) in samples.items()}, changed))
    return calls, records, late


def _wait(session: "Session", event: Any, arm: "Arm", timeout_s: float) -> None:
    """Spin on the event for the first 2 ms (a call is well under that), then the session's
    sleeping poll up to the deadline: never blocked in the driver, so a kernel that never
    ends is a FAIL at the deadline."""
    spin_until = time.perf_counter_ns() + 2_000_000
    while time.perf_counter_ns() < spin_until:
        if event.query():
            return
        time.sleep(0)
    session._await(event, arm, min(timeout_s, session.timeout()))

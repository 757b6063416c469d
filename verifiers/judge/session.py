"""The judge's working state for one shape, and the primitives every stage uses.

``Session`` generates input values (seeded, or fresh per call from the judge's secret
stream), computes the oracle, allocates shared buffer sets, has an arm build over them,
and calls, times and checks that arm. Everything an arm could tamper with is read back
by the judge from the shared memory it owns: the outputs, and the inputs (which must
come back bitwise unchanged). ``Blame`` carries who is at fault: a trusted arm
(baseline, reference) is the problem's fault (ERROR), the candidate's is FAIL.
"""
from __future__ import annotations

import os
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verifiers.judge import checks
from verifiers.launch import procwatch
from verifiers.ipc import shared_buffers as shared
from verifiers.judge import tensors
from verifiers.arms.handle import ArmFailure, ArmHandle
from verifiers.hw.device import Device, Flusher
from verifiers.judge.blame import Blame

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from verifiers.options import VerifyOptions
    from verifiers.problem import Problem


@dataclass
class Arm:
    handle: ArmHandle
    label: str  # e.g. "baseline torch_mm (A)"
    trusted: bool  # baseline / reference code: its failures are the problem's (ERROR)
    next_id: int = 0
    cutime_mark: float | None = None  # children CPU seconds once building is over
    prefix: Any = None  # its bytecode prefix directory
    files: list[str] = field(default_factory=list)  # source files it loaded (trusted arms)
    about: dict[str, str] = field(default_factory=dict)  # what its builder said ran (kept for trusted arms)
    link: "ChainLink | None" = None  # its interprocess events (the chained protocol on GPUs)

    def new_id(self) -> str:
        self.next_id += 1
        return f"s{self.next_id}"


@dataclass
class BoundSet:
    arm: Arm
    id: str
    buffers: shared.SharedSet
    values: dict[str, "torch.Tensor"]  # judge-private: what the inputs hold now
    poison_run: int = 0


@dataclass
class CallTiming:
    arm_ms: float | None  # filled from the arm's ``times`` reply
    judge_ms: float  # the judge's own clock of the call
    wall_ms: float  # request -> sampled outputs read back, judge's wall clock
    prep_ms: float  # the judge's preparation (refresh, poison, flush, sync)
    total_ms: float = 0.0  # everything one call costs the judge (preparation and check included)


@dataclass
class ChainLink:
    """One arm's two interprocess events, created by the judge: ``ready`` (recorded by the
    judge once a call's values are in the arm's buffers) and ``done`` (recorded by the arm
    after its launch). Each arm has its own pair, so no arm can move another's chain."""

    ready: Any
    done: Any


@dataclass
class Session:
    problem: "Problem"
    dims: dict[str, int]
    device: Device
    flusher: Flusher
    options: "VerifyOptions"
    rng: random.Random  # seeded from os.urandom in the judge; never leaves the judge
    deadline: float  # time.monotonic() by which the shape must be done
    changing: list[str] = field(default_factory=list)
    refresh_checked: bool = False  # the first refresh of the shape was checked (``stage``)

    # -- values and the oracle -------------------------------------------------------
    def values_for(self, seed: int, perturbation: str | None = None) -> dict[str, "torch.Tensor"]:
        dev = self.device.torch_device
        try:
            values = self.problem.make_inputs(dict(self.dims), int(seed), dev)
        except Exception as exc:
            raise Blame(f"problem.make_inputs({self.dims}, seed={seed}) raised {type(exc).__name__}: {exc}") from exc
        bad = tensors.check_plain(values, "problem inputs", dev)
        if perturbation is not None:
            try:
                values = self.problem.perturbations[perturbation](values)
            except Exception as exc:
                raise Blame(f"perturbation {perturbation!r} raised {type(exc).__name__}: {exc}") from exc
            bad += tensors.check_plain(values, f"perturbed inputs ({perturbation})", dev)
        if bad:
            raise Blame("; ".join(bad))
        if not self.changing:
            self.changing = [n for n in values if n not in self.problem.static_inputs]
        return values

    def oracle(self, values: Mapping[str, "torch.Tensor"]) -> dict[str, "torch.Tensor"]:
        try:
            out = self.problem.oracle(tensors.clone_tensors(values), dict(self.dims))
        except Exception as exc:
            raise Blame(f"problem.oracle raised {type(exc).__name__}: {exc}") from exc
        bad = tensors.check_plain(out, "oracle outputs", None)
        if bad:
            raise Blame("; ".join(bad))
        return out

    def make_outputs(self) -> dict[str, "torch.Tensor"]:
        try:
            out = self.problem.make_outputs(dict(self.dims), self.device.torch_device)
        except Exception as exc:
            raise Blame(f"problem.make_outputs raised {type(exc).__name__}: {exc}") from exc
        bad = tensors.check_plain(out, "problem outputs", self.device.torch_device)
        if bad:
            raise Blame("problem.make_outputs returned bad tensors: " + "; ".join(bad))
        return out

    # -- arms -------------------------------------------------------------------------
    def timeout(self, cap: float | None = None) -> float:
        left = max(self.deadline - time.monotonic(), 0.5)
        return min(left, cap) if cap else left

    def request(self, arm: Arm, message: dict[str, Any], timeout_s: float | None = None,
                fds: list[int] | tuple[int, ...] = ()) -> dict[str, Any]:
        try:
            return arm.handle.request(message, timeout_s if timeout_s is not None else self.timeout(), fds)
        except ArmFailure as exc:
            raise Blame(str(exc), arm) from None

    def bind(self, arm: Arm, values: Mapping[str, "torch.Tensor"], poison_run: int = 0) -> BoundSet:
        outputs = self.make_outputs()
        buffers = shared.allocate(values, outputs, self.device.torch_device)
        tensors.copy_into(buffers.inputs, values)
        tensors.poison(buffers.outputs, poison_run)
        self.device.sync()
        bound = BoundSet(arm, arm.new_id(), buffers, {k: v for k, v in values.items()}, poison_run)
        try:
            reply = self.request(arm, {"op": "build", "id": bound.id, "set": buffers.wire}, fds=buffers.fds)
            about = reply.get("about") if arm.trusted else None
            if isinstance(about, dict):
                arm.about = {str(k)[:40]: str(v)[:300] for k, v in list(about.items())[:4]}
        finally:
            buffers.close_descriptors()
        return bound

    def call(self, bound: BoundSet) -> None:
        self.request(bound.arm, {"op": "call", "id": bound.id})

    def release(self, bound: BoundSet) -> None:
        try:
            bound.arm.handle.request({"op": "release", "id": bound.id}, 10.0)
        except ArmFailure:
            pass
        bound.buffers.close()

    def inputs_changed(self, bound: BoundSet, names: list[str] | None = None) -> list[str]:
        names = list(bound.values) if names is None else names
        return [n for n in names if not tensors.bitwise_equal(bound.buffers.inputs[n], bound.values[n])]

    # -- per-call refresh, timing and checks -----------------------------------------
    def fresh_seed(self) -> int:
        return self.rng.getrandbits(31)

    def refresh(self, values: dict[str, "torch.Tensor"]) -> None:
        """New values for the changing inputs, written into the judge's private copy."""
        seed = self.fresh_seed()
        if self.problem.refresh_inputs is not None:
            try:
                self.problem.refresh_inputs(values, dict(self.dims), seed)
            except Exception as exc:
                raise Blame(f"problem.refresh_inputs raised {type(exc).__name__}: {exc}") from exc
            return
        fresh = self.values_for(seed)
        for name in self.changing:
            values[name] = fresh[name]

    def stage(self, template: Mapping[str, "torch.Tensor"], n: int) -> list[dict[str, "torch.Tensor"]]:
        """``n`` sets of fresh values in the judge's private memory (never in a shared pool),
        one per coming call; the static inputs, and the inputs the problem's refresh does not
        write (``Problem.refreshed_inputs``), are the template's own tensors. Nothing of a set
        reaches an arm before ``load`` writes it for that arm's call."""
        in_place = self.problem.refresh_inputs is not None
        copied = self.refreshed()
        out = []
        for _ in range(n):
            values = {k: (v.clone() if in_place and k in copied else v) for k, v in template.items()}
            if in_place and not self.refresh_checked:
                self._refresh_checked_once(values, copied)
            else:
                self.refresh(values)
            out.append(values)
        return out

    def refreshed(self) -> list[str]:
        """The changing inputs a staged call gets its own copy of: those the problem's refresh
        writes (every changing one when it declares none, or has no refresh hook)."""
        declared = self.problem.refreshed_inputs if self.problem.refresh_inputs is not None else None
        return list(self.changing) if declared is None else [n for n in self.changing if n in declared]

    def _refresh_checked_once(self, values: dict[str, "torch.Tensor"], copied: list[str]) -> None:
        """The first refresh of a shape, checked: the tensors shared with the template (not
        declared refreshed) must come out of it bitwise unchanged, or the shared template would
        be corrupted silently (the problem's fault: ERROR). Compared by digest, not by a clone:
        the shared tensors are the big ones (7 GiB of expert weights at the MoE DeepSeek shape)."""
        shared = [n for n in self.changing if n not in copied]
        before = {n: tensors.content_digest(values[n]) for n in shared}
        self.refresh(values)
        written = [n for n in shared if tensors.content_digest(values[n]) != before[n]]
        if written:
            raise Blame(f"problem.refresh_inputs wrote {written}, which Problem.refreshed_inputs does not declare")
        self.refresh_checked = True

    def load(self, bound: BoundSet, values: dict[str, "torch.Tensor"]) -> float:
        """One staged set into the arm's buffers, poisoned outputs, cache flush: everything the
        judge does right before a call; its own time for it (ms)."""
        t0 = time.perf_counter_ns()
        self._load_queued(bound, values)
        self.device.sync()
        return (time.perf_counter_ns() - t0) / 1e6

    def _load_queued(self, bound: BoundSet | None, values: dict[str, "torch.Tensor"] | None) -> None:
        """``load`` without the synchronise: device-to-device copies, fills and the flush,
        queued on the judge's stream (``bound`` None: the flush only, for a no-op call)."""
        if bound is not None and values is not None:
            for name in self.changing:
                bound.buffers.inputs[name].copy_(values[name])
            bound.values = values
            tensors.poison(bound.buffers.outputs, 0)
            bound.poison_run = 0
        self.flusher.flush()

    def prepare(self, bound: BoundSet) -> float:
        """Fresh inputs, poisoned outputs, cache flush for one call (untimed paths)."""
        return self.load(bound, self.stage(bound.values, 1)[0])

    def read_samples(self, bound: BoundSet, generator: "torch.Generator") -> dict[str, tuple[Any, Any]]:
        """Draw output indices now (after the call) and read those elements back into the
        judge's memory. On a GPU the read waits behind anything the arm's context still has
        queued, so it marks the true end of the call on the judge's clock."""
        out = {}
        for name, t in bound.buffers.outputs.items():
            idx = checks.sample_indices(t.numel(), self.options.check_samples, generator, t.device)
            out[name] = (idx, checks.gather(t, idx).cpu())
        return out

    def timed_call(self, bound: BoundSet, values: dict[str, "torch.Tensor"], timeout_s: float,
                   generator: "torch.Generator") -> tuple[CallTiming, "CallRecord"]:
        """One call of the timed protocol: the staged values loaded, ``timed`` on the arm, the
        sampled read. The judge's clock: on CPU the arm's CPU time from before the preparation
        to its answer; on GPU the wall clock from the request to the sampled outputs being in
        the judge's hands. The record is checked later (``check_call``), outside any block."""
        clock = bound.arm.handle.cpu
        c0 = clock.ns()
        prep = self.load(bound, values)
        t0 = time.perf_counter_ns()
        self.request(bound.arm, {"op": "timed", "id": bound.id}, timeout_s)
        c1 = clock.ns()
        samples = self.read_samples(bound, generator)
        t1 = time.perf_counter_ns()
        wall = (t1 - t0) / 1e6
        judge = wall if self.device.is_gpu else (c1 - c0) / 1e6
        return CallTiming(arm_ms=None, judge_ms=judge, wall_ms=wall, prep_ms=prep), self.record(bound, samples)

    def record(self, bound: BoundSet, samples: dict[str, tuple[Any, Any]]) -> "CallRecord":
        """What the check of this call needs, taken now: its values, its samples, and whether
        its inputs still hold them (compared on the device, read back later)."""
        changed = [tensors.bitwise_differs(bound.buffers.inputs[n], bound.values[n]) for n in self.changing]
        return CallRecord(bound, bound.values, bound.poison_run, samples, changed)

    # -- the chained protocol (GPUs) ---------------------------------------------------
    def chain_available(self) -> str | None:
        """None when interprocess events work on this device, else why not."""
        import torch

        try:
            torch.cuda.Event(enable_timing=False, blocking=False, interprocess=True).ipc_handle()
        except Exception as exc:  # a runtime without IPC events: the per-call protocol
            return f"interprocess events unavailable ({type(exc).__name__}: {str(exc)[:120]})"
        return None

    def link(self, arm: Arm) -> ChainLink:
        """The arm's event pair, once per arm. Each side creates the event it records and
        the other opens it (the pattern torch's own CUDA IPC uses): ``ready`` is the
        judge's, ``done`` the arm's. A handle that does not open is the arm's fault."""
        import base64
        import binascii

        import torch

        if arm.link is None:
            ready = torch.cuda.Event(enable_timing=False, blocking=False, interprocess=True)
            reply = self.request(arm, {"op": "link", "ready": base64.b64encode(ready.ipc_handle()).decode()}, 60.0)
            text = reply.get("done")
            try:
                if not isinstance(text, str) or len(text) > 1024:
                    raise ValueError("not a short string")
                done = torch.cuda.Event.from_ipc_handle(self.device.torch_device, base64.b64decode(text, validate=True))
            except (ValueError, TypeError, RuntimeError, binascii.Error) as exc:
                raise Blame(f"{arm.label}: its interprocess event did not open ({type(exc).__name__}: "
                            f"{str(exc)[:160]})", arm) from None
            arm.link = ChainLink(ready, done)
        return arm.link

    def chained_calls(self, arm: Arm, items: list[tuple[BoundSet | None, dict[str, "torch.Tensor"] | None]],
                      timeout_s: float, generator: "torch.Generator"
                      ) -> tuple[list[CallTiming], list["CallRecord | None"]]:
        """A block of calls with no host round trip on the device's path between them.

        Per call, on the judge's stream: wait for the arm's ``done`` of the previous call,
        take that call's samples and input-change flags, write this call's values, poison,
        flush, record ``ready``; the arm's stream waits for ``ready``, runs ``launch()`` and
        records ``done``. The values of call *i + 1* are written into memory the arm maps only
        after call *i*'s outputs were captured -- ordered on the device, so no arm can batch,
        pipeline or pre-work calls, whatever it does on the host. Both hosts only queue work,
        so the device runs the calls back to back as in one process.

        The judge's clock of a call is its own pair of device events: from its ``ready`` to
        its stream resuming after the arm's ``done`` (the arm's whole call plus two context
        switches, which the timer floor measures the same way). Work an arm leaves on a
        stream ``done`` does not follow is not waited for: its outputs are captured as they
        are (poison: the call fails), and any device time it takes delays the judge's clock or
        its own preparation (``prep_ms``, compared across arms). ``bound`` None is a no-op
        call (``id = "null"``) for the timer floor."""
        import torch

        link = self.link(arm)
        stream = torch.cuda.current_stream()
        event = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
        n = len(items)
        marks, gos = [event() for _ in range(n + 1)], [event() for _ in range(n)]
        # sample positions drawn now into the judge's private memory: no arm can read them
        positions = [self._positions(bound, generator) for bound, _ in items]
        self.device.sync()
        records: list[CallRecord | None] = []

        def capture(i: int) -> None:  # queued on the judge's stream; samples read back after the block
            bound = items[i][0]
            samples = {name: (idx, checks.gather(self._output(bound, name), idx)) for name, idx in positions[i].items()}
            if bound is None:
                records.append(None)
                return
            changed = [tensors.bitwise_differs(bound.buffers.inputs[name], bound.values[name]) for name in self.changing]
            records.append(CallRecord(bound, bound.values, bound.poison_run, samples, changed))

        t0 = time.perf_counter_ns()
        marks[0].record()
        for i, (bound, values) in enumerate(items):
            if i:
                stream.wait_event(link.done)
                marks[i].record()
                capture(i - 1)
            self._load_queued(bound, values)
            gos[i].record()
            link.ready.record()
            self.request(arm, {"op": "chain", "id": "null" if bound is None else bound.id}, timeout_s)
        stream.wait_event(link.done)
        marks[n].record()
        capture(n - 1)
        self._await(marks[n], arm, min(timeout_s, self.timeout()))
        wall = (time.perf_counter_ns() - t0) / 1e6 / max(n, 1)
        calls = [CallTiming(arm_ms=None, judge_ms=float(gos[i].elapsed_time(marks[i + 1])), wall_ms=wall,
                            prep_ms=float(marks[i].elapsed_time(gos[i])), total_ms=wall) for i in range(n)]
        for record in records:
            if record is not None:
                record.samples = {name: (idx, got.cpu()) for name, (idx, got) in record.samples.items()}
        return calls, records

    def _positions(self, bound: BoundSet | None, generator: "torch.Generator") -> dict[str, "torch.Tensor"]:
        if bound is None:
            buf = self._null_buffer()
            return {"null": checks.sample_indices(buf.numel(), self.options.check_samples, generator, buf.device)}
        return {name: checks.sample_indices(t.numel(), self.options.check_samples, generator, t.device)
                for name, t in bound.buffers.outputs.items()}

    def _output(self, bound: BoundSet | None, name: str) -> "torch.Tensor":
        return self._null_buffer() if bound is None else bound.buffers.outputs[name]

    def _null_buffer(self) -> "torch.Tensor":
        import torch

        if getattr(self, "_null_buf", None) is None:
            self._null_buf = torch.zeros(4096, device=self.device.torch_device)
        return self._null_buf

    def _await(self, event: Any, arm: Arm, timeout_s: float) -> None:
        """Wait for a judge event without blocking in the driver, so a kernel that never ends
        is a FAIL at the deadline (the arm is then ended, and its work with its context)."""
        deadline = time.monotonic() + timeout_s
        while not event.query():
            if time.monotonic() > deadline:
                raise Blame(f"{arm.label}: its calls did not complete on the device within {timeout_s:.0f} s "
                            "(a kernel that does not end)", arm)
            time.sleep(0.0002)

    def null_call(self, arm: Arm, timeout_s: float, generator: "torch.Generator") -> CallTiming:
        """The timer floor: the same protocol around a launch that does nothing (the sampled
        read included, from a judge-owned buffer)."""
        null_buf = self._null_buffer()
        clock = arm.handle.cpu
        c0 = clock.ns()
        t_prep = time.perf_counter_ns()
        self.flusher.flush()
        self.device.sync()
        prep = (time.perf_counter_ns() - t_prep) / 1e6
        t0 = time.perf_counter_ns()
        self.request(arm, {"op": "timed", "id": "null"}, timeout_s)
        c1 = clock.ns()
        idx = checks.sample_indices(null_buf.numel(), self.options.check_samples, generator, null_buf.device)
        checks.gather(null_buf, idx).cpu()
        t1 = time.perf_counter_ns()
        wall = (t1 - t0) / 1e6
        return CallTiming(None, wall if self.device.is_gpu else (c1 - c0) / 1e6, wall, prep)

    def idle_probe_ms(self) -> float:
        """How long a tiny kernel of the judge's takes to complete: long when another
        context (a suspended arm's leftover work) still holds the device. 0 on CPU."""
        import torch

        if not self.device.is_gpu:
            return 0.0
        if getattr(self, "_probe_buf", None) is None:
            self._probe_buf = torch.zeros(1, device=self.device.torch_device)
        t0 = time.perf_counter_ns()
        self._probe_buf.add_(1.0)
        self.device.sync()
        return (time.perf_counter_ns() - t0) / 1e6

    def check_call(self, record: "CallRecord", pool: checks.SampleChecks) -> list[str]:
        """Inputs bitwise unchanged, and the sampled outputs right for this call's inputs."""
        changed = [n for n, flag in zip(self.changing, record.changed) if bool(flag)]
        problems = [f"the call modified its inputs {bad} (inputs are read-only)" for bad in [changed] if bad]
        samples, outputs = record.samples, record.bound.buffers.outputs
        index = {name: idx for name, (idx, _) in samples.items()}
        try:
            expect = checks.oracle_samples(self.problem, record.values, self.dims, index)
        except Exception as exc:
            raise Blame(f"the oracle at sampled elements raised {type(exc).__name__}: {exc}") from exc
        pool.calls += 1
        for name, (_, got) in samples.items():
            sentinel = tensors.poison_value(outputs[name], record.poison_run)
            problems += pool.add(name, got, expect[name], sentinel)
        return problems


@dataclass
class CallRecord:
    """One checked call as the judge took it: the values it wrote, the samples it read."""

    bound: BoundSet
    values: dict[str, "torch.Tensor"]
    poison_run: int
    samples: dict[str, tuple[Any, Any]]
    changed: list[Any]  # per changing input: a 0-d bool tensor (true: the call wrote into it)


@dataclass
class TreeWatch:
    """Processes the arms started: any live descendant, adopted orphan or reaped child
    (children CPU time growing once building is over) is a violation."""

    judge_pid: int
    zygote_pid: int = 0
    arms: dict[int, Arm] = field(default_factory=dict)
    candidate_started: bool = False
    exited: set[int] = field(default_factory=set)  # arms closed by the judge (the zygote reaps them)
    # scheduling and resource limits of the trusted processes (judge, zygote, baselines): an arm
    # running as root can lower another process's priority, pin it to one CPU or cut its limits
    guarded: dict[int, tuple[str, procwatch.SchedProfile]] = field(default_factory=dict)

    def add(self, arm: Arm) -> None:
        self.arms[arm.handle.pid] = arm
        if not arm.trusted and not self.candidate_started:
            self.candidate_started = True
            self._guard(self.judge_pid, "the judge")
            self._guard(self.zygote_pid, "the zygote")
            for pid, other in self.arms.items():
                if other.trusted:
                    self._guard(pid, other.label)

    def expect(self, arm: Arm) -> None:
        """An arm process forked ahead of its code (``verifiers.judge.profiler_arms``): known, so
        not a stray, and its descendants watched; the candidate has not started until ``add``."""
        self.arms[arm.handle.pid] = arm

    def _guard(self, pid: int, label: str) -> None:
        profile = procwatch.sched_profile(pid) if pid else None
        if profile is not None:
            self.guarded[pid] = (label, profile)

    def close(self, arm: Arm) -> None:
        """End the arm process (reaping it) and stop watching it."""
        arm.handle.close()
        self.arms.pop(arm.handle.pid, None)
        self.guarded.pop(arm.handle.pid, None)
        self.exited.add(arm.handle.pid)

    def _sched_changes(self) -> list[Blame]:
        """Trusted processes whose scheduling or limits differ from their guarded profile: only
        a candidate can have done it (a baseline's own settings were taken once it was warm).
        Blamed once, then the new profile is the reference."""
        found = []
        owner = next((a for a in self.arms.values() if not a.trusted), None)
        for pid, (label, before) in list(self.guarded.items()):
            now = procwatch.sched_profile(pid)
            if now is None:
                continue
            changes = before.differences(now)
            if changes:
                self.guarded[pid] = (label, now)
                if not self.candidate_started:  # no candidate yet: a baseline settling, not sabotage
                    continue
                found.append(Blame(_describe_changes(label, changes), owner, candidate=True))
        return found

    def mark_built(self, arm: Arm) -> None:
        arm.cutime_mark = procwatch.children_cpu_s(arm.handle.pid)
        if arm.trusted:  # its own settings once warm; a baseline started after the candidate included
            self._guard(arm.handle.pid, arm.label)

    def check(self) -> list[Blame]:
        table = procwatch.all_processes()
        found: list[Blame] = []
        for pid, arm in list(self.arms.items()):
            below = procwatch.descendants(pid, table)
            if below:
                procwatch.kill_tree([p.pid for p in below])
                names = ", ".join(procwatch.describe(p) for p in below[:4])
                found.append(Blame(f"{arm.label} started {len(below)} process(es): {names}", arm))
            info = table.get(pid)
            if arm.cutime_mark is not None and info is not None:
                now = (info.cutime_ticks + info.cstime_ticks) / os.sysconf("SC_CLK_TCK")
                if now > arm.cutime_mark + 1e-9:
                    found.append(Blame(f"{arm.label}: child processes used {now - arm.cutime_mark:.3f} s of CPU after "
                                       "building (work done in a forked helper)", arm))
                    arm.cutime_mark = now
        found += self._sched_changes()
        parents = {self.judge_pid, self.zygote_pid}
        strays = [p for p in table.values() if p.ppid in parents and p.pid not in self.arms
                  and p.pid != self.zygote_pid and p.pid not in self.exited]
        for p in strays:
            procwatch.kill_tree([q.pid for q in procwatch.descendants(p.pid, table)] + [p.pid])
            owner = next((a for a in self.arms.values() if not a.trusted), None)
            found.append(Blame(f"a process escaped its arm and was adopted by the judge ({procwatch.describe(p)})",
                               owner, candidate=self.candidate_started))
        _reap([p.pid for p in strays])
        return found


def _describe_changes(label: str, changes: list[str]) -> str:
    return (f"{label}'s scheduling or resource limits were changed from outside while the candidate existed: "
            + "; ".join(changes[:3]))


def _reap(pids: list[int], timeout_s: float = 1.0) -> None:
    deadline = time.monotonic() + timeout_s
    for pid in pids:
        while True:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                break
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.005)

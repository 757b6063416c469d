"""torch.profiler Chrome-trace JSON (``prof.export_chrome_trace`` / ``*.pt.trace.json[.gz]``).

The trace is ``{"traceEvents": [...], "deviceProperties": [...], ...}`` (a bare event list
is accepted too); events are streamed (``json_stream``), never loaded whole, and may come
in any order. Events used, as Kineto writes them on CUDA and ROCm:

- device kernels: ``ph: "X"``, ``cat: "kernel"``, ``pid`` = device, ``tid`` = stream,
  ``ts``/``dur`` in µs; ``args`` carry ``External id`` (the launching CPU op's id),
  ``correlation`` (the runtime launch's id), and per platform ``grid``, ``block``,
  ``registers per thread``, ``shared memory``;
- CPU side, per (pid, tid), properly nested: ``cpu_op`` (aten and custom ops; with
  ``record_shapes=True`` their ``args`` hold ``Input Dims``, ``Input type`` and
  ``Concrete Inputs``), ``user_annotation`` (``record_function`` ranges,
  ``ProfilerStep#N``), ``python_function`` (``with_stack``/``with_modules``; only the
  ``nn.Module: Linear_0`` scopes are kept), and runtime calls ``cuda_runtime`` /
  ``cuda_driver`` (``cudaLaunchKernel``, ``hipLaunchKernel``, ``hipExtModuleLaunchKernel``,
  ...) whose ``args.correlation`` equals the kernel's;
- flow events ``ph: "s"``/``"f"``, ``cat: "ac2g"``, ``id`` = correlation: ``s`` on the
  launching thread at the runtime call, ``f`` on the kernel's (pid, tid, ts).

A kernel is linked to its launching op by, in order: its ``External id``; its
``correlation`` -> the runtime call -> that call's ``External id`` or enclosing op; the
``ac2g`` flow -> the runtime call enclosing the flow start. The launching op is the
innermost op active at launch (``LaunchContext.op``, never ``ProfilerStep#N``).

Segment scope (``LaunchContext.scope``): the innermost ``nn.Module:`` python_function
enclosing the launch (the runtime call where known, else the op), else the outermost
``cpu_op``, else the innermost ``user_annotation`` other than ``ProfilerStep#N``; kernels
launched under the same scope instance form one segment. ``LaunchContext.ranges`` lists
every ``record_function`` range around the launch, outermost first.

Only ``cat: "kernel"`` events are dispatches; memcpy/memset events are counted in
``skipped``. Memory: one small record per kept CPU event and per kernel; identical op
inputs (every layer of a model records the same dims) are stored once.
"""
from __future__ import annotations

import bisect
import dataclasses
import math
import re
from collections import Counter
from collections.abc import Hashable
from typing import Any

from trace_readers.errors import TraceReadError
from trace_readers.json_stream import JsonStreamError, stream_array, stream_error
from trace_readers.records import (
    KERNEL_DISPATCH, Columns, CpuEvent, DeviceRange, KernelDispatch, LaunchContext, OpCall, Resources, Trace,
)
from trace_readers.source import READ_ERRORS, SizeLimitExceeded, Source, read_error

FORMAT = "torch_trace"
SEGMENT_RULE = (
    "torch trace: kernels launched under the same innermost nn.Module scope, else the same top-level "
    "CPU op, else the same record_function range (ProfilerStep#N excluded)"
)
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "privateuse1_runtime", "privateuse1_driver",
                           "hip_runtime", "hip_driver"})
_OP_CATS = frozenset({"cpu_op", "user_annotation"})
_GPU_OTHER = frozenset({"gpu_memcpy", "gpu_memset", "gpu_user_annotation"})
_KNOWN_CATS = _RUNTIME_CATS | _OP_CATS | _GPU_OTHER | {"kernel", "python_function", "ac2g"}
_PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")
_MODULE_PREFIX = "nn.Module:"
_EXPECTED = "a complete torch.profiler Chrome trace (JSON)"


class _Cpu:
    __slots__ = ("index", "cat", "name", "thread", "start", "end", "ext", "op", "parent", "lds")

    def __init__(self, index: int, cat: str, name: str, thread: Hashable, start: int, end: int,
                 ext: int | None, op: OpCall | None) -> None:
        self.index, self.cat, self.name, self.thread = index, cat, name, thread
        self.start, self.end, self.ext, self.op = start, end, ext, op
        self.parent: _Cpu | None = None
        self.lds: int | None = None  # runtime launch calls: the dynamic shared memory they passed


def _ns(value: Any) -> int | None:
    """µs (int or float) -> ns; None for anything else (bools, strings, NaN)."""
    if type(value) is float:
        return round(value * 1000) if math.isfinite(value) else None
    if type(value) is int:
        return value * 1000
    return None


def _int_arg(value: Any) -> int | None:
    return value if type(value) is int else None


class _Reader:
    """Consumes events one by one and keeps what linking needs, compactly."""

    def __init__(self, label: str, detail: bool = False) -> None:
        self.label = label
        self.detail = detail
        self.device_ranges: list[DeviceRange] = []
        self.count = 0
        self.kernels: list[tuple] = []  # (index, name, start ns, dur ns, pid, tid, External id, correlation, resources, kind)
        self.skipped: Counter = Counter()
        self.by_external: dict[int, _Cpu] = {}
        self.by_correlation: dict[int, _Cpu] = {}
        self.flow_start: dict[Any, tuple[Hashable, int]] = {}
        self.flow_end: dict[tuple, Any] = {}
        self.threads: dict[Hashable, list[_Cpu]] = {}
        self.cpu_ops = 0
        self.device_props: list = []
        self.top_keys: list[str] = []
        self.saw_events = False
        self._strings: dict[str, str] = {}
        self._thread_keys: dict[tuple, tuple] = {}
        self._ops: dict[tuple, OpCall] = {}
        self._resources: dict[tuple, Resources | None] = {}

    # -- top level ---------------------------------------------------------------------
    def top_level(self, key: str, value: Any) -> None:
        self.top_keys.append(key)
        if key == "deviceProperties" and isinstance(value, list):
            self.device_props = value

    # -- events ------------------------------------------------------------------------
    def add(self, ev: Any) -> None:
        i = self.count
        self.count += 1
        if type(ev) is not dict:
            raise TraceReadError(f"event is a {type(ev).__name__}", file=self.label, where=f"traceEvents[{i}]",
                                 expected="a JSON object per trace event")
        ph = ev.get("ph")
        if ph == "X":
            cat = ev.get("cat")
            if cat not in _KNOWN_CATS:
                cat = cat.lower() if isinstance(cat, str) else ""
            if cat == "kernel" or (self.detail and (cat == "gpu_memcpy" or cat == "gpu_memset")):
                self._kernel(i, ev, cat)
            elif cat in _OP_CATS or cat in _RUNTIME_CATS:
                self._cpu(i, ev, cat)
            elif cat == "python_function":
                name = ev.get("name")
                if isinstance(name, str) and name.startswith(_MODULE_PREFIX):
                    self._cpu(i, ev, cat)  # only module scopes matter; other frames are not kept
            elif cat in _GPU_OTHER:
                self.skipped[cat] += 1
                if self.detail and cat == "gpu_user_annotation":
                    start, dur = self._timing(i, ev)
                    pid, tid = ev.get("pid"), ev.get("tid")
                    self.device_ranges.append(DeviceRange(str(ev.get("name", "")), start, start + dur, (
                        pid if isinstance(pid, Hashable) else None, None, tid if isinstance(tid, Hashable) else None)))
        elif (ph == "s" or ph == "f") and ev.get("cat") == "ac2g":
            ts = _ns(ev.get("ts"))
            if ts is None or "id" not in ev:
                return  # a malformed flow only loses a fallback link
            fid = ev["id"]
            if not isinstance(fid, Hashable):
                return
            if ph == "s":
                self.flow_start[fid] = (self._thread(ev), ts)
            else:
                self.flow_end[(ev.get("pid"), ev.get("tid"), ts)] = fid

    def _timing(self, i: int, ev: dict) -> tuple[int, int]:
        ts, du = ev.get("ts"), ev.get("dur")
        if type(ts) is float and type(du) is float and du >= 0 and math.isfinite(ts) and math.isfinite(du):
            return round(ts * 1000), round(du * 1000)  # Kineto writes floats: the common case inline
        start, dur = _ns(ts), _ns(du)
        if start is None or dur is None or dur < 0:
            raise TraceReadError(
                f"event {str(ev.get('name'))[:80]!r} has ts={str(ev.get('ts'))[:40]}, dur={str(ev.get('dur'))[:40]}",
                file=self.label, where=f"traceEvents[{i}]", expected="numeric 'ts' and non-negative 'dur' in µs",
            )
        return start, dur

    def _string(self, s: str) -> str:
        return self._strings.setdefault(s, s)

    def _thread(self, ev: dict) -> tuple:
        key = (ev.get("pid"), ev.get("tid"))
        try:
            return self._thread_keys.setdefault(key, key)
        except TypeError:  # unhashable pid/tid: all such events share one thread
            return ("?", "?")

    def _kernel(self, i: int, ev: dict, cat: str = "kernel") -> None:
        name = ev.get("name")
        if not isinstance(name, str) or not name.strip():
            raise TraceReadError(f"kernel event has name {str(name)[:80]!r}", file=self.label,
                                 where=f"traceEvents[{i}].name", expected="the kernel's name as a non-empty string")
        start, dur = self._timing(i, ev)
        args = ev.get("args")
        if args is None:
            args = {}
        elif type(args) is not dict:
            raise TraceReadError("kernel 'args' is not an object", file=self.label, where=f"traceEvents[{i}].args",
                                 expected="a JSON object")
        pid, tid = ev.get("pid"), ev.get("tid")
        self.kernels.append((i, self._string(name.strip()), start, dur, pid if isinstance(pid, Hashable) else None,
                             tid if isinstance(tid, Hashable) else None, _int_arg(args.get("External id")),
                             _int_arg(args.get("correlation")), self._kernel_resources(args),
                             KERNEL_DISPATCH if cat == "kernel" else cat))

    def _kernel_resources(self, args: dict) -> Resources | None:
        block = args.get("block")
        key = (args.get("registers per thread"), args.get("shared memory"), tuple(block) if isinstance(block, list) else None)
        try:
            found = self._resources.get(key, False)
        except TypeError:
            return None
        if found is not False:
            return found  # type: ignore[return-value]
        regs, lds, blk = key
        values: dict[str, Any] = {}
        if type(regs) is int and regs >= 0:
            values["registers_per_thread"] = regs
        if type(lds) is int and lds >= 0:
            values["lds_bytes"] = lds
        if blk is not None and len(blk) == 3 and all(type(d) is int and d >= 0 for d in blk):
            values["workgroup_size"] = blk
        res = Resources(**values) if values else None
        self._resources[key] = res
        return res

    def with_lds(self, res: Resources | None, lds: int) -> Resources:
        """``res`` with the launch call's shared memory filled in (interned)."""
        key = ("lds", res, lds)
        found = self._resources.get(key)
        if found is None:
            found = self._resources[key] = dataclasses.replace(res, lds_bytes=lds) if res else Resources(lds_bytes=lds)
        return found

    def _cpu(self, i: int, ev: dict, cat: str) -> None:
        start, dur = self._timing(i, ev)
        args = ev.get("args")
        if type(args) is not dict:
            args = {}
        name = ev.get("name")
        name = self._string(name if isinstance(name, str) else str(name))
        op = None
        if cat == "cpu_op":
            self.cpu_ops += 1
            op = self._op(name, args)
        cpu = _Cpu(i, cat, name, self._thread(ev), start, start + dur, _int_arg(args.get("External id")), op)
        if cpu.ext is not None and cat in _OP_CATS:
            known = self.by_external.get(cpu.ext)
            if known is None or (known.cat != "cpu_op" and cat == "cpu_op"):
                self.by_external[cpu.ext] = cpu
        if cat in _RUNTIME_CATS:
            corr = _int_arg(args.get("correlation"))
            if corr is not None:
                self.by_correlation[corr] = cpu
            lds = _int_arg(args.get("shared memory"))
            cpu.lds = lds if lds is not None and lds >= 0 else None
        self.threads.setdefault(cpu.thread, []).append(cpu)

    def _op(self, name: str, args: dict) -> OpCall:
        dims, types, concrete = args.get("Input Dims"), args.get("Input type"), args.get("Concrete Inputs")
        if dims is None and types is None:
            key: tuple = (name,)
        else:
            key = (name, repr(dims), repr(types), repr(concrete))
        op = self._ops.get(key)
        if op is None:
            op = self._ops[key] = OpCall(name, dims, types, concrete)
        return op

    # -- linking -----------------------------------------------------------------------
    def nest(self) -> dict[Hashable, tuple[list[int], list[_Cpu]]]:
        """Per thread: events sorted by start with parent links (the innermost enclosing event)."""
        out: dict[Hashable, tuple[list[int], list[_Cpu]]] = {}
        for thread, evs in self.threads.items():
            evs.sort(key=lambda e: (e.start, -e.end, e.index))
            stack: list[_Cpu] = []
            for e in evs:
                while stack and not (stack[-1].start <= e.start < stack[-1].end):
                    stack.pop()
                e.parent = stack[-1] if stack else None
                stack.append(e)
            out[thread] = ([e.start for e in evs], evs)
        return out


def _enclosing(nested: dict, thread: Hashable, t: int) -> _Cpu | None:
    """The innermost CPU event on ``thread`` active at time ``t``."""
    got = nested.get(thread)
    if not got:
        return None
    starts, evs = got
    k = bisect.bisect_right(starts, t) - 1
    node = evs[k] if k >= 0 else None
    while node is not None and node.end < t:
        node = node.parent
    return node


def _op_above(node: _Cpu | None) -> _Cpu | None:
    """The innermost op (cpu_op / user_annotation) at or above ``node``."""
    while node is not None and node.cat not in _OP_CATS:
        node = node.parent
    return node


def _scope(anchor: _Cpu) -> _Cpu | None:
    """Innermost nn.Module, else outermost cpu_op, else innermost record_function range
    other than ProfilerStep#N, else None."""
    module = outer_cpu_op = annotation = None
    node: _Cpu | None = anchor
    while node is not None:
        if module is None and node.cat == "python_function":
            module = node
        elif node.cat == "cpu_op":
            outer_cpu_op = node
        elif annotation is None and node.cat == "user_annotation" and not _PROFILER_STEP.match(node.name):
            annotation = node
        node = node.parent
    return module or outer_cpu_op or annotation


def _ranges(anchor: _Cpu | None) -> tuple[str, ...]:
    names = []
    node = anchor
    while node is not None:
        if node.cat == "user_annotation":
            names.append(node.name)
        node = node.parent
    return tuple(reversed(names))


def read_torch_trace(source: Source, detail: bool = False) -> Trace:
    """``detail``: also keep the host events and device-side ranges (``Trace.cpu_events``,
    ``Trace.device_ranges``: the verifier attributes kernels, or on CPU the leaf ops, to its
    ``record_function`` windows with them), keep device memcpy / memset events as dispatches
    of their own ``kind`` (``gpu_memcpy`` / ``gpu_memset``: device time a candidate spends
    must count), and accept a trace with no device kernels."""
    label = source.label
    r = _Reader(label, detail)
    try:
        for ev in stream_array(source.text_chunks(), "traceEvents", r.top_level):
            r.saw_events = True
            r.add(ev)
    except JsonStreamError as exc:
        raise stream_error(exc, label, _EXPECTED) from None
    except TypeError as exc:
        raise TraceReadError(f"top-level JSON is a {exc}", file=label,
                             expected="a Chrome trace object with a traceEvents list") from None
    except READ_ERRORS + (SizeLimitExceeded,) as exc:
        raise read_error(exc, label) from None
    if not r.saw_events and r.top_keys:
        if "traceEvents" in r.top_keys:
            raise TraceReadError("traceEvents is not a list", file=label, where="traceEvents",
                                 expected="a list of events")
        raise TraceReadError(f"no traceEvents key (keys: {', '.join(map(str, r.top_keys[:10]))})", file=label,
                             expected="a torch.profiler Chrome trace with a traceEvents list")
    if not r.kernels and not detail:
        raise TraceReadError(
            f"no device kernels (no events with cat 'kernel'; {r.cpu_ops} CPU ops)", file=label,
            expected="a GPU profile: torch.profiler with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] "
            "(also on ROCm) run on the device",
        )
    return _link(r)


def _link(r: _Reader) -> Trace:
    nested = r.nest()
    contexts: dict[tuple, LaunchContext] = {}
    lanes: dict[tuple, tuple] = {}
    dispatches: list[KernelDispatch] = []
    unlinked = 0
    for order, (_, name, start, dur, pid, tid, ext, corr, res, kind) in enumerate(r.kernels):
        runtime = r.by_correlation.get(corr) if corr is not None else None
        if runtime is None:
            flow = r.flow_end.get((pid, tid, start))
            begin = r.flow_start.get(flow) if flow is not None else None
            if begin is not None:
                runtime = _enclosing(nested, *begin)
        op = r.by_external.get(ext) if ext is not None else None
        if op is None and runtime is not None:
            op = (r.by_external.get(runtime.ext) if runtime.ext is not None else None) or _op_above(runtime)
        if op is not None and _PROFILER_STEP.match(op.name):
            op = None
        anchor = runtime or op
        launch = None
        if anchor is None:
            unlinked += 1
        else:
            scope = _scope(anchor)
            call = None
            if op is not None:
                call = op.op if op.op is not None else r._op(op.name, {})
            ranges = _ranges(anchor)
            key = (id(call), scope.index if scope is not None else None, ranges)
            launch = contexts.get(key)
            if launch is None:
                launch = contexts[key] = LaunchContext(
                    op=call, scope=scope.index if scope is not None else None,
                    scope_name=scope.name if scope is not None else None, ranges=ranges)
        if runtime is not None and runtime.lds is not None and (res is None or res.lds_bytes is None):
            res = r.with_lds(res, runtime.lds)
        lane = lanes.get((pid, tid))
        if lane is None:
            lane = lanes[(pid, tid)] = (pid, None, tid)
        dispatches.append(KernelDispatch(name, start, start + dur, order, lane, corr, None, kind, res, launch))
    names = [str(p["name"]) for p in r.device_props if isinstance(p, dict) and p.get("name")]
    notes = []
    if unlinked:
        notes.append(f"{unlinked} of {len(dispatches)} kernel launches could not be linked to a CPU op "
                     "(no External id, correlation or ac2g flow match): no shape or segment for those")
    if not r.threads:
        notes.append("the trace has no CPU events: profile with ProfilerActivity.CPU too for shapes and segments")
    trace = Trace(format=FORMAT, source=r.label, columns=Columns.of(dispatches), _records=dispatches,
                  device_names=sorted(set(names)), skipped=dict(r.skipped), notes=notes, segment_rule=SEGMENT_RULE)
    if r.detail:
        trace.cpu_events = _cpu_events(nested)
        trace.device_ranges = r.device_ranges
    return trace


def _cpu_events(nested: dict) -> list[CpuEvent]:
    at: dict[int, int] = {}
    events: list[CpuEvent] = []
    for _, evs in nested.values():
        for e in evs:  # parents come before their children (sorted by start)
            at[id(e)] = len(events)
            events.append(CpuEvent(e.name, e.cat, e.thread, e.start, e.end,
                                   at[id(e.parent)] if e.parent is not None else None))
    return events

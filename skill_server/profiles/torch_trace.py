"""torch.profiler Chrome-trace JSON (``prof.export_chrome_trace`` / ``*.pt.trace.json[.gz]``).

The trace is ``{"traceEvents": [...], "deviceProperties": [...], ...}`` (a bare event list
is accepted too). Events used, as Kineto writes them on CUDA and ROCm:

- device kernels: ``ph: "X"``, ``cat: "kernel"``, ``pid`` = device, ``tid`` = stream,
  ``ts``/``dur`` in µs; ``args`` carry ``External id`` (the launching CPU op's id),
  ``correlation`` (the runtime launch's id), and per platform ``grid``, ``block``,
  ``registers per thread``, ``shared memory``;
- CPU side, per (pid, tid), properly nested: ``cpu_op`` (aten and custom ops; with
  ``record_shapes=True`` their ``args`` hold ``Input Dims`` and ``Input type``),
  ``user_annotation`` (``record_function`` ranges, ``ProfilerStep#N``),
  ``python_function`` (``with_stack``/``with_modules``; ``nn.Module: Linear_0`` names a
  module scope), and runtime calls ``cuda_runtime``/``cuda_driver``
  (``cudaLaunchKernel``, ``hipLaunchKernel``, ``hipExtModuleLaunchKernel``, ...) whose
  ``args.correlation`` equals the kernel's;
- flow events ``ph: "s"``/``"f"``, ``cat: "ac2g"``, ``id`` = correlation: ``s`` on the
  launching thread at the runtime call, ``f`` on the kernel's (pid, tid, ts).

A kernel is linked to its launching op by, in order: its ``External id``; its
``correlation`` -> the runtime call -> that call's ``External id`` or enclosing op; the
``ac2g`` flow -> the runtime call enclosing the flow start. The launching op is the
innermost op active at launch; its ``Input Dims``/``Input type`` give the GEMM shape,
operand dtype and scale format (``gemm_inputs``).

Segment rule (torch traces): a kernel's segment scope is the innermost ``nn.Module:``
python_function enclosing its launch (the runtime call where known, else the op), else
the outermost ``cpu_op``, else the innermost ``user_annotation`` other than
``ProfilerStep#N``; kernels launched under the same scope instance form one segment.
Kernels with no link, or launched under nothing but ``ProfilerStep#N``, have no segment.
A kernel linked only to ``ProfilerStep#N`` (launched from Python with no op, e.g. Triton)
has no launching op, hence no shape.

Only ``cat: "kernel"`` events count as GPU time; memcpy/memset events are listed in
``skipped``. The whole JSON is parsed at once (bounded by the size limit).
"""
from __future__ import annotations

import bisect
import json
import math
import re
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from skill_server.profiles.aggregate import Dispatch, scope_segments, summarize
from skill_server.profiles.errors import ProfileError
from skill_server.profiles.gemm_inputs import gemm_shape, operand_dtype, scale_format
from skill_server.profiles.models import ProfileSummary
from skill_server.profiles.reading import READ_ERRORS, OpenedProfile, SizeLimitExceeded, read_error
from skill_server.vocabulary import vocabulary

FORMAT = "torch_trace"
SEGMENT_RULE = (
    "torch trace: kernels launched under the same innermost nn.Module scope, else the same top-level "
    "CPU op, else the same record_function range (ProfilerStep#N excluded)"
)
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "privateuse1_runtime", "privateuse1_driver"})
_OP_CATS = frozenset({"cpu_op", "user_annotation"})
_CPU_CATS = _OP_CATS | _RUNTIME_CATS | {"python_function"}
_GPU_OTHER = frozenset({"gpu_memcpy", "gpu_memset", "gpu_user_annotation"})
_PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")
_MODULE_PREFIX = "nn.Module:"


@dataclass(slots=True, eq=False)
class _CpuEvent:
    index: int
    cat: str
    name: str
    thread: Hashable
    start: int
    end: int
    args: dict
    parent: _CpuEvent | None = None


def _ns(value: Any) -> int | None:
    """µs (int or float) -> ns; None for anything else (bools, strings, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return round(value * 1000)


def _int_arg(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class _Trace:
    """The parsed events with the indexes needed to link kernels to CPU ops."""

    def __init__(self, events: list, label: str) -> None:
        self.label = label
        self.kernels: list[tuple[int, dict, int, int]] = []  # (index, event, start ns, dur ns)
        self.skipped: Counter = Counter()
        self.by_external: dict[int, _CpuEvent] = {}
        self.by_correlation: dict[int, _CpuEvent] = {}
        self.flow_start: dict[Any, tuple[Hashable, int]] = {}
        self.flow_end: dict[tuple, Any] = {}
        threads: dict[Hashable, list[_CpuEvent]] = {}
        for i, ev in enumerate(events):
            if not isinstance(ev, dict):
                raise ProfileError(f"event is a {type(ev).__name__}", file=label, where=f"traceEvents[{i}]",
                                   expected="a JSON object per trace event")
            ph = ev.get("ph")
            cat = ev.get("cat")
            cat = cat.lower() if isinstance(cat, str) else ""
            if ph == "X" and cat == "kernel":
                self._add_kernel(i, ev)
            elif ph == "X" and cat in _CPU_CATS:
                cpu = self._cpu_event(i, ev, cat)
                threads.setdefault(cpu.thread, []).append(cpu)
            elif ph == "X" and cat in _GPU_OTHER:
                self.skipped[cat] += 1
            elif ph in ("s", "f") and cat == "ac2g":
                ts = _ns(ev.get("ts"))
                if ts is None or "id" not in ev:
                    continue  # a malformed flow only loses a fallback link
                if ph == "s":
                    self.flow_start[ev["id"]] = ((ev.get("pid"), ev.get("tid")), ts)
                else:
                    self.flow_end[(ev.get("pid"), ev.get("tid"), ts)] = ev["id"]
        self.threads: dict[Hashable, tuple[list[int], list[_CpuEvent]]] = {}
        for thread, evs in threads.items():
            evs.sort(key=lambda e: (e.start, -e.end, e.index))
            stack: list[_CpuEvent] = []
            for e in evs:
                while stack and not (stack[-1].start <= e.start < stack[-1].end):
                    stack.pop()
                e.parent = stack[-1] if stack else None
                stack.append(e)
            self.threads[thread] = ([e.start for e in evs], evs)

    def _timing(self, i: int, ev: dict) -> tuple[int, int]:
        start, dur = _ns(ev.get("ts")), _ns(ev.get("dur"))
        if start is None or dur is None or dur < 0:
            raise ProfileError(
                f"event {str(ev.get('name'))[:80]!r} has ts={ev.get('ts')!r}, dur={ev.get('dur')!r}",
                file=self.label, where=f"traceEvents[{i}]", expected="numeric 'ts' and non-negative 'dur' in µs",
            )
        return start, dur

    def _add_kernel(self, i: int, ev: dict) -> None:
        name = ev.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ProfileError(f"kernel event has name {name!r}", file=self.label, where=f"traceEvents[{i}].name",
                               expected="the kernel's name as a non-empty string")
        start, dur = self._timing(i, ev)
        if ev.get("args") is not None and not isinstance(ev["args"], dict):
            raise ProfileError("kernel 'args' is not an object", file=self.label, where=f"traceEvents[{i}].args",
                               expected="a JSON object")
        self.kernels.append((i, ev, start, dur))

    def _cpu_event(self, i: int, ev: dict, cat: str) -> _CpuEvent:
        start, dur = self._timing(i, ev)
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        cpu = _CpuEvent(i, cat, str(ev.get("name", "")), (ev.get("pid"), ev.get("tid")), start, start + dur, args)
        ext = _int_arg(args.get("External id"))
        if cat in _OP_CATS and ext is not None:
            known = self.by_external.get(ext)
            if known is None or (known.cat != "cpu_op" and cat == "cpu_op"):
                self.by_external[ext] = cpu
        corr = _int_arg(args.get("correlation"))
        if cat in _RUNTIME_CATS and corr is not None:
            self.by_correlation[corr] = cpu
        return cpu

    def enclosing(self, thread: Hashable, t: int) -> _CpuEvent | None:
        """The innermost CPU event on ``thread`` active at time ``t``."""
        got = self.threads.get(thread)
        if not got:
            return None
        starts, evs = got
        k = bisect.bisect_right(starts, t) - 1
        node = evs[k] if k >= 0 else None
        while node is not None and node.end < t:
            node = node.parent
        return node

    @staticmethod
    def op_above(node: _CpuEvent | None) -> _CpuEvent | None:
        """The innermost op (cpu_op / user_annotation) at or above ``node``."""
        while node is not None and node.cat not in _OP_CATS:
            node = node.parent
        return node

    def launch(self, ev: dict, start: int) -> tuple[_CpuEvent | None, _CpuEvent | None]:
        """(launching op, anchor) of a kernel. The op (innermost cpu_op or record_function
        range, never ``ProfilerStep#N``) gives shapes; the anchor, the runtime launch call
        where it is known and else the op, places the launch in the scope tree, so a kernel
        launched straight from Python (Triton, FlyDSL) still lands in its nn.Module."""
        args = ev.get("args") or {}
        runtime = self.by_correlation.get(_int_arg(args.get("correlation")))
        if runtime is None:
            flow = self.flow_end.get((ev.get("pid"), ev.get("tid"), start))
            begin = self.flow_start.get(flow) if flow is not None else None
            if begin is not None:
                runtime = self.enclosing(*begin)
        op = self.by_external.get(_int_arg(args.get("External id")))
        if op is None and runtime is not None:
            op = self.by_external.get(_int_arg(runtime.args.get("External id"))) or self.op_above(runtime)
        if op is not None and _PROFILER_STEP.match(op.name):
            op = None
        return op, runtime or op

    @staticmethod
    def scope(anchor: _CpuEvent) -> _CpuEvent | None:
        """The segment scope: innermost nn.Module, else outermost cpu_op, else innermost
        record_function range other than ProfilerStep#N, else None."""
        module = outer_cpu_op = annotation = None
        node: _CpuEvent | None = anchor
        while node is not None:
            if module is None and node.cat == "python_function" and node.name.startswith(_MODULE_PREFIX):
                module = node
            elif node.cat == "cpu_op":
                outer_cpu_op = node
            elif annotation is None and node.cat == "user_annotation" and not _PROFILER_STEP.match(node.name):
                annotation = node
            node = node.parent
        return module or outer_cpu_op or annotation


def _load(opened: OpenedProfile) -> Any:
    try:
        text = opened.read_all()
    except READ_ERRORS + (SizeLimitExceeded,) as exc:
        raise read_error(exc, opened.label) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        truncated = exc.msg.startswith("Unterminated") or not text[exc.pos:].strip()
        raise ProfileError(
            f"invalid JSON: {exc.msg}" + ("; the file looks truncated" if truncated else ""),
            file=opened.label, line=exc.lineno, where=f"column {exc.colno}",
            expected="a complete torch.profiler Chrome trace (JSON)",
        ) from None
    except RecursionError:
        raise ProfileError("JSON nested too deeply", file=opened.label, expected="a torch.profiler Chrome trace") from None


def _events(doc: Any, label: str) -> tuple[list, list]:
    if isinstance(doc, list):
        return doc, []
    if not isinstance(doc, dict):
        raise ProfileError(f"top-level JSON is a {type(doc).__name__}", file=label,
                           expected="a Chrome trace object with a traceEvents list")
    if "traceEvents" not in doc:
        hint = ""
        if any("rocprofiler" in str(k) for k in doc):
            hint = "; rocprofv3 JSON output is not supported, rerun with --output-format csv and pass kernel_trace.csv"
        raise ProfileError(f"no traceEvents key (keys: {', '.join(map(str, list(doc)[:10]))}){hint}", file=label,
                           expected="a torch.profiler Chrome trace with a traceEvents list")
    events = doc["traceEvents"]
    if not isinstance(events, list):
        raise ProfileError(f"traceEvents is a {type(events).__name__}", file=label, where="traceEvents",
                           expected="a list of events")
    props = doc.get("deviceProperties")
    return events, props if isinstance(props, list) else []


def _device_gen(names: list[str]) -> str | None:
    """The generation of the (single) device, as a name the matcher's vocabulary knows
    (a gfx arch, a product such as MI355X or H200), else None."""
    if len(set(names)) != 1:
        return None
    name = names[0]
    candidates = [m.group(0) for m in (re.search(r"\bgfx[0-9a-f]{3,4}\b", name, re.IGNORECASE),
                                        re.search(r"\bMI\d{3}[A-Z]{0,2}\b", name)) if m]
    candidates += [re.sub(r"^(NVIDIA|AMD( Instinct)?|Tesla)\s+", "", name).strip(), name]
    vocab = vocabulary()
    return next((c for c in candidates if c and vocab.is_known_generation(c)), None)


def _resources(args: dict, runtime_lds: int | None) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    regs = _int_arg(args.get("registers per thread"))
    if regs is not None and regs >= 0:
        out["registers_per_thread"] = regs
    lds = _int_arg(args.get("shared memory"))
    lds = lds if lds is not None else runtime_lds
    if lds is not None and lds >= 0:
        out["lds_bytes"] = lds
    block = args.get("block")
    if isinstance(block, list) and len(block) == 3 and all(_int_arg(b) is not None for b in block):
        out["workgroup_size"] = list(block)
    return out or None


def parse(opened: OpenedProfile, *, top: int, min_pct: float) -> ProfileSummary:
    doc = _load(opened)
    events, props = _events(doc, opened.label)
    trace = _Trace(events, opened.label)
    if not trace.kernels:
        cpu_ops = sum(1 for _, evs in trace.threads.values() for e in evs if e.cat == "cpu_op")
        raise ProfileError(
            f"no device kernels (no events with cat 'kernel'; {cpu_ops} CPU ops)", file=opened.label,
            expected="a GPU profile: torch.profiler with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] "
            "(also on ROCm) run on the device",
        )
    dispatches: list[Dispatch] = []
    unlinked = 0
    for order, (_, ev, start, dur) in enumerate(trace.kernels):
        args = ev.get("args") or {}
        op, anchor = trace.launch(ev, start)
        runtime = trace.by_correlation.get(_int_arg(args.get("correlation")))
        d = Dispatch(
            name=ev["name"].strip(), dur_ns=dur, start_ns=start, order=order,
            resources=_resources(args, _int_arg(runtime.args.get("shared memory")) if runtime else None),
        )
        if anchor is None:
            unlinked += 1
        else:
            scope = trace.scope(anchor)
            if scope is not None:
                d.scope, d.scope_name = scope.index, scope.name
        if op is not None:
            dims, types = op.args.get("Input Dims"), op.args.get("Input type")
            d.launch_op = op.name
            d.launch_dims = dims if isinstance(dims, list) else None
            d.launch_types = [str(t) for t in types] if isinstance(types, list) else None
            d.shape = gemm_shape(op.name, dims)
            if d.shape is not None:
                d.shape_op = op.name
                dtype = operand_dtype(op.name, types)
                fmt = scale_format(op.name, dims, types, d.shape)
                # only names the matcher's vocabulary knows: an unknown one would fail the match
                d.dtype = dtype if dtype and vocabulary().is_known_dtype(dtype) else None
                d.scale_format = fmt if fmt and vocabulary().is_known_scale_format(fmt) else None
        dispatches.append(d)
    names = [str(p["name"]) for p in props if isinstance(p, dict) and p.get("name")]
    gen = _device_gen(names)
    notes = []
    if names and gen is None:
        notes.append(f"device {', '.join(sorted(set(names)))} is not one known generation: hotspot.gen left empty")
    if unlinked:
        notes.append(f"{unlinked} of {len(dispatches)} kernel launches could not be linked to a CPU op "
                     "(no External id, correlation or ac2g flow match): no shape or segment for those")
    if not trace.threads:
        notes.append("the trace has no CPU events: profile with ProfilerActivity.CPU too for shapes and segments")
    return summarize(
        fmt=FORMAT,
        label=opened.label,
        dispatches=dispatches,
        segments=scope_segments(dispatches),
        segment_rule=SEGMENT_RULE,
        top=top,
        min_pct=min_pct,
        skipped=dict(trace.skipped),
        device_names=sorted(set(names)),
        gen=gen,
        notes=notes,
    )

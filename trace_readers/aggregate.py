"""From per-dispatch records to kernels ranked by share of GPU time (format independent).

Segments. A segment is the set of kernels that together implement one operation (the
MoE card scores "GEMM + reduce kernel" as one segment):
- torch traces: one instance of the launching scope (``LaunchContext.scope``); kernels
  sharing a scope instance are one segment;
- kernel traces (CSV, JSON, rocpd): no scopes, so each dispatch is paired with its
  neighbours in start order on the same lane (agent, queue, stream): up to
  ``SEGMENT_WINDOW`` kernels either side, walking outward only while the idle gap between
  consecutive kernels is at most ``SEGMENT_MAX_GAP_NS`` (a longer gap means the host
  stepped in, e.g. a sync, so the run of kernels ended);
- kernel stats: none.
A kernel's ``mates`` are the other kernels it shared a segment with, over all its
dispatches, most frequent first (then earliest first, so event order does not matter).

``ordered_runs`` gives the same units as ordered index lists (a scope instance, or a
lane's run between idle gaps), for callers that read launch sequences (MoE stages).

Variants. Each dispatch may carry a GEMM (from its launching op, ``gemm_ops``) and a
stage tag given by the caller; a kernel's dispatches are grouped by (GEMM, source op,
stage) so one kernel name that ran at several shapes or in both MoE stages is not one
indistinct hotspot.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from trace_readers.errors import TraceReadError
from trace_readers.gemm_ops import OpGemm, op_gemm
from trace_readers.records import KernelDispatch, OpCall, Trace

SEGMENT_WINDOW = 2
SEGMENT_MAX_GAP_NS = 20_000
WINDOW_RULE = (
    f"kernel trace: the kernels within {SEGMENT_WINDOW} dispatches before/after on the same agent/queue/stream "
    f"in start order, stopping at an idle gap over {SEGMENT_MAX_GAP_NS} ns"
)
NO_SEGMENT_RULE = "kernel stats: none (the file has no dispatch order or scope)"
_MAX_KEYS = ("vgpr_count", "accum_vgpr_count", "sgpr_count", "registers_per_thread", "scratch_bytes", "lds_bytes")


@dataclass
class Variant:
    """Dispatches of one kernel that share a GEMM, launching op and stage."""

    gemm: OpGemm | None
    source_op: str | None
    stage: str | None
    calls: int = 0
    total_ns: int = 0


@dataclass
class KernelSummary:
    name: str
    first: int  # order of first appearance
    first_ns: int | None = None  # earliest start: the tie-breaker that does not depend on event order
    calls: int = 0
    total_ns: int = 0
    min_ns: int | None = None
    max_ns: int | None = None
    resources: dict[str, Any] = field(default_factory=dict)  # max over dispatches; first workgroup/grid
    variants: list[Variant] = field(default_factory=list)
    launch_ops: list[tuple[OpCall, int]] = field(default_factory=list)  # (op, calls), most calls first
    scopes: Counter = field(default_factory=Counter)  # scope name -> dispatches
    mates: list[str] = field(default_factory=list)


@dataclass
class Profile:
    """A trace aggregated by full kernel name, ranked by total time."""

    trace: Trace
    total_ns: int
    dispatch_count: int
    kernels: list[KernelSummary]
    segment_known: bool
    segment_rule: str


def _sorted_lane(run: list[KernelDispatch]) -> list[KernelDispatch]:
    if any(b.start_ns < a.start_ns for a, b in zip(run, run[1:])):
        run.sort(key=lambda d: (d.start_ns, d.order))
    return run


def lanes(trace: Trace) -> dict[Hashable, list[KernelDispatch]]:
    """Dispatches per lane in start order."""
    out: dict[Hashable, list[KernelDispatch]] = {}
    for d in trace.dispatches:
        key = d.lane
        run = out.get(key)
        if run is None:
            run = out[key] = []
        run.append(d)
    return {k: _sorted_lane(v) for k, v in out.items()}


def has_scopes(trace: Trace) -> bool:
    return any(d.launch is not None for d in trace.dispatches)


def ordered_runs(trace: Trace, max_gap_ns: int = SEGMENT_MAX_GAP_NS) -> Iterator[list[KernelDispatch]]:
    """Launch sequences: per scope instance (torch traces) or per lane run between idle gaps."""
    if has_scopes(trace):
        members: dict[Hashable, list[KernelDispatch]] = {}
        for d in trace.dispatches:
            if d.launch is not None and d.launch.scope is not None:
                members.setdefault(d.launch.scope, []).append(d)
        for run in members.values():
            yield _sorted_lane(run)
        return
    for run in lanes(trace).values():
        start = 0
        for i in range(1, len(run)):
            if run[i].start_ns - run[i - 1].end_ns > max_gap_ns:
                yield run[start:i]
                start = i
        yield run[start:]


def _window_mates(trace: Trace) -> dict[str, Counter]:
    pairs: Counter = Counter()
    for run in lanes(trace).values():
        names = [d.name for d in run]
        starts = [d.start_ns for d in run]
        ends = [d.end_ns for d in run]
        linked = [s - e <= SEGMENT_MAX_GAP_NS for e, s in zip(ends, starts[1:])]
        pairs.update((a, b) for a, b, ok in zip(names, names[1:], linked) if ok and a != b)
        if SEGMENT_WINDOW >= 2:
            pairs.update((a, b) for a, b, ok1, ok2 in zip(names, names[2:], linked, linked[1:])
                         if ok1 and ok2 and a != b)
    mates: dict[str, Counter] = {}
    for (a, b), n in pairs.items():
        mates.setdefault(a, Counter())[b] += n
        mates.setdefault(b, Counter())[a] += n
    return mates


def _scope_mates(trace: Trace) -> dict[str, Counter]:
    members: dict[Hashable, dict[str, None]] = {}
    for d in trace.dispatches:
        if d.launch is not None and d.launch.scope is not None:
            members.setdefault(d.launch.scope, {})[d.name] = None
    mates: dict[str, Counter] = {}
    for names in members.values():
        if len(names) < 2:
            continue
        for name in names:
            counter = mates.setdefault(name, Counter())
            for other in names:
                if other != name:
                    counter[other] += 1
    return mates


def aggregate(trace: Trace, stages: Sequence[str | None] | None = None) -> Profile:
    """Aggregate by full kernel name and rank by total time. ``stages[i]`` tags dispatch
    ``i`` (e.g. the MoE stage a caller inferred); tagged dispatches form their own variants."""
    kernels: dict[str, KernelSummary] = {}
    if stages is not None and len(stages) != len(trace.dispatches):
        raise ValueError("stages must tag every dispatch")
    gemms: dict[tuple, OpGemm | None] = {}
    variants: dict[str, dict[tuple, Variant]] = {}
    ops: dict[str, dict[int, list]] = {}
    last_resources: dict[str, Any] = {}
    for i, d in enumerate(trace.dispatches):
        k = kernels.get(d.name)
        if k is None:
            k = kernels[d.name] = KernelSummary(d.name, first=len(kernels))
            variants[d.name] = {}
            ops[d.name] = {}
        dur = d.end_ns - d.start_ns
        if k.first_ns is None or d.start_ns < k.first_ns:
            k.first_ns = d.start_ns
        k.calls += 1
        k.total_ns += dur
        if k.min_ns is None or dur < k.min_ns:
            k.min_ns = dur
        if k.max_ns is None or dur > k.max_ns:
            k.max_ns = dur
        res = d.resources
        if res is not None and last_resources.get(d.name) is not res:
            last_resources[d.name] = res  # interned: the same object means the same values
            _merge_resources(k.resources, res)
        stage = stages[i] if stages is not None else None
        launch = d.launch
        op = launch.op if launch is not None else None
        if op is not None or stage is not None:
            gkey = (id(op), stage)
            if gkey in gemms:
                gemm = gemms[gkey]
            else:
                gemm = gemms[gkey] = op_gemm(op, stage)
            vkey = (gemm, op.name if gemm is not None and op is not None else None, stage)
            v = variants[d.name].get(vkey)
            if v is None:
                v = variants[d.name][vkey] = Variant(gemm, vkey[1], stage)
            v.calls += 1
            v.total_ns += dur
        if op is not None:
            slot = ops[d.name].get(id(op))
            if slot is None:
                ops[d.name][id(op)] = [op, 1]
            else:
                slot[1] += 1
        if launch is not None and launch.scope_name:
            k.scopes[launch.scope_name] += 1
    for t in trace.totals:
        k = kernels.get(t.name)
        if k is None:
            k = kernels[t.name] = KernelSummary(t.name, first=len(kernels))
        k.calls += t.calls
        k.total_ns += t.total_ns
        if t.min_ns is not None:
            k.min_ns = t.min_ns if k.min_ns is None else min(k.min_ns, t.min_ns)
        if t.max_ns is not None:
            k.max_ns = t.max_ns if k.max_ns is None else max(k.max_ns, t.max_ns)
    if not kernels:
        raise TraceReadError("no kernels found", file=trace.source, expected="at least one GPU kernel dispatch")
    grand = sum(k.total_ns for k in kernels.values())
    if grand <= 0:
        raise TraceReadError("every kernel has zero duration, so no share of GPU time can be computed",
                             file=trace.source, expected="kernel durations in ns greater than zero")
    segment_known = bool(trace.dispatches)
    if not segment_known:
        rule, mates = NO_SEGMENT_RULE, {}
    elif has_scopes(trace):
        rule, mates = trace.segment_rule, _scope_mates(trace)
    else:
        rule, mates = WINDOW_RULE, _window_mates(trace)
    for name, k in kernels.items():
        k.variants = sorted((v for v in variants.get(name, {}).values() if v.gemm is not None or v.stage is not None),
                            key=lambda v: (-v.total_ns, str(v.gemm), v.source_op or "", v.stage or ""))
        k.launch_ops = [(op, n) for op, n in sorted(ops.get(name, {}).values(), key=lambda s: (-s[1], s[0].name))]
        counter = mates.get(name)
        if counter:
            k.mates = sorted(counter, key=lambda n: (-counter[n], kernels[n].first_ns or 0, n))
    ranked = sorted(kernels.values(), key=lambda k: (-k.total_ns, k.name))
    return Profile(trace=trace, total_ns=grand, dispatch_count=sum(k.calls for k in kernels.values()),
                   kernels=ranked, segment_known=segment_known, segment_rule=rule)


def _merge_resources(into: dict[str, Any], res: Any) -> None:
    for key in _MAX_KEYS:
        value = getattr(res, key)
        if value is not None:
            old = into.get(key)
            into[key] = value if old is None else max(old, value)
    for key in ("workgroup_size", "grid_size"):
        value = getattr(res, key)
        if value is not None and key not in into:
            into[key] = list(value)

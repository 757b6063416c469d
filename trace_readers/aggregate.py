"""From per-dispatch columns to kernels ranked by share of GPU time (format independent).

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

``ordered_runs`` gives the same units as ordered lists of dispatch indexes (a scope
instance, or a lane's run between idle gaps), for callers that read launch sequences.

Variants. Each dispatch may carry a GEMM (from its launching op, ``gemm_ops``) and a
stage tag given by the caller; a kernel's dispatches are grouped by (GEMM, source op,
stage) so one kernel name that ran at several shapes or in both MoE stages is not one
indistinct hotspot.

Everything per dispatch runs in C: ``map`` / ``zip`` over the columns, and numpy for
grouping (names and lanes as integer codes, a stable argsort), idle gaps and pair counts;
a 1 M-dispatch trace aggregates in well under a second on a slow 2-core box (numpy is
imported on first use, so importing the readers stays light).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import compress, count, repeat
from operator import eq, le, ne
from typing import Any

from trace_readers.errors import TraceReadError
from trace_readers.gemm_ops import OpGemm, op_gemm
from trace_readers.records import OpCall, Trace

SEGMENT_WINDOW = 2  # the pair counting below is written for 2
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
    resources: dict[str, Any] = field(default_factory=dict)  # max over dispatches; first workgroup size
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


def _codes(keys: Sequence[Hashable]):
    """(distinct keys in first-appearance order, numpy int64 array: each key's position in it).

    One dict look-up per key, in C: ``setdefault`` gives a key's first index, which a
    look-up table turns into a dense code."""
    import numpy as np

    first: dict[Hashable, int] = {}
    n = len(keys)
    at = np.fromiter(map(first.setdefault, keys, count()), dtype=np.int64, count=n)
    lut = np.zeros(n, dtype=np.int64)
    lut[np.fromiter(first.values(), dtype=np.int64, count=len(first))] = np.arange(len(first))
    return list(first), lut[at]


def _identity_codes(keys: Sequence[Hashable]):
    """``_codes`` for keys the readers intern (lanes: one tuple object per distinct lane):
    coded by identity, an int look-up per key; content decides if two objects are equal."""
    import numpy as np

    first: dict[int, int] = {}
    n = len(keys)
    at = np.fromiter(map(first.setdefault, map(id, keys), count()), dtype=np.int64, count=n)
    distinct = [keys[i] for i in first.values()]
    if len(set(distinct)) != len(distinct):
        return _codes(keys)
    lut = np.zeros(n, dtype=np.int64)
    lut[np.fromiter(first.values(), dtype=np.int64, count=len(first))] = np.arange(len(first))
    return distinct, lut[at]


def _order(codes, k: int):
    """(stable argsort of ``codes``, start of each code's run in it, end of each run)."""
    import numpy as np

    order = np.argsort(codes, kind="stable")
    ends = np.cumsum(np.bincount(codes, minlength=k))
    return order, ends - np.bincount(codes, minlength=k), ends


def _grouped(distinct: list, codes) -> dict[Hashable, list[int]]:
    """Indexes per distinct key, keys in first-appearance order, indexes ascending (a stable
    argsort of the keys' codes groups a million of them in milliseconds)."""
    if not distinct:
        return {}
    if len(distinct) == 1:
        return {distinct[0]: list(range(len(codes)))}
    order, lo, hi = _order(codes, len(distinct))
    flat = order.tolist()
    return {key: flat[a:b] for key, a, b in zip(distinct, lo.tolist(), hi.tolist())}


def name_codes(trace: Trace):
    """``_codes`` of the kernel names, computed once per trace."""
    got = trace.cache.get("name_codes")
    if got is None:
        got = trace.cache["name_codes"] = _codes(trace.columns.name)
    return got


def _index(trace: Trace) -> tuple[dict[str, list[int]], dict[Hashable, list[int]]]:
    """Dispatch indexes per kernel name and per lane (lanes in start order, input order
    breaking ties); computed once per trace."""
    import numpy as np

    cached = trace.cache.get("index")
    if cached is not None:
        return cached
    if not len(trace.columns):
        trace.cache["index"] = ({}, {})
        return {}, {}
    by_name = _grouped(*name_codes(trace))
    by_lane = _grouped(*_identity_codes(trace.columns.lane))
    starts = trace.columns.start_ns
    times = _times(trace)[0]
    for idx in by_lane.values():
        if len(idx) > 1 and not (np.diff(times[np.array(idx, dtype=np.int64)]) >= 0).all():
            idx.sort(key=lambda i: (starts[i], i))
    trace.cache["index"] = (by_name, by_lane)
    return by_name, by_lane


def lanes(trace: Trace) -> dict[Hashable, list[int]]:
    """Dispatch indexes per lane, in start order (input order breaks ties)."""
    return _index(trace)[1]


def has_scopes(trace: Trace) -> bool:
    launch = trace.columns.launch
    return launch is not None and any(lc is not None for lc in launch)


def ordered_runs(trace: Trace, max_gap_ns: int = SEGMENT_MAX_GAP_NS) -> Iterator[list[int]]:
    """Launch sequences as dispatch indexes: per scope instance (torch traces), else per
    lane run between idle gaps longer than ``max_gap_ns``."""
    for idx, ids in run_ids(trace, max_gap_ns):
        idx, ids = idx.tolist(), ids.tolist()
        cut = 0
        for k in compress(range(1, len(ids)), map(ne, ids[1:], ids)):
            yield idx[cut:k]
            cut = k
        yield idx[cut:]


def run_ids(trace: Trace, max_gap_ns: int = SEGMENT_MAX_GAP_NS) -> Iterator[tuple[Any, Any]]:
    """The same sequences in bulk, as numpy int64 arrays: per scope instance or lane, its
    dispatch indexes in order and the run number of each (scopes are one run; a lane starts a
    new one at every idle gap longer than ``max_gap_ns``), for callers that work on whole
    sequences at once."""
    import numpy as np

    c = trace.columns
    if has_scopes(trace):
        scopes = [lc.scope if lc is not None else None for lc in c.launch]
        for scope, idx in _grouped(*_codes(scopes)).items():
            if scope is not None:
                s = list(map(c.start_ns.__getitem__, idx))
                if not all(map(le, s, s[1:])):
                    idx.sort(key=lambda i: (c.start_ns[i], i))
                yield np.array(idx, dtype=np.int64), np.zeros(len(idx), dtype=np.int64)
        return
    starts, ends = _times(trace)
    for at in lane_arrays(trace):
        runs = np.zeros(len(at), dtype=np.int64)
        np.cumsum((starts[at[1:]] - ends[at[:-1]]) > max_gap_ns, out=runs[1:])
        yield at, runs


def sequences(trace: Trace, max_gap_ns: int = SEGMENT_MAX_GAP_NS):
    """Every launch sequence at once, as two numpy arrays: the dispatch indexes of all
    sequences back to back (each in start order), and whether each one starts a new run
    (its sequence's first dispatch, or the first after an idle gap). The bulk form of
    ``run_ids`` for callers that read every sequence (a torch trace has one per scope
    instance: tens of thousands)."""
    import numpy as np

    c = trace.columns
    starts, ends = _times(trace)
    if has_scopes(trace):
        scopes = [lc.scope if lc is not None else None for lc in c.launch]
        distinct, codes = _codes(scopes)
        if None in distinct:
            codes = np.where(codes == distinct.index(None), -1, codes)
        order = np.lexsort((np.arange(len(codes)), starts, codes))
        at = order[codes[order] >= 0]
        new_run = np.ones(len(at), dtype=bool)
        new_run[1:] = codes[at[1:]] != codes[at[:-1]]
        return at, new_run
    parts = [a for a in lane_arrays(trace) if len(a)]
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    at = np.concatenate(parts)
    new_run = np.ones(len(at), dtype=bool)
    new_run[1:] = (starts[at[1:]] - ends[at[:-1]]) > max_gap_ns
    new_run[np.cumsum([len(a) for a in parts])[:-1]] = True  # each lane starts its own run
    return at, new_run


def lane_arrays(trace: Trace) -> list:
    """``lanes`` as numpy index arrays (made once per trace)."""
    import numpy as np

    got = trace.cache.get("lane_arrays")
    if got is None:
        got = trace.cache["lane_arrays"] = [np.array(idx, dtype=np.int64) for idx in lanes(trace).values()]
    return got


def _times(trace: Trace):
    """Start and end times as numpy arrays (made once per trace)."""
    import numpy as np

    got = trace.cache.get("times")
    if got is None:
        c = trace.columns
        got = trace.cache["times"] = (np.array(c.start_ns, dtype=np.int64), np.array(c.end_ns, dtype=np.int64))
    return got


def _window_mates(trace: Trace) -> dict[str, Counter]:
    """Kernel pairs at most ``SEGMENT_WINDOW`` apart on a lane with no idle gap between them,
    counted as integer pair codes (numpy) rather than tuples of names."""
    import numpy as np

    names, codes = name_codes(trace)
    k = len(names)
    starts, ends = _times(trace)
    pair_codes = []
    for at in lane_arrays(trace):
        if len(at) < 2:
            continue
        a = codes[at]
        linked = (starts[at[1:]] - ends[at[:-1]]) <= SEGMENT_MAX_GAP_NS
        pair_codes.append((a[:-1] * k + a[1:])[linked])
        pair_codes.append((a[:-2] * k + a[2:])[linked[:-1] & linked[1:]])
    mates: dict[str, Counter] = {}
    if not pair_codes:
        return mates
    found, counts = np.unique(np.concatenate(pair_codes), return_counts=True)
    for code, n in zip(found.tolist(), counts.tolist()):
        a, b = divmod(code, k)
        if a != b:
            mates.setdefault(names[a], Counter())[names[b]] += n
            mates.setdefault(names[b], Counter())[names[a]] += n
    return mates


def _scope_mates(trace: Trace) -> dict[str, Counter]:
    members: dict[Hashable, dict[str, None]] = {}
    for name, lc in zip(trace.columns.name, trace.columns.launch):
        if lc is not None and lc.scope is not None:
            members.setdefault(lc.scope, {})[name] = None
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
    c = trace.columns
    n = len(c)
    if stages is not None and len(stages) != n:
        raise ValueError("stages must tag every dispatch")
    kernels: dict[str, KernelSummary] = {}
    if n:
        import numpy as np

        names, codes = name_codes(trace)
        order, lo, _ = _order(codes, len(names))
        starts, ends = _times(trace)
        durs_np = ends - starts
        per = durs_np[order]
        sums, mins, maxs = (f.reduceat(per, lo).tolist() for f in (np.add, np.minimum, np.maximum))
        firsts = np.minimum.reduceat(starts[order], lo).tolist()
        durs = durs_np.tolist()
        for first, (name, idx) in enumerate(_index(trace)[0].items()):
            k = kernels[name] = KernelSummary(name, first=first, first_ns=firsts[first], calls=len(idx),
                                              total_ns=sums[first], min_ns=mins[first], max_ns=maxs[first])
            for res in dict.fromkeys(map(c.resources.__getitem__, idx)):  # distinct, first dispatch first
                if res is not None:
                    _merge_resources(k.resources, res)
            if c.launch is not None or stages is not None:
                _variants(k, idx, durs, c.launch, stages)
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
    segment_known = n > 0
    if not segment_known:
        rule, mates = NO_SEGMENT_RULE, {}
    elif has_scopes(trace):
        rule, mates = trace.segment_rule, _scope_mates(trace)
    else:
        rule, mates = WINDOW_RULE, _window_mates(trace)
    for name, k in kernels.items():
        counter = mates.get(name)
        if counter:
            k.mates = sorted(counter, key=lambda m: (-counter[m], kernels[m].first_ns or 0, m))
    ranked = sorted(kernels.values(), key=lambda k: (-k.total_ns, k.name))
    return Profile(trace=trace, total_ns=grand, dispatch_count=sum(k.calls for k in kernels.values()),
                   kernels=ranked, segment_known=segment_known, segment_rule=rule)


def _stage_variants(k: KernelSummary, idx: list[int], durs: list[int], stages: Sequence[str | None]) -> None:
    """No launch context (kernel traces): variants by stage only, counted in C."""
    tags = list(map(stages.__getitem__, idx))
    distinct = set(tags) - {None}
    if not distinct:
        return
    d = list(map(durs.__getitem__, idx))
    # operator.eq, not str.__eq__: "stage1".__eq__(None) is NotImplemented, which compress counts as true
    variants = [Variant(None, None, stage, tags.count(stage), sum(compress(d, map(eq, tags, repeat(stage)))))
                for stage in distinct]
    k.variants = sorted(variants, key=lambda v: (-v.total_ns, v.stage or ""))


def _variants(k: KernelSummary, idx: list[int], durs: list[int], launch, stages) -> None:
    if launch is None:
        _stage_variants(k, idx, durs, stages)
        return
    gemms: dict[tuple, OpGemm | None] = {}
    variants: dict[tuple, Variant] = {}
    ops: dict[int, list] = {}
    for i in idx:
        lc = launch[i] if launch is not None else None
        op = lc.op if lc is not None else None
        stage = stages[i] if stages is not None else None
        if op is not None or stage is not None:
            gkey = (id(op), stage)
            gemm = gemms[gkey] if gkey in gemms else gemms.setdefault(gkey, op_gemm(op, stage))
            vkey = (gemm, op.name if gemm is not None and op is not None else None, stage)
            v = variants.get(vkey)
            if v is None:
                v = variants[vkey] = Variant(gemm, vkey[1], stage)
            v.calls += 1
            v.total_ns += durs[i]
        if op is not None:
            slot = ops.get(id(op))
            if slot is None:
                ops[id(op)] = [op, 1]
            else:
                slot[1] += 1
        if lc is not None and lc.scope_name:
            k.scopes[lc.scope_name] += 1
    k.variants = sorted((v for v in variants.values() if v.gemm is not None or v.stage is not None),
                        key=lambda v: (-v.total_ns, str(v.gemm), v.source_op or "", v.stage or ""))
    k.launch_ops = [(op, n) for op, n in sorted(ops.values(), key=lambda s: (-s[1], s[0].name))]


def _merge_resources(into: dict[str, Any], res: Any) -> None:
    for key in _MAX_KEYS:
        value = getattr(res, key)
        if value is not None:
            old = into.get(key)
            into[key] = value if old is None else max(old, value)
    value = res.workgroup_size
    if value is not None and "workgroup_size" not in into:
        into["workgroup_size"] = list(value)

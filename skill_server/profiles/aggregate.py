"""From per-dispatch records to kernels ranked by share of GPU time (format independent).

Parsers produce ``Dispatch`` records (one per kernel launch) or, for already-aggregated
formats, ``KernelTotals``. This module forms segments, aggregates by full kernel name,
ranks, filters and builds the boundary models.

Segments. A segment is the set of kernels that together implement one operation (the
MoE card scores "GEMM + reduce kernel" as one segment). Each parser tags dispatches:
- torch traces: ``scope`` = one instance of the launching scope (see ``torch_trace``);
  kernels sharing a scope instance are one segment;
- kernel traces: no scopes, so ``window_segments`` pairs each dispatch with its
  neighbours in start order on the same lane (agent, queue, stream): up to
  ``SEGMENT_WINDOW`` kernels either side, walking outward only while the idle gap between
  consecutive kernels is at most ``SEGMENT_MAX_GAP_NS`` (a longer gap means the host
  stepped in, e.g. a sync, so the run of kernels ended).
A kernel's ``segment_kernels`` are the other kernels it shared a segment with, over all
its dispatches, most frequent first (then first seen), as short names.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from skill_server.hotspot import GemmShape, Hotspot
from skill_server.profiles.errors import ProfileError
from skill_server.profiles.kernel_names import demangle, short_name
from skill_server.profiles.models import (
    KernelResources,
    LaunchOp,
    ProfiledHotspot,
    ProfileSummary,
    ShapeVariant,
)

SEGMENT_WINDOW = 2
SEGMENT_MAX_GAP_NS = 20_000

_RESOURCE_KEYS = ("vgpr_count", "accum_vgpr_count", "sgpr_count", "registers_per_thread", "scratch_bytes", "lds_bytes")


@dataclass(slots=True)
class Dispatch:
    """One kernel launch as a parser saw it."""

    name: str
    dur_ns: int
    start_ns: int | None = None
    order: int = 0  # input order / dispatch id: the tie-breaker for equal starts
    lane: Hashable | None = None  # kernel traces: where dispatches are serialised
    resources: dict[str, Any] | None = None  # keys of KernelResources
    scope: Hashable | None = None  # torch traces: the segment scope instance
    scope_name: str | None = None
    launch_op: str | None = None
    launch_dims: list | None = None
    launch_types: list[str] | None = None
    shape: GemmShape | None = None
    shape_op: str | None = None
    dtype: str | None = None
    scale_format: str | None = None


@dataclass(slots=True)
class KernelTotals:
    """One kernel's totals, for formats that are aggregated already (kernel_stats.csv)."""

    name: str
    calls: int
    total_ns: int
    min_ns: int | None = None
    max_ns: int | None = None


@dataclass
class _Kernel:
    name: str
    first: int
    calls: int = 0
    total_ns: int = 0
    min_ns: int | None = None
    max_ns: int | None = None
    resources: dict[str, Any] = field(default_factory=dict)
    shapes: dict[tuple, list[int]] = field(default_factory=dict)  # (shape, op, dtype, scale format) -> [calls, ns]
    launch_ops: dict[str, list] = field(default_factory=dict)  # op -> [calls, dims, types]
    scopes: Counter = field(default_factory=Counter)

    def add_time(self, calls: int, total: int, lo: int | None, hi: int | None) -> None:
        self.calls += calls
        self.total_ns += total
        if lo is not None:
            self.min_ns = lo if self.min_ns is None else min(self.min_ns, lo)
        if hi is not None:
            self.max_ns = hi if self.max_ns is None else max(self.max_ns, hi)

    def add(self, d: Dispatch) -> None:
        self.add_time(1, d.dur_ns, d.dur_ns, d.dur_ns)
        for key, value in (d.resources or {}).items():
            if value is None:
                continue
            if key == "workgroup_size":
                self.resources.setdefault(key, value)
            else:
                self.resources[key] = max(self.resources.get(key, value), value)
        if d.shape is not None:
            slot = self.shapes.setdefault((d.shape, d.shape_op or "", d.dtype, d.scale_format), [0, 0])
            slot[0] += 1
            slot[1] += d.dur_ns
        if d.launch_op:
            slot = self.launch_ops.setdefault(d.launch_op, [0, d.launch_dims, d.launch_types])
            slot[0] += 1
        if d.scope_name:
            self.scopes[d.scope_name] += 1


def window_segments(
    dispatches: list[Dispatch], window: int = SEGMENT_WINDOW, max_gap_ns: int = SEGMENT_MAX_GAP_NS
) -> dict[str, Counter]:
    """Neighbours in start order on each lane (the kernel-trace segment rule, module docstring)."""
    lanes: dict[Hashable, list[Dispatch]] = {}
    for d in dispatches:
        if d.start_ns is not None:
            lanes.setdefault(d.lane, []).append(d)
    together: dict[str, Counter] = {}
    for run in lanes.values():
        run.sort(key=lambda d: (d.start_ns, d.order))
        names = [d.name for d in run]
        # linked[i]: kernel i+1 starts within max_gap_ns of kernel i's end
        linked = [b.start_ns - (a.start_ns + a.dur_ns) <= max_gap_ns for a, b in zip(run, run[1:])]
        n = len(run)
        for i, name in enumerate(names):
            mates = together.get(name)
            if mates is None:
                mates = together[name] = Counter()
            k = i
            while k > 0 and i - k < window and linked[k - 1]:
                k -= 1
                if names[k] != name:
                    mates[names[k]] += 1
            k = i
            while k < n - 1 and k - i < window and linked[k]:
                k += 1
                if names[k] != name:
                    mates[names[k]] += 1
    return together


def scope_segments(dispatches: list[Dispatch]) -> dict[str, Counter]:
    """Kernels sharing a scope instance (the torch-trace segment rule); counted once per instance."""
    members: dict[Hashable, dict[str, None]] = {}
    for d in dispatches:
        if d.scope is not None:
            members.setdefault(d.scope, {})[d.name] = None
    together: dict[str, Counter] = {}
    for names in members.values():
        for name in names:
            mates = together.setdefault(name, Counter())
            for other in names:
                if other != name:
                    mates[other] += 1
    return together


def _pct(part: int, whole: int) -> float:
    return min(100.0, max(0.0, round(100.0 * part / whole, 4)))


def _only(values: Iterable[Any]) -> Any:
    distinct = {v for v in values if v is not None}
    return distinct.pop() if len(distinct) == 1 else None


def summarize(
    *,
    fmt: str,
    label: str,
    dispatches: list[Dispatch] | None = None,
    totals: list[KernelTotals] | None = None,
    segments: dict[str, Counter] | None,
    segment_rule: str,
    top: int,
    min_pct: float,
    skipped: dict[str, int] | None = None,
    device_names: list[str] | None = None,
    gen: str | None = None,
    notes: list[str] | None = None,
) -> ProfileSummary:
    """Aggregate by full kernel name, rank by total time, filter, and build the summary."""
    kernels: dict[str, _Kernel] = {}
    for d in dispatches or []:
        k = kernels.get(d.name)
        if k is None:
            k = kernels[d.name] = _Kernel(d.name, first=len(kernels))
        k.add(d)
    for t in totals or []:
        k = kernels.get(t.name)
        if k is None:
            k = kernels[t.name] = _Kernel(t.name, first=len(kernels))
        k.add_time(t.calls, t.total_ns, t.min_ns, t.max_ns)
    if not kernels:
        raise ProfileError("no kernels found", file=label, expected="at least one GPU kernel dispatch")
    grand = sum(k.total_ns for k in kernels.values())
    if grand <= 0:
        raise ProfileError("every kernel has zero duration, so no share of GPU time can be computed", file=label,
                           expected="kernel durations in ns greater than zero")

    ranked = sorted(kernels.values(), key=lambda k: (-k.total_ns, k.name))
    order = {k.name: k.first for k in kernels.values()}
    shown: list[ProfiledHotspot] = []
    for rank, k in enumerate(ranked, start=1):
        pct = _pct(k.total_ns, grand)
        if pct < min_pct or len(shown) >= top:
            continue
        shown.append(_hotspot(k, rank, pct, grand, segments, order, gen))
    return ProfileSummary(
        format=fmt,  # type: ignore[arg-type]
        source=label,
        total_gpu_time_ns=grand,
        dispatch_count=sum(k.calls for k in kernels.values()),
        kernel_count=len(kernels),
        hotspots=shown,
        omitted_kernels=len(kernels) - len(shown),
        skipped=dict(skipped or {}),
        device_names=list(device_names or []),
        segment_rule=segment_rule,
        notes=list(notes or []),
    )


def _hotspot(
    k: _Kernel, rank: int, pct: float, grand: int, segments: dict[str, Counter] | None,
    order: dict[str, int], gen: str | None,
) -> ProfiledHotspot:
    op_name = short_name(k.name)
    variants = sorted(
        (
            ShapeVariant(shape=shape, calls=calls, total_ns=ns, pct_gpu=_pct(ns, grand), source_op=op, dtype=dtype,
                         scale_format=fmt)
            for (shape, op, dtype, fmt), (calls, ns) in k.shapes.items()
        ),
        key=lambda v: (-v.total_ns, str(v.shape), v.source_op),
    )
    segment: list[str] = []
    if segments is not None:
        mates = segments.get(k.name, Counter())
        for other in sorted(mates, key=lambda n: (-mates[n], order.get(n, 0), n)):
            short = short_name(other)
            if short != op_name and short not in segment:
                segment.append(short)
    resources = None
    if k.resources:
        resources = KernelResources(**{key: k.resources.get(key) for key in (*_RESOURCE_KEYS, "workgroup_size")})
    hotspot = Hotspot(
        op_name=op_name,
        gen=gen,
        dtype=_only(v.dtype for v in variants),
        scale_format=_only(v.scale_format for v in variants),
        shape=_only(v.shape for v in variants),
        segment_kernels=segment,
        pct_gpu=pct,
        label=k.scopes.most_common(1)[0][0] if k.scopes else None,
    )
    launch_ops = [
        LaunchOp(name=name, calls=calls, input_dims=dims, input_types=types)
        for name, (calls, dims, types) in sorted(k.launch_ops.items(), key=lambda kv: (-kv[1][0], kv[0]))
    ]
    return ProfiledHotspot(
        rank=rank,
        hotspot=hotspot,
        full_name=k.name,
        demangled_name=demangle(k.name),
        calls=k.calls,
        total_ns=k.total_ns,
        avg_ns=k.total_ns / k.calls,
        min_ns=k.min_ns,
        max_ns=k.max_ns,
        resources=resources,
        launch_ops=launch_ops,
        scopes=[name for name, _ in k.scopes.most_common()],
        shape_variants=variants,
        segment_known=segments is not None,
    )

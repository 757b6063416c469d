"""Segment scoring: the time of *every* kernel a call launches, except the cache flush.

The score per iteration is the sum of the device time of all kernels attributed to that
call (side streams included), so a multi-kernel segment (the MoE stage-2 GEMM plus its
separate top-k reduce) is never scored on one kernel. Each kernel is also reported on its
own. When the problem declares the segment's kernels (``SegmentSpec.kernels``), a declared
pattern that matches nothing, or a kernel in the trace that no declared pattern covers,
fails the stage: a filter on the GEMM's name alone would silently drop the reduce.
"""
from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from verifiers.judge.kernel_trace import KernelRecord
from verifiers.problem import SegmentSpec

Status = Literal["PASS", "FAIL", "SKIPPED", "ERROR"]


class KernelStat(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")  # inf/NaN survive a JSON round trip

    name: str
    calls: int
    total_us: float
    per_iter_us: float  # mean time per iteration
    launches_per_iter: float
    share: float  # fraction of the segment's time


class SegmentScore(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")  # inf/NaN survive a JSON round trip

    arm: str
    source: str
    status: Status
    iterations: int
    per_iter_us: list[float] = Field(default_factory=list)
    score_us: float | None = None  # median over iterations
    breakdown: list[KernelStat] = Field(default_factory=list)
    declared: list[str] = Field(default_factory=list)
    missing_declared: list[str] = Field(default_factory=list)  # declared patterns matching no kernel
    unmatched_kernels: list[str] = Field(default_factory=list)  # kernels no declared pattern covers
    failures: list[str] = Field(default_factory=list)


def call_kernels(records: Sequence[KernelRecord], flush_pattern: str) -> list[KernelRecord]:
    """The kernels that belong to calls: attributed to a call window, or (no window info)
    every kernel the flush pattern does not match."""
    flush = re.compile(flush_pattern)
    if any(r.window is not None for r in records):
        return [r for r in records if r.window == "call"]
    return [r for r in records if not flush.search(r.name)]


def per_iteration(kernels: Sequence[KernelRecord]) -> dict[int, list[KernelRecord]]:
    out: dict[int, list[KernelRecord]] = {}
    for k in kernels:
        out.setdefault(k.iteration if k.iteration is not None else 0, []).append(k)
    return dict(sorted(out.items()))


def breakdown(kernels: Sequence[KernelRecord], iterations: int) -> list[KernelStat]:
    total = sum(k.dur_us for k in kernels) or 1.0
    by_name: dict[str, list[KernelRecord]] = {}
    for k in kernels:
        by_name.setdefault(k.name, []).append(k)
    stats = [
        KernelStat(
            name=name,
            calls=len(ks),
            total_us=sum(k.dur_us for k in ks),
            per_iter_us=sum(k.dur_us for k in ks) / max(iterations, 1),
            launches_per_iter=len(ks) / max(iterations, 1),
            share=sum(k.dur_us for k in ks) / total,
        )
        for name, ks in by_name.items()
    ]
    return sorted(stats, key=lambda s: -s.total_us)


def score_segment(records: Sequence[KernelRecord], spec: SegmentSpec, arm: str) -> SegmentScore:
    source = records[0].source if records else "none"
    kernels = call_kernels(records, spec.flush_pattern)
    iters = per_iteration(kernels)
    score = SegmentScore(arm=arm, source=source, status="PASS", iterations=len(iters), declared=list(spec.kernels))
    if not kernels:
        score.status = "FAIL"
        score.failures.append(f"{arm}: no device kernels in the profiled calls (nothing ran on the device?)")
        return score
    score.per_iter_us = [sum(k.dur_us for k in ks) for ks in iters.values()]
    score.score_us = statistics.median(score.per_iter_us)
    score.breakdown = breakdown(kernels, len(iters))
    if spec.kernels:
        names = sorted({k.name for k in kernels})
        patterns = [re.compile(p) for p in spec.kernels]
        score.missing_declared = [p.pattern for p in patterns if not any(p.search(n) for n in names)]
        score.unmatched_kernels = [n for n in names if not any(p.search(n) for p in patterns)]
        for p in score.missing_declared:
            score.failures.append(f"{arm}: declared segment kernel {p!r} is absent from the trace")
        for n in score.unmatched_kernels:
            share = next(s.share for s in score.breakdown if s.name == n)
            score.failures.append(
                f"{arm}: the declared segment filter {list(spec.kernels)} misses kernel {n!r} "
                f"({share:.1%} of the segment), which a filtered score would silently drop"
            )
    if score.failures:
        score.status = "FAIL"
    return score


def segment_speedup(baseline: SegmentScore, candidate: SegmentScore) -> float | None:
    if baseline.score_us and candidate.score_us:
        return baseline.score_us / candidate.score_us
    return None

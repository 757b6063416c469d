"""Physical lower bound on one call's time: FLOPs / peak and bytes / bandwidth.

A measured time below the bound means the measurement (or the kernel's work) is not what
it claims: such speedups are flagged, and beyond the margin they fail.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict

from verifiers.problem import Problem


class PhysicalBound(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")  # inf/NaN survive a JSON round trip

    flops: float | None = None
    min_bytes: float | None = None
    peak_flops: float | None = None  # FLOP/s, declared
    bandwidth: float | None = None  # bytes/s, declared or measured (copy)
    bandwidth_source: Literal["declared", "measured", "none"] = "none"
    bound_ms: float | None = None  # max(flops / peak, bytes / bandwidth)
    candidate_ms: float | None = None
    margin: float = 0.2
    status: Literal["ok", "below_bound", "impossible", "unknown"] = "unknown"
    message: str = ""


def physical_bound(
    problem: Problem,
    dims: Mapping[str, int],
    peak_flops: float | None,
    bandwidth: float | None,
    bandwidth_source: Literal["declared", "measured", "none"],
    margin: float,
) -> PhysicalBound:
    b = PhysicalBound(
        flops=problem.flops(dict(dims)) if problem.flops else None,
        min_bytes=problem.min_bytes(dict(dims)) if problem.min_bytes else None,
        peak_flops=peak_flops,
        bandwidth=bandwidth,
        bandwidth_source=bandwidth_source,
        margin=margin,
    )
    parts = []
    if b.flops and peak_flops:
        parts.append(b.flops / peak_flops * 1e3)
    if b.min_bytes and bandwidth:
        parts.append(b.min_bytes / bandwidth * 1e3)
    b.bound_ms = max(parts) if parts else None
    return b


def check(bound: PhysicalBound, candidate_ms: float) -> PhysicalBound:
    out = bound.model_copy(update={"candidate_ms": candidate_ms})
    if out.bound_ms is None:
        out.status, out.message = "unknown", "no FLOP count / peak or byte count / bandwidth to bound the time"
    elif candidate_ms < out.bound_ms * (1.0 - out.margin):
        out.status = "impossible"
        out.message = (
            f"candidate takes {candidate_ms:.4g} ms, below the physical bound {out.bound_ms:.4g} ms by more "
            f"than {out.margin:.0%}: the timed window does not contain the work"
        )
    elif candidate_ms < out.bound_ms:
        out.status = "below_bound"
        out.message = f"candidate takes {candidate_ms:.4g} ms, under the physical bound {out.bound_ms:.4g} ms (cache-resident data?)"
    else:
        out.status = "ok"
        out.message = f"candidate at {out.bound_ms / candidate_ms:.1%} of the physical bound"
    return out

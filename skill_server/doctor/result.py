"""What one ``skill-server doctor`` check found: the typed result every check returns.

A check diagnoses one thing a first run needs (torch's build, the linker, the timer floor...)
and says, in one line each, what it found and what to do about it. Status:

- ``ok``: ready; ``warn``: works, with a caveat that can bias or block part of a run;
- ``missing``: a piece a first run needs is absent (install it: ``fix`` says how);
- ``failed``: present but broken (does not import, does not run, timed out, crashed);
- ``not_applicable``: cannot be checked on this box (no GPU, not ROCm...), ``finding`` says why.

Measured checks carry their figures in a typed ``details`` model (one per kind) so the JSON
a user sends back holds the numbers, not only the sentence. Only pydantic and the stdlib here:
the doctor's parent process never imports torch.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

CheckStatus = Literal["ok", "warn", "missing", "failed", "not_applicable"]
#: statuses that stop a verification on this box when the check is one it needs
BLOCKING = ("missing", "failed")


class _Details(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")


class ToolDetails(_Details):
    kind: Literal["tool"] = "tool"
    name: str
    version: str | None = None
    path: str | None = None
    expected: str | None = Field(None, description="the version the project pins or needs")


class DeviceDetails(_Details):
    kind: Literal["device"] = "device"
    torch_version: str
    build: Literal["rocm", "cuda", "cpu"]
    hip: str | None = None
    cuda: str | None = None
    device_count: int = 0
    device_name: str | None = None
    arch: str | None = Field(None, description="gcnArchName as reported, feature suffixes included (gfx950:sramecc+:xnack-)")
    capability: str | None = None
    compute_units: int | None = None
    total_memory_bytes: int | None = None


class CacheDetails(_Details):
    kind: Literal["caches"] = "caches"
    l2_reported_bytes: int = Field(description="L2_cache_size as torch reports it (one XCD's L2 on AMD multi-die parts)")
    l2_domains: int = 1
    l2_total_bytes: int
    mall_bytes: int | None = Field(None, description="AMD Infinity Cache (MALL); torch does not report it")
    llc_bytes: int = Field(description="every cache level a flush must push data out of: L2s + MALL")
    flush_bytes: int = Field(description="what the verifier's flush writes by default on this device")
    required_flush_bytes: int = Field(description="2 x llc_bytes")
    source: str


class TimerFloorDetails(_Details):
    kind: Literal["timer_floor"] = "timer_floor"
    timer: str
    samples: int
    median_us: float
    q1_us: float
    q3_us: float
    p95_us: float
    min_us: float
    host_median_us: float
    launch_median_us: float | None = Field(None, description="a one-element kernel through the same timer")
    min_kernel_us_for_1pct: float = Field(description="shortest kernel whose true 1.3x reads within 1 % through this floor")


class FlushDetails(_Details):
    kind: Literal["flush_eviction"] = "flush_eviction"
    buffer_bytes: int
    flush_bytes: int
    reference_bytes: int
    samples: int
    warm_us: float
    after_flush_us: float
    after_reference_us: float
    floor_us: float | None = None
    flush_ratio: float = Field(description="after the verifier's flush / warm (> 1: the read came from further out)")
    reference_ratio: float = Field(description="after a reference eviction (read + write of a much larger buffer) / warm")


class KernelNameDetails(_Details):
    kind: Literal["kernel_names"] = "kernel_names"
    probe: str = Field(description="the tiny known kernel's source name")
    raw_names: list[str] = Field(default_factory=list, description="what the profiler calls the kernels of the call")
    pattern: str
    matched: bool = Field(description="the verifier's signature gate passes with the anchored pattern")
    launches_per_iter: list[int] = Field(default_factory=list)
    flush_names: list[str] = Field(default_factory=list)
    flush_pattern: str
    flush_matched: bool | None = None
    gate_failures: list[str] = Field(default_factory=list)


class RuntimeDetails(_Details):
    kind: Literal["runtimes"] = "runtimes"
    loaded_first: list[str] = Field(default_factory=list, description="what was loaded before looking")
    libraries: list[str] = Field(default_factory=list, description="HIP/CUDA runtime files mapped in the process")
    notes: list[str] = Field(default_factory=list)


class PrerequisiteLine(_Details):
    name: str
    kind: str
    met: bool | None
    detail: str
    fallback: str | None = None
    fallback_present: bool | None = None


class CardDetails(_Details):
    kind: Literal["card"] = "card"
    card_id: str
    prerequisites: list[PrerequisiteLine] = Field(default_factory=list)


Details = Annotated[
    ToolDetails | DeviceDetails | CacheDetails | TimerFloorDetails | FlushDetails | KernelNameDetails
    | RuntimeDetails | CardDetails,
    Field(discriminator="kind"),
]


class CheckResult(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    id: str = Field(description="stable check id (torch, device, linker, card:<id>, ...)")
    title: str
    status: CheckStatus
    finding: str = Field(description="one line: what was found")
    fix: str | None = Field(None, description="one line: what to do (None when nothing is to be done)")
    details: Details | None = None
    elapsed_s: float = 0.0


def result(id: str, title: str, status: CheckStatus, finding: str, fix: str | None = None,
           details: BaseModel | None = None) -> CheckResult:
    """A CheckResult (keyword-light constructor for the check functions)."""
    return CheckResult(id=id, title=title, status=status, finding=finding, fix=fix, details=details)

"""Boundary models of profile ingestion: what ``load_profile`` returns."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skill_server.hotspot import GemmShape, Hotspot

ProfileFormat = Literal["rocprofv3_kernel_trace", "rocprofv3_kernel_stats", "torch_trace"]
PROFILE_FORMATS: tuple[str, ...] = ("rocprofv3_kernel_trace", "rocprofv3_kernel_stats", "torch_trace")


class KernelResources(BaseModel):
    """Per-kernel resource columns, where the format records them (evidence, e.g. of spills).

    Each value is the maximum over the kernel's dispatches (a kernel object has fixed
    register counts; LDS can vary with dynamic shared memory, and the largest is the one
    that limits occupancy)."""

    model_config = ConfigDict(extra="forbid")

    vgpr_count: int | None = Field(None, ge=0, description="arch VGPRs per work-item (rocprofv3)")
    accum_vgpr_count: int | None = Field(None, ge=0, description="AccVGPRs per work-item (rocprofv3)")
    sgpr_count: int | None = Field(None, ge=0, description="SGPRs per wave (rocprofv3)")
    registers_per_thread: int | None = Field(None, ge=0, description="registers per thread (CUDA torch traces)")
    scratch_bytes: int | None = Field(None, ge=0, description="private/scratch bytes per work-item; >0 often means spills")
    lds_bytes: int | None = Field(None, ge=0, description="LDS / shared memory bytes per workgroup")
    workgroup_size: list[int] | None = Field(None, description="workgroup (block) size x, y, z of the first dispatch")


class ShapeVariant(BaseModel):
    """One GEMM shape a kernel ran at, from the launching CPU op's inputs (torch traces)."""

    model_config = ConfigDict(extra="forbid")

    shape: GemmShape
    calls: int = Field(ge=1)
    total_ns: int = Field(ge=0)
    pct_gpu: float = Field(ge=0.0, le=100.0, description="this shape's share of all GPU kernel time")
    source_op: str = Field(description="the CPU op whose input dims gave the shape, e.g. aten::addmm")
    dtype: str | None = Field(None, description="first operand dtype, normalised (e.g. fp8_e4m3)")
    scale_format: str | None = Field(None, description="operand scale format read from the scale tensors' dims")


class LaunchOp(BaseModel):
    """A CPU op that launched the kernel (torch traces), with its recorded inputs: raw evidence
    (e.g. scale tensors' dims and types) for anything the loader does not interpret itself."""

    model_config = ConfigDict(extra="forbid")

    name: str
    calls: int = Field(ge=1)
    input_dims: list[Any] | None = None
    input_types: list[str] | None = None


class ProfiledHotspot(BaseModel):
    """One kernel (aggregated by its full name), ranked by its share of GPU time."""

    model_config = ConfigDict(extra="forbid")

    rank: int = Field(ge=1, description="1 = most GPU time, over all kernels before any filter")
    hotspot: Hotspot = Field(description="the matcher's input; op_name is the short kernel name")
    full_name: str = Field(description="the kernel name exactly as the profiler wrote it")
    demangled_name: str = Field(description="full_name demangled where it was mangled, else the same")
    calls: int = Field(ge=1)
    total_ns: int = Field(ge=0)
    avg_ns: float = Field(ge=0.0)
    min_ns: int | None = Field(None, ge=0)
    max_ns: int | None = Field(None, ge=0)
    resources: KernelResources | None = None
    launch_ops: list[LaunchOp] = Field(default_factory=list, description="torch traces: innermost launching CPU ops, most calls first")
    scopes: list[str] = Field(default_factory=list, description="torch traces: names of the segment scopes it ran in")
    shape_variants: list[ShapeVariant] = Field(
        default_factory=list,
        description="every GEMM shape seen; hotspot.shape is set only when there is exactly one",
    )
    segment_known: bool = Field(description="False when the format has no ordering or scope (kernel_stats.csv)")

    def per_shape(self) -> list[Hotspot]:
        """One hotspot per shape variant, each with that variant's share of GPU time.

        Use when ``hotspot.shape`` is None because the kernel ran at several shapes: the
        cards pick recipes by shape, so each shape deserves its own match. Dispatches whose
        shape is unknown are in no variant, so the shares can sum to less than the kernel's."""
        if not self.shape_variants:
            return [self.hotspot]
        return [
            self.hotspot.model_copy(update={
                "shape": v.shape, "pct_gpu": v.pct_gpu,
                "dtype": v.dtype or self.hotspot.dtype, "scale_format": v.scale_format or self.hotspot.scale_format,
            })
            for v in self.shape_variants
        ]


class ProfileSummary(BaseModel):
    """What a profile says: kernels ranked by share of GPU kernel time."""

    model_config = ConfigDict(extra="forbid")

    format: ProfileFormat
    source: str = Field(description="the file path, or '<content>'")
    total_gpu_time_ns: int = Field(ge=0, description="sum of all kernel durations (overlapping streams count twice)")
    dispatch_count: int = Field(ge=0, description="kernel launches counted")
    kernel_count: int = Field(ge=0, description="distinct kernels (by full name)")
    hotspots: list[ProfiledHotspot]
    omitted_kernels: int = Field(0, ge=0, description="kernels left out by top / min_pct")
    skipped: dict[str, int] = Field(default_factory=dict, description="rows or events not counted as kernels, by kind")
    device_names: list[str] = Field(default_factory=list)
    segment_rule: str = Field(description="how segment_kernels were formed for this format")
    notes: list[str] = Field(default_factory=list)

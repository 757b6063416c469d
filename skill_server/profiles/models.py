"""Boundary models of profile ingestion: what ``load_profile`` returns."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skill_server.matching.hotspot import GemmShape, Hotspot

ProfileFormat = Literal["rocprofv3_kernel_trace", "rocprofv3_kernel_stats", "rocprofv3_json", "rocpd", "torch_trace"]
PROFILE_FORMATS: tuple[str, ...] = ("rocprofv3_kernel_trace", "rocprofv3_kernel_stats", "rocprofv3_json", "rocpd",
                                    "torch_trace")


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


class KernelVariant(BaseModel):
    """Dispatches of one kernel that share a GEMM shape, launching op and MoE stage."""

    model_config = ConfigDict(extra="forbid")

    shape: GemmShape | None = None
    stage: Literal["stage1", "stage2"] | None = None
    stage_basis: str | None = Field(None, description="how the stage was found")
    calls: int = Field(ge=1)
    total_ns: int = Field(ge=0)
    pct_gpu: float = Field(ge=0.0, le=100.0, description="this variant's share of all GPU kernel time")
    source_op: str | None = Field(None, description="the CPU op whose inputs gave the shape, e.g. aten::addmm")
    dtype: str | None = Field(None, description="first operand dtype, normalised (e.g. fp8_e4m3)")
    scale_format: str | None = Field(None, description="operand scale format read from the op's scale arguments")


class LaunchOp(BaseModel):
    """A CPU op that launched the kernel (torch traces), with its recorded inputs: raw evidence
    (e.g. scale tensors' dims and types) for anything the loader does not interpret itself."""

    model_config = ConfigDict(extra="forbid")

    name: str
    calls: int = Field(ge=1)
    input_dims: list[Any] | None = None
    input_types: list[str] | None = None
    concrete_inputs: list[Any] | None = None


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
    variants: list[KernelVariant] = Field(
        default_factory=list,
        description="every (GEMM shape, MoE stage) the kernel ran at; hotspot.shape / hotspot.stage are set only "
        "when there is exactly one",
    )
    unplaced_calls: int = Field(0, ge=0, description="dispatches in no variant (no shape and no stage known)")
    unplaced_ns: int = Field(0, ge=0)
    segment_known: bool = Field(description="False when the format has no ordering or scope (kernel_stats.csv)")

    def per_variant(self, total_gpu_ns: int) -> list[Hotspot]:
        """One hotspot per variant when the kernel ran at several shapes or in both MoE
        stages (the cards pick recipes by shape and stage, so each deserves its own match),
        plus one for the dispatches no variant placed. Otherwise just ``hotspot``."""
        # one stage placed and calls left unplaced: the rest may be the other stage, so they
        # are matched apart (stage unknown) rather than under the placed one
        staged_rest = len(self.variants) == 1 and self.variants[0].stage is not None and self.unplaced_calls > 0
        if len(self.variants) < 2 and not staged_rest:
            return [self.hotspot]
        out = [
            self.hotspot.model_copy(update={
                "shape": v.shape, "stage": v.stage, "stage_basis": v.stage_basis, "pct_gpu": v.pct_gpu,
                "dtype": v.dtype or self.hotspot.dtype, "scale_format": v.scale_format or self.hotspot.scale_format,
            })
            for v in self.variants
        ]
        if self.unplaced_calls:
            share = min(100.0, round(100.0 * self.unplaced_ns / total_gpu_ns, 4)) if total_gpu_ns else 0.0
            out.append(self.hotspot.model_copy(update={"shape": None, "stage": None, "pct_gpu": share}))
        return out


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
    device_gen: str | None = Field(None, description="the generation the trace's device resolves to, e.g. gfx950")
    segment_rule: str = Field(description="how segment_kernels were formed for this format")
    notes: list[str] = Field(default_factory=list)

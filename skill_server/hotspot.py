"""What a profiler (or a person) says about one hotspot: the matcher's input."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

# Caps that keep one match bounded (issue 13): a kernel name longer than 4 KB is not a
# name a profiler prints, and every criterion scans the names once.
MAX_NAME_CHARS = 4096
MAX_SEGMENT_KERNELS = 64
MAX_DIM = 2**31 - 1  # GEMM dims index int32 ranges on every backend here

Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]
Dim = Annotated[int, Field(gt=0, le=MAX_DIM)]


class GemmShape(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    M: Dim
    N: Dim
    K: Dim
    groups: Annotated[int, Field(gt=0, le=MAX_DIM)] | None = Field(
        None, description="grouped GEMMs: number of groups (experts); M counts the rows of all groups")

    def __str__(self) -> str:
        text = f"{self.M}x{self.N}x{self.K}"
        return text if self.groups is None else f"{text} ({self.groups} groups)"


class Hotspot(BaseModel):
    """One hotspot. Everything but ``op_name`` is optional: a missing field makes the
    criteria that need it *unknown* (and the matcher abstains where a card requires it),
    never silently matched."""

    model_config = ConfigDict(extra="forbid")

    op_name: Name = Field(description="kernel or op name as the profiler shows it (at most 4096 characters)")
    launch_op: Name | None = Field(
        None, description="the CPU op that launched the kernel (torch traces), e.g. aiter::gemm_a8w8_blockscale_ck; "
        "searched by op-name signatures too")
    operator: str | None = Field(None, max_length=200, description="operator class, e.g. dense_gemm; inferred from names when absent")
    gen: str | None = Field(None, max_length=200, description="GPU generation or product, e.g. gfx950 or MI355X")
    dtype: str | None = Field(None, max_length=200, description="operand dtype, e.g. fp8_e4m3")
    scale_format: str | None = Field(None, max_length=200, description="operand scale format, e.g. fp32_block or ue8m0_1x32")
    regime: Literal["prefill", "decode"] | None = None
    shape: GemmShape | None = None
    stage: Literal["stage1", "stage2"] | None = Field(None, description="MoE stage when known")
    stage_basis: str | None = Field(None, max_length=MAX_NAME_CHARS,
                                    description="how the stage was found (e.g. its place in the MoE launch sequence), "
                                    "or why it could not be")
    segment_kernels: list[Name] = Field(default_factory=list, max_length=MAX_SEGMENT_KERNELS,
                                        description="other kernels of the same segment")
    pct_gpu: float | None = Field(None, ge=0.0, le=100.0, description="share of GPU time, percent")
    label: str | None = Field(None, max_length=MAX_NAME_CHARS, description="model-side layer label; provenance only, never a selector")

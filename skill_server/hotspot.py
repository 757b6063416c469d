"""What a profiler (or a person) says about one hotspot: the matcher's input."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class GemmShape(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    M: int = Field(gt=0)
    N: int = Field(gt=0)
    K: int = Field(gt=0)

    def __str__(self) -> str:
        return f"{self.M}x{self.N}x{self.K}"


class Hotspot(BaseModel):
    """One hotspot. Everything but ``op_name`` is optional: a missing field makes the
    criteria that need it *unknown* (and the matcher abstains where a card requires it),
    never silently matched."""

    model_config = ConfigDict(extra="forbid")

    op_name: str = Field(min_length=1, description="kernel or op name as the profiler shows it")
    operator: str | None = Field(None, description="operator class, e.g. dense_gemm; inferred from names when absent")
    gen: str | None = Field(None, description="GPU generation or product, e.g. gfx950 or MI355X")
    dtype: str | None = Field(None, description="operand dtype, e.g. fp8_e4m3")
    scale_format: str | None = Field(None, description="operand scale format, e.g. fp32_block or ue8m0_1x32")
    regime: Literal["prefill", "decode"] | None = None
    shape: GemmShape | None = None
    stage: Literal["stage1", "stage2"] | None = Field(None, description="MoE stage when known")
    segment_kernels: list[str] = Field(default_factory=list, description="other kernels of the same segment")
    pct_gpu: float | None = Field(None, ge=0.0, le=100.0, description="share of GPU time, percent")
    label: str | None = Field(None, description="model-side layer label; provenance only, never a selector")

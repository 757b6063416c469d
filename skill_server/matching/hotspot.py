"""What a profiler (or a person) says about one hotspot: the matcher's input."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from skill_server.cards.shapes import MAX_DIM, GemmShape, _untitled, parse_gemm_shape  # noqa: F401 - GemmShape is part of the hotspot model

# Caps that keep one match bounded (issue 13): a kernel name longer than 4 KB is not a
# name a profiler prints, and every criterion scans the names once.
MAX_NAME_CHARS = 4096
MAX_SEGMENT_KERNELS = 64

def _bounded_name(v: str) -> str:
    if len(v) > MAX_NAME_CHARS:
        raise ValueError(f"String should have at most {MAX_NAME_CHARS} characters (got {len(v)})")
    return v


# bounds checked by validators rather than schema constraints: the same refusal, fewer
# characters in the tools' schema that every agent session pays for
Name = Annotated[str, Field(min_length=1), AfterValidator(_bounded_name)]


def _shape_in(v: object) -> object:
    """Shape text or a [M, N, K] list -> GemmShape, through the one parser. A mapping is left to
    GemmShape's own validation, whose errors name the field (``hotspot.shape.M``)."""
    if not isinstance(v, (str, list, tuple)):
        return v
    return parse_gemm_shape(v)  # a ShapeTextError (ValueError) names the expected form


def _also_text(schema: dict) -> None:
    """The schema says what the validator takes: {M, N, K} or shape text."""
    options = schema.get("anyOf")
    if isinstance(options, list) and {"type": "string"} not in options:
        options.insert(1, {"type": "string"})


# A shape argument of any front end: "4096x2048x7168", "M=4096,N=2048,K=7168", {M, N, K} or
# [M, N, K]; always a GemmShape (or None) once validated. Validated as GemmShape, so an error
# names the field (hotspot.shape.M); the schema says object or string.
ShapeIn = Annotated[GemmShape | None, BeforeValidator(_shape_in), Field(json_schema_extra=_also_text)]


class Hotspot(BaseModel):
    """op_name plus what is known: a missing field is unknown, never guessed."""

    # (everything but op_name is optional: a missing field makes the criteria that need it
    # unknown, and the matcher abstains where a card requires it; never silently matched)
    model_config = ConfigDict(extra="forbid", json_schema_extra=_untitled)

    op_name: Name = Field(description="kernel or op name as the profiler shows it")
    launch_op: Name | None = None  # the CPU op that launched the kernel (torch traces); signatures search it too
    operator: str | None = Field(None, description="e.g. dense_gemm (else inferred from the names)")
    gen: str | None = Field(None, description="e.g. gfx950, MI355X")
    dtype: str | None = Field(None, description="operand dtype, e.g. fp8_e4m3")
    scale_format: str | None = Field(None, description="e.g. fp32_block, ue8m0_1x32")
    regime: Literal["prefill", "decode"] | None = None
    shape: ShapeIn = Field(None, description='"MxNxK" or {M,N,K}')
    stage: Literal["stage1", "stage2"] | None = Field(None, description="MoE stage when known")
    # how the stage was found (its place in the MoE launch sequence), or why it could not be;
    # set by profile ingestion, left out of the tools' input schema
    stage_basis: SkipJsonSchema[str | None] = Field(None, max_length=MAX_NAME_CHARS)
    segment_kernels: list[Name] = Field(default_factory=list, description="other kernels of the same segment")

    @field_validator("segment_kernels")
    @classmethod
    def _few(cls, v: list[str]) -> list[str]:
        if len(v) > MAX_SEGMENT_KERNELS:
            raise ValueError(f"List should have at most {MAX_SEGMENT_KERNELS} items (got {len(v)})")
        return v

    @field_validator("operator", "gen", "dtype", "scale_format")
    @classmethod
    def _short(cls, v: str | None) -> str | None:
        # a vocabulary word, not a name: kept out of the schema, refused when absurd
        if v is not None and len(v) > 200:
            raise ValueError(f"at most 200 characters, got {len(v)}")
        return v
    pct_gpu: float | None = Field(None, ge=0.0, le=100.0, description="share of GPU time, percent")
    label: Name | None = Field(None, description="layer label: provenance only, never a selector")

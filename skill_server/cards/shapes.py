"""Shape metrics and shape-class selection.

Metrics are derived from (M, N, K) and the target generation's facts (compute units
from ``data/vocabulary.yaml``). Shape classes are lists of predicates over these
metrics; the first class (in the card's decision-guide order) whose predicates all
hold is chosen. A shape inside no class gets the nearest one (smallest total log2
distance to the violated bounds) and is marked untuned either way unless it is one of
the class's validated shapes.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

# the one shape parser (standard library only, shared with the verifiers)
from verifiers.shape_text import MAX_SHAPE_DIM, ShapeTextError, parse_shape_text, shape_dims  # noqa: F401

if TYPE_CHECKING:  # pragma: no cover
    from skill_server.cards.schema import Predicate, RecipeRow, ShapeClass

OUT_BYTES = 2  # bf16 output, as every GEMM card here writes
SCALE_BLOCK_K = 128  # K tile of the block-scale promote


MAX_DIM = 2**31 - 1  # GEMM dims index int32 ranges on every backend here


def _bounded_dim(v: int) -> int:
    if v > MAX_DIM:
        raise ValueError(f"a GEMM dimension is at most {MAX_DIM} (int32), got a {len(str(v))}-digit number")
    return v


Dim = Annotated[int, Field(gt=0), AfterValidator(_bounded_dim)]


def _untitled(schema: dict) -> None:
    """Drop the titles pydantic derives from field names and the class docstring: the tools'
    schema is context an agent pays for on every session (docs/mcp.md), and the names and
    the tool's own description say the same."""
    schema.pop("description", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)


class GemmShape(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=_untitled)
    M: Dim
    N: Dim
    K: Dim
    # grouped GEMMs (MoE experts): M counts the rows of all groups; set by profile ingestion,
    # left out of the tools' input schema (agents give M, N, K)
    groups: SkipJsonSchema[Annotated[int, Field(gt=0, le=MAX_DIM)] | None] = None

    def __str__(self) -> str:
        text = f"{self.M}x{self.N}x{self.K}"
        return text if self.groups is None else f"{text} ({self.groups} groups)"


def parse_gemm_shape(value: object) -> GemmShape:
    """A ``hotspot.GemmShape`` from one (returned as is), a dict {M, N, K}, a list [M, N, K] or
    shape text: every front end's GEMM shape goes through here (and so through the one
    parser, ``verifiers.shape_text``)."""
    if isinstance(value, GemmShape):
        return value
    if isinstance(value, dict) and "groups" in value:
        dims = shape_dims({k: v for k, v in value.items() if k != "groups"})
        return GemmShape(**dims, groups=value["groups"])
    return GemmShape(**shape_dims(value))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


MetricFn = Callable[[int, int, int, tuple[int, int], int], float]

# name -> (function(M, N, K, tile, compute_units), description)
METRICS: dict[str, tuple[MetricFn, str]] = {
    "M": (lambda M, N, K, t, cu: M, "rows of A and C"),
    "N": (lambda M, N, K, t, cu: N, "columns of B and C"),
    "K": (lambda M, N, K, t, cu: K, "reduction depth"),
    "c_bytes": (lambda M, N, K, t, cu: M * N * OUT_BYTES, "bytes of the bf16 output C"),
    "c_mib": (lambda M, N, K, t, cu: M * N * OUT_BYTES / 2**20, "MiB of the bf16 output C"),
    "k_tiles": (lambda M, N, K, t, cu: _ceil_div(K, SCALE_BLOCK_K), "128-wide K blocks (one promote each)"),
    "output_tiles": (lambda M, N, K, t, cu: _ceil_div(M, t[0]) * _ceil_div(N, t[1]), "output tiles of the tile"),
    "tiles_per_cu": (lambda M, N, K, t, cu: _ceil_div(M, t[0]) * _ceil_div(N, t[1]) / cu, "output tiles per compute unit"),
    "grid_waves": (lambda M, N, K, t, cu: _ceil_div(_ceil_div(M, t[0]) * _ceil_div(N, t[1]), cu), "full waves of the grid over the CUs"),
    "flops": (lambda M, N, K, t, cu: 2.0 * M * N * K, "2*M*N*K"),
    "arithmetic_intensity": (
        lambda M, N, K, t, cu: 2.0 * M * N * K / (M * K + N * K + M * N * OUT_BYTES),
        "FLOP per byte with fp8 operands read once and C written once",
    ),
}
TILE_METRICS = frozenset({"output_tiles", "tiles_per_cu", "grid_waves"})


def metric_value(name: str, M: int, N: int, K: int, tile: tuple[int, int], compute_units: int) -> float:
    return float(METRICS[name][0](M, N, K, tile, compute_units))


def predicate_holds(pred: "Predicate", value: float) -> bool:
    checks = (
        (pred.lt, lambda b: value < b),
        (pred.le, lambda b: value <= b),
        (pred.gt, lambda b: value > b),
        (pred.ge, lambda b: value >= b),
        (pred.eq, lambda b: value == b),
    )
    if any(bound is not None and not ok(bound) for bound, ok in checks):
        return False
    return pred.multiple_of is None or (value.is_integer() and int(value) % pred.multiple_of == 0)


def predicate_distance(pred: "Predicate", value: float) -> float:
    """How far ``value`` is outside the predicate, in log2 units (0 inside)."""
    if predicate_holds(pred, value):
        return 0.0
    if pred.multiple_of is not None and all(getattr(pred, k) is None for k in ("lt", "le", "gt", "ge", "eq")):
        return 1.0
    bounds = [b for b in (pred.lt, pred.le, pred.gt, pred.ge, pred.eq) if b is not None]
    v = max(abs(value), 1e-9)
    return min(abs(math.log2(v / max(abs(b), 1e-9))) for b in bounds) + 1e-6


class PredicateResult(BaseModel):
    predicate: str
    value: float
    holds: bool


class ShapeSelection(BaseModel):
    """Which recipe row a shape gets, and why."""

    class_id: str
    title: str
    selection: Literal["inside", "nearest"]
    tuned: bool = Field(description="True only for a validated shape of the class")
    validated_shape: str | None = Field(None, description="the validated shape this equals, with its provenance label")
    distance: float = 0.0
    predicates: list[PredicateResult]
    also_satisfies: list[str] = Field(default_factory=list)
    recipe: "RecipeRow"
    advice: str
    caveats: list[str] = Field(default_factory=list)


class ConstraintViolation(BaseModel):
    predicate: str
    value: float
    why: str | None = None


def _evaluate(preds: list["Predicate"], M: int, N: int, K: int, default_tile: tuple[int, int], cu: int) -> list[tuple["Predicate", float]]:
    return [(p, metric_value(p.metric, M, N, K, p.tile or default_tile, cu)) for p in preds]


def check_constraints(preds: list["Predicate"], M: int, N: int, K: int, compute_units: int) -> list[ConstraintViolation]:
    return [
        ConstraintViolation(predicate=p.describe(), value=v, why=p.why)
        for p, v in _evaluate(preds, M, N, K, (128, 128), compute_units)
        if not predicate_holds(p, v)
    ]


def select_shape_class(classes: list["ShapeClass"], M: int, N: int, K: int, compute_units: int) -> ShapeSelection | None:
    if not classes:
        return None
    evaluated = []
    for cls in classes:
        results = _evaluate(cls.when, M, N, K, cls.tile, compute_units)
        distance = sum(predicate_distance(p, v) for p, v in results)
        evaluated.append((cls, results, distance))
    inside = [e for e in evaluated if e[2] == 0.0]
    if inside:
        cls, results, distance = inside[0]
        selection: Literal["inside", "nearest"] = "inside"
    else:
        cls, results, distance = min(evaluated, key=lambda e: e[2])  # ties: decision-guide order
        selection = "nearest"
    validated = next((v for v in cls.validated_shapes if (v.M, v.N, v.K) == (M, N, K)), None)
    tuned = validated is not None
    knobs = ", ".join(cls.recipe.resweep) or "the shape-dependent knobs"
    if tuned:
        advice = f"validated shape: apply the row's config as is ({cls.recipe.core})"
    elif selection == "inside":
        advice = f"untuned shape inside class {cls.id}: start from this row's config, then re-sweep {knobs}"
    else:
        advice = (
            f"untuned shape outside every class; nearest is {cls.id} (log2 distance {distance:.2f}): "
            f"start from its config, re-sweep {knobs}, and confirm the bottleneck by ablation first"
        )
    return ShapeSelection(
        class_id=cls.id,
        title=cls.title,
        selection=selection,
        tuned=tuned,
        validated_shape=(f"{M}x{N}x{K}" + (f" (seen as {validated.label})" if validated and validated.label else "")) if validated else None,
        distance=round(distance, 4),
        predicates=[PredicateResult(predicate=p.describe(), value=round(v, 4), holds=predicate_holds(p, v)) for p, v in results],
        also_satisfies=[e[0].id for e in inside[1:]] if inside else [],
        recipe=cls.recipe,
        advice=advice,
        caveats=list(cls.caveats),
    )


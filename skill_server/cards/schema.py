"""Skill-card schema (pydantic v2) and parsing of ``SKILL.md`` files.

The schema accepts the given cards' front matter exactly as written (every field keeps
its meaning) and extends it only with machine-readable forms of what the prose says:
operand scale formats, hard shape constraints, evidence requirements and when to
abstain, shape classes as declarative predicates naming their recipe row,
prerequisites, the verifier binding and recorded reviews. Predicates are data
(comparisons over named metrics), never evaluated code.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from skill_server.cards.shapes import METRICS, TILE_METRICS, ShapeSelection
from skill_server.cards.vocabulary import vocabulary

Criterion = Literal["gen", "dtype", "scale_format", "regime", "shape", "operator"]


class _Strict(BaseModel):
    # Unknown keys are errors: a typo ('gen' for 'gens') must not silently drop a criterion.
    model_config = ConfigDict(extra="forbid")


def _check_regex(pattern: str, info: ValidationInfo | None = None) -> str:
    # Cards re-read from the catalog cache were compiled when first parsed; skip the
    # (costly) compile for them.
    if info is not None and info.context and info.context.get("trusted"):
        return pattern
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
    return pattern


# --------------------------------------------------------------------------- match
class ProfileSignature(_Strict):
    op_name_regex: str = Field("", description="searched in the kernel/op name; empty: the card matches on operator and evidence")
    min_pct_gpu: float = Field(0.0, ge=0.0, le=100.0)
    # extension: the same problem under the names other tools print (library API names,
    # instance names, torch ops); searched like op_name_regex, in the kernel name and in
    # the name of the op that launched it
    alternatives: list[str] = Field(default_factory=list, description="more op-name regexes for the same problem")

    @field_validator("op_name_regex")
    @classmethod
    def _regex(cls, v: str, info: ValidationInfo) -> str:
        return _check_regex(v, info)

    @field_validator("alternatives")
    @classmethod
    def _regexes(cls, v: list[str], info: ValidationInfo) -> list[str]:
        for pattern in v:
            if not pattern:
                raise ValueError("an alternative signature cannot be empty")
            _check_regex(pattern, info)
        return v

    def patterns(self) -> list[str]:
        """Every regex of the signature, the original first."""
        return [p for p in (self.op_name_regex, *self.alternatives) if p]


class Predicate(_Strict):
    """One comparison over a shape metric. All given comparators must hold."""

    metric: str
    lt: float | None = None
    le: float | None = None
    gt: float | None = None
    ge: float | None = None
    eq: float | None = None
    multiple_of: int | None = Field(None, gt=0)
    tile: tuple[int, int] | None = Field(None, description="(tile_m, tile_n) for tile metrics; default: the class recipe's tile")
    why: str | None = None

    @field_validator("metric")
    @classmethod
    def _known_metric(cls, v: str) -> str:
        if v not in METRICS:
            raise ValueError(f"unknown metric {v!r}; known: {', '.join(sorted(METRICS))}")
        return v

    @model_validator(mode="after")
    def _has_comparator(self, info: ValidationInfo) -> "Predicate":
        if info.context and info.context.get("trusted"):
            return self  # re-read from the parse cache: checked when first parsed
        if all(getattr(self, k) is None for k in ("lt", "le", "gt", "ge", "eq", "multiple_of")):
            raise ValueError("a predicate needs at least one of lt, le, gt, ge, eq, multiple_of")
        if self.tile is not None and self.metric not in TILE_METRICS:
            raise ValueError(f"'tile' only applies to tile metrics {sorted(TILE_METRICS)}")
        return self

    def describe(self) -> str:
        ops = [(k, s) for k, s in (("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="), ("eq", "=="))]
        parts = [f"{self.metric} {s} {_num(getattr(self, k))}" for k, s in ops if getattr(self, k) is not None]
        if self.multiple_of is not None:
            parts.append(f"{self.metric} % {self.multiple_of} == 0")
        text = " and ".join(parts)
        return f"{text} (tile {self.tile[0]}x{self.tile[1]})" if self.tile else text


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


class EvidenceRequirement(_Strict):
    """Evidence a card needs before it may match, e.g. the MoE stage.

    The value comes from the hotspot field ``field`` when stated, else from the names in
    ``infer_from``, in that priority order (the first source that reveals a value
    decides). One inferred value: known. Several from one source: ambiguous. None with
    sources present: ``absent_means``. No sources: missing. Missing or ambiguous evidence
    triggers ``when_missing`` (abstain by default).

    ``exclude_roles`` and ``role`` tie the names to the vocabulary's kernel roles
    (``data/vocabulary.yaml``): a name of an excluded role (e.g. ``collective``: NCCL
    all-reduce) never counts as evidence, however it is spelt; a name of ``role`` that
    no value regex recognises (a top-k reduce under another library's name) makes the
    evidence unknown, so the card abstains and says so instead of ruling itself out.
    """

    id: str
    about: str
    field: Literal["stage"] | None = None
    infer_from: list[Literal["op_name", "launch_op", "segment_kernels"]] = Field(default_factory=list)
    values: dict[str, str] = Field(min_length=1, description="value -> regex that reveals it")
    required: str
    when_missing: Literal["abstain", "fail"] = "abstain"
    absent_means: Literal["fail", "unknown"] = Field(
        "unknown", description="when the segment was shown but no value matched: fail, or treat as unknown"
    )
    role: str | None = Field(None, description="vocabulary kernel role of the names the required value stands for")
    exclude_roles: list[str] = Field(default_factory=list, description="vocabulary kernel roles that never count")

    @field_validator("values")
    @classmethod
    def _regexes(cls, v: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        for pattern in v.values():
            _check_regex(pattern, info)
        return v

    @field_validator("role", "exclude_roles")
    @classmethod
    def _known_roles(cls, v, info: ValidationInfo):
        if v is None or (info.context and info.context.get("trusted")):
            return v

        known = vocabulary().kernel_roles or {}
        for role in [v] if isinstance(v, str) else v:
            if role not in known:
                raise ValueError(f"unknown kernel role {role!r}; data/vocabulary.yaml kernel_roles has {sorted(known)}")
        return v

    @model_validator(mode="after")
    def _required_is_a_value(self) -> "EvidenceRequirement":
        if self.required not in self.values:
            raise ValueError(f"required value {self.required!r} is not one of values {sorted(self.values)}")
        if self.field is None and not self.infer_from:
            raise ValueError("evidence needs a hotspot 'field' or at least one 'infer_from' source")
        return self


class MatchSpec(_Strict):
    operator: list[str] = Field(min_length=1)
    arch_class: list[str] = Field(default_factory=lambda: ["*"])
    gens: list[str] = Field(min_length=1)
    dtypes: list[str] = Field(min_length=1)
    regimes: list[Literal["prefill", "decode"]] = Field(min_length=1)
    from_backend: str | None = None
    to_backend: str | None = None
    profile_signature: ProfileSignature = Field(default_factory=ProfileSignature)
    # extensions -------------------------------------------------------------------
    scale_formats: list[str] | None = Field(None, description="operand scale formats; absent: not constrained")
    shape_constraints: list[Predicate] = Field(default_factory=list, description="hard limits; violated: not applicable")
    evidence: list[EvidenceRequirement] = Field(default_factory=list)
    abstain_when_unknown: list[Criterion] = Field(
        default_factory=lambda: ["gen", "scale_format"],
        description="criteria whose missing evidence makes the matcher abstain rather than match",
    )


# ------------------------------------------------------------------------- expects
class Expects(_Strict):
    isolated_speedup_min: float = Field(gt=0)
    isolated_scope: str | None = None
    parity: Literal["required", "relaxed", "strict"]
    noise_floor: float | None = Field(None, ge=0, lt=1, description="relative; A/B differences under it are noise")


# ---------------------------------------------------------------------- validation
class Measured(_Strict):
    isolated: float | str | None = None
    e2e_pct: float | str | None = None
    parity: str | None = None


_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


class Validation(_Strict):
    status: Literal["validated", "experimental", "draft", "deprecated"]
    last_verified: str
    gpu: str
    model: str | None = None
    measured: Measured = Field(default_factory=Measured)
    measured_detail: dict[str, str | float | int] | None = None
    artifact: str | None = None
    notes: str | None = None

    @field_validator("last_verified", mode="before")
    @classmethod
    def _date_text(cls, v: Any) -> str:
        return v.isoformat() if isinstance(v, date) else v

    @field_validator("last_verified")
    @classmethod
    def _dates_are_real(cls, v: str) -> str:
        for y, m, d in _DATE.findall(v):
            try:
                date(int(y), int(m), int(d))
            except ValueError:
                raise ValueError(f"impossible date {y}-{m}-{d} in {v!r}") from None
        return v

    @model_validator(mode="after")
    def _validated_has_a_date(self) -> "Validation":
        if self.status == "validated" and not _DATE.search(self.last_verified):
            raise ValueError(f"a validated card needs a YYYY-MM-DD date in last_verified; got {self.last_verified!r}")
        return self

    @property
    def latest_date(self) -> date | None:
        dates = [date(int(y), int(m), int(d)) for y, m, d in _DATE.findall(self.last_verified)]
        return max(dates) if dates else None


# ------------------------------------------------------------------- shape classes
class RecipeRow(_Strict):
    core: str
    config: dict[str, int | float | str | bool] = Field(default_factory=dict)
    measured_speedup: str | None = None
    decisive_lever: str
    loses_here: list[str] = Field(default_factory=list)
    bind: str | None = Field(None, description="what limits this class (L2 locality, compute/grid, ...)")
    resweep: list[str] = Field(default_factory=list, description="knobs to re-sweep on an untuned shape")


class ValidatedShape(_Strict):
    M: int = Field(gt=0)
    N: int = Field(gt=0)
    K: int = Field(gt=0)
    label: str | None = Field(None, description="where it was measured; provenance only")
    measured: str | None = None


class ShapeClass(_Strict):
    id: str = Field(pattern=r"^[a-z0-9_]+$")
    title: str
    when: list[Predicate] = Field(min_length=1)
    recipe: RecipeRow
    validated_shapes: list[ValidatedShape] = Field(default_factory=list)
    caveats: list[str] = Field(default_factory=list)

    @property
    def tile(self) -> tuple[int, int]:
        cfg = self.recipe.config
        tm = cfg.get("tile_m", cfg.get("BLOCK_M", 128))
        tn = cfg.get("tile_n", cfg.get("BLOCK_N", 128))
        return int(tm), int(tn)


# ------------------------------------------------------- prerequisites / verifier
class Prerequisite(_Strict):
    kind: Literal["package", "capability"]
    name: str
    version: str | None = Field(None, description="PEP 440 specifier, e.g. '>=0.2.2'")
    about: str | None = None
    fallback: str | None = Field(None, description="what stands in when it is missing")


class ParityBinding(_Strict):
    mode: Literal["strict", "relaxed"]
    rtol: float | None = Field(None, ge=0)
    atol: float | None = Field(None, ge=0)
    max_mismatch: int | None = Field(None, ge=0)
    min_cosine: float | None = Field(None, ge=-1, le=1)
    max_cosine_drop: float | None = Field(None, ge=0)
    max_abs: float | None = Field(None, ge=0)


class ArmSignature(_Strict):
    required: list[str] = Field(default_factory=list)
    forbidden: list[str] = Field(default_factory=list)

    @field_validator("required", "forbidden")
    @classmethod
    def _regexes(cls, v: list[str], info: ValidationInfo) -> list[str]:
        return [_check_regex(p, info) for p in v]


class VerifierBinding(_Strict):
    problem: str = Field(description="kernels/<problem>/problem.py")
    baseline: dict[str, str] = Field(default_factory=dict, description="platform -> baseline arm")
    reference: dict[str, str] = Field(default_factory=dict, description="platform -> reference candidate arm")
    parity: ParityBinding | None = None
    signatures: dict[str, ArmSignature] = Field(default_factory=dict, description="arm -> runtime signature")
    segment_kernels: list[str] = Field(default_factory=list)
    shapes: list[str] = Field(default_factory=list, description="shapes re-verification runs, e.g. 4096x2048x7168")


class Review(_Strict):
    source: str
    verdict: Literal["duplicate_functionality", "approved", "changes_requested", "comment"]
    says: str
    overlaps_with: list[str] = Field(default_factory=list, description="existing functionality or card ids")
    date: str | None = None


# ---------------------------------------------------------------------------- card
class Card(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_]*$")
    title: str
    kind: Literal["expert_skill", "fact_card"]
    authors: list[str] = Field(default_factory=list)
    scope: str
    match: MatchSpec
    expects: Expects
    validation: Validation
    role: str
    supersedes: list[str] = Field(default_factory=list)
    # extensions -------------------------------------------------------------------
    shape_classes: list[ShapeClass] = Field(default_factory=list)
    prerequisites: list[Prerequisite] = Field(default_factory=list)
    verifier: VerifierBinding | None = None
    reviews: list[Review] = Field(default_factory=list)


# ------------------------------------------------------------------------- parsing
class CardProblem(BaseModel):
    """One lint finding, precise enough to act on."""

    file: str
    line: int | None = None
    field: str | None = None
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.line else "")
        fld = f" [{self.field}]" if self.field else ""
        return f"{where}:{fld} {self.severity}: {self.message}"


class CardParseError(Exception):
    def __init__(self, problems: list[CardProblem]):
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


@dataclass
class ParsedCard:
    """A card as loaded from disk: validated front matter plus the markdown body."""

    card: Card
    path: Path
    body: str
    body_start_line: int
    fm_line: int
    fm_text: str = field(repr=False)

    @property
    def folder(self) -> Path:
        return self.path.parent

    @cached_property
    def sections(self) -> dict[str, str]:
        return parse_sections(self.body)

    def line_of(self, *loc: Any) -> int | None:
        """File line of a front-matter field path, e.g. line_of('match', 'gens')."""
        return line_for(yaml_field_lines(self.fm_text, self.fm_line), loc)


def split_front_matter(text: str, file: str) -> tuple[str, int, str, int]:
    """Return (yaml text, first yaml line, body, first body line). Lines are 1-based.

    Text before the opening ``---`` (a title line, as in exported cards) is allowed.
    """
    lines = text.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == "---")
    except StopIteration:
        raise CardParseError([CardProblem(file=file, line=1, message="no YAML front matter: expected a line '---' opening it")]) from None
    if any(ln.strip() for ln in lines[:start]) and start > 3:
        raise CardParseError([CardProblem(file=file, line=1, message="front matter must start within the first lines ('---')")])
    try:
        end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise CardParseError([CardProblem(file=file, line=start + 1, message="front matter is not closed: expected a second '---' line")]) from None
    return "\n".join(lines[start + 1 : end]), start + 2, "\n".join(lines[end + 1 :]), end + 2


def _node_lines(node: yaml.Node, prefix: tuple[Any, ...], offset: int, out: dict[str, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            path = prefix + (key_node.value,)
            out[_path_key(path)] = key_node.start_mark.line + offset
            _node_lines(value_node, path, offset, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            path = prefix + (i,)
            out[_path_key(path)] = item.start_mark.line + offset
            _node_lines(item, path, offset, out)


def _path_key(path: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in path)


def line_for(field_lines: dict[str, int], loc: tuple[Any, ...]) -> int | None:
    """Line of the deepest existing prefix of ``loc``."""
    parts = [p for p in loc]
    while parts:
        key = _path_key(tuple(parts))
        if key in field_lines:
            return field_lines[key]
        parts.pop()
    return None


def parse_sections(body: str) -> dict[str, str]:
    """Split the markdown body on ``## `` headings: {heading: text}."""
    sections: dict[str, str] = {}
    current: str | None = None
    buf: list[str] = []
    for line in body.splitlines():
        m = re.match(r"^##\s+(.+?)\s*$", line)
        if m and not line.startswith("###"):
            if current is not None:
                sections[current] = "\n".join(buf).strip()
            current, buf = m.group(1), []
        elif current is not None:
            buf.append(line)
    if current is not None:
        sections[current] = "\n".join(buf).strip()
    return sections


_BaseSafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: str, line: int):
        self.key, self.line = key, line


class _Loader(_BaseSafeLoader):  # type: ignore[misc,valid-type]
    """Safe loader (libyaml when present) that refuses duplicate keys: plain
    safe_load keeps only the last value silently, which would drop data."""

    def construct_mapping(self, node, deep=False):  # noqa: ANN001
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = key_node.value
            if key in seen:
                raise _DuplicateKey(str(key), key_node.start_mark.line)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """Parse YAML safely (no object construction), refusing duplicate keys."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader


def yaml_field_lines(text: str, offset: int) -> dict[str, int]:
    """Map dotted field paths to 1-based file lines (only computed when reporting)."""
    lines: dict[str, int] = {}
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if root is not None:
        _node_lines(root, (), offset, lines)
    return lines


def parse_card_text(text: str, file: str) -> ParsedCard:
    """Parse and validate one SKILL.md. Raises CardParseError with located problems."""
    fm_text, fm_line, body, body_line = split_front_matter(text, file)
    try:
        data = load_yaml(fm_text)
    except _DuplicateKey as exc:
        raise CardParseError([CardProblem(file=file, line=exc.line + fm_line, field=exc.key,
                                          message="duplicate key: YAML would keep only the last value")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + fm_line if mark is not None else fm_line
        problem = getattr(exc, "problem", None) or str(exc)
        raise CardParseError([CardProblem(file=file, line=line, message=f"malformed YAML: {problem}")]) from None
    if not isinstance(data, dict):
        raise CardParseError([CardProblem(file=file, line=fm_line, message="front matter must be a YAML mapping of fields")])
    try:
        card = Card.model_validate(data)
    except ValidationError as exc:
        field_lines = yaml_field_lines(fm_text, fm_line)
        raise CardParseError([_problem_from_error(err, file, field_lines) for err in exc.errors()]) from None
    return ParsedCard(
        card=card,
        path=Path(file),
        body=body,
        body_start_line=body_line,
        fm_line=fm_line,
        fm_text=fm_text,
    )


def _problem_from_error(err: dict[str, Any], file: str, field_lines: dict[str, int]) -> CardProblem:
    loc = tuple(err.get("loc", ()))
    field = ".".join(str(p) for p in loc) or None
    kind = err.get("type", "")
    msg = err.get("msg", "invalid")
    if kind == "missing":
        msg = "required field is missing"
    elif kind == "extra_forbidden":
        msg = "unknown field (not part of the card schema; check the spelling)"
    elif kind.startswith("literal_error"):
        msg = f"{msg}; got {err.get('input')!r}"
    elif kind in {"int_type", "float_type", "string_type", "list_type", "dict_type", "bool_type"} or kind.endswith("_parsing"):
        msg = f"{msg}; got {err.get('input')!r}"
    return CardProblem(file=file, line=line_for(field_lines, loc), field=field, message=msg)


def parse_card_file(path: Path) -> ParsedCard:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CardParseError([CardProblem(file=str(path), message=f"cannot read card: {exc}")]) from None
    return parse_card_text(text, str(path))


# ShapeSelection (shapes.py) carries a RecipeRow; resolve that forward reference here,
# where both are defined, so shapes.py need not import this module.
ShapeSelection.model_rebuild(_types_namespace={"RecipeRow": RecipeRow})

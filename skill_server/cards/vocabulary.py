"""Normalisation of generations, dtypes, scale formats and operator classes.

The facts live in ``data/vocabulary.yaml`` (one place); this module only reads them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from skill_server.cards.name_dtypes import Convention, ConventionError, NameDtypes, compile_conventions, read_name

VOCABULARY_FILE = Path(__file__).resolve().parents[1] / "data" / "vocabulary.yaml"


class VocabularyError(ValueError):
    """An input names a generation, dtype or scale format nobody knows."""


@dataclass(frozen=True)
class GenerationInfo:
    name: str
    vendor: str
    compute_units: int
    xcds: int
    lds_bytes_per_cu: int
    llc_bytes: int
    fp8_flavor: str
    vgprs_per_simd: int | None = None


def _key(text: str) -> str:
    return re.sub(r"[\s_\-]", "", text).lower()


@dataclass(frozen=True)
class RegimeThresholds:
    decode_max: int
    prefill_min: int

    def regime_of(self, m: int) -> str | None:
        if m <= self.decode_max:
            return "decode"
        if m >= self.prefill_min:
            return "prefill"
        return None


@dataclass(frozen=True)
class Vocabulary:
    generations: dict[str, GenerationInfo]
    gen_aliases: dict[str, str]
    dtype_aliases: dict[str, str]
    dtype_implies: dict[str, tuple[str, str]]
    scale_aliases: dict[str, str]
    scale_hints: dict[str, re.Pattern[str]]
    dtype_hints: dict[str, re.Pattern[str]]
    operators: dict[str, re.Pattern[str]]
    gen_noise: re.Pattern[str] | None = None
    dtype_prefixes: tuple[str, ...] = ()
    kernel_roles: dict[str, re.Pattern[str]] | None = None
    moe_stage_names: dict[str, re.Pattern[str]] | None = None
    regimes: RegimeThresholds | None = None
    dtype_conventions: tuple[Convention, ...] = ()

    # -- normalisation -------------------------------------------------------------
    def _gen_lookup(self, text: str) -> str | None:
        """gfx950:sramecc+:xnack- (torch's gcnArchName) and AMD Instinct MI355X (a product
        name) resolve like gfx950 and MI355X."""
        found = self.gen_aliases.get(_key(text))
        if found is None and isinstance(text, str):
            base = text.split(":", 1)[0]
            if self.gen_noise is not None:
                base = self.gen_noise.sub(" ", base)
            found = self.gen_aliases.get(_key(base)) if base.strip() else None
        return found

    def generation(self, text: str) -> str:
        found = self._gen_lookup(text)
        if found is None:
            raise VocabularyError(
                f"unknown GPU generation {str(text)[:80]!r}; known: {', '.join(sorted(self.generations))} "
                f"(aliases such as MI355X -> gfx950, H200 -> sm_90 are accepted)"
            )
        return found

    def generation_info(self, text: str) -> GenerationInfo:
        return self.generations[self.generation(text)]

    def _dtype_key(self, text: str) -> str:
        lowered = text.strip()
        for prefix in self.dtype_prefixes:
            if lowered.lower().startswith(prefix.lower()):
                lowered = lowered[len(prefix):]
                break
        return _key(lowered)

    def dtype(self, text: str) -> str:
        key = self._dtype_key(text)
        if key in self.dtype_implies:
            return self.dtype_implies[key][0]
        found = self.dtype_aliases.get(key)
        if found is None:
            raise VocabularyError(
                f"unknown dtype {str(text)[:80]!r}; known: {', '.join(sorted(set(self.dtype_aliases.values())))}"
            )
        return found

    def scale_format_implied_by_dtype(self, text: str) -> str | None:
        implied = self.dtype_implies.get(self._dtype_key(text))
        return implied[1] if implied else None

    def scale_format(self, text: str) -> str:
        found = self.scale_aliases.get(_key(text))
        if found is None:
            raise VocabularyError(
                f"unknown scale format {str(text)[:80]!r}; known: {', '.join(sorted(set(self.scale_aliases.values())))}"
            )
        return found

    def is_known_dtype(self, text: str) -> bool:
        key = self._dtype_key(text)
        return key in self.dtype_aliases or key in self.dtype_implies

    def is_known_generation(self, text: str) -> bool:
        return self._gen_lookup(text) is not None

    def is_known_scale_format(self, text: str) -> bool:
        return _key(text) in self.scale_aliases

    # -- inference from names -----------------------------------------------------
    def operators_in(self, name: str) -> list[str]:
        return [op for op, rx in self.operators.items() if rx.search(name)]

    def scale_format_in(self, name: str) -> str | None:
        hits = [fmt for fmt, rx in self.scale_hints.items() if rx.search(name)]
        return hits[0] if len(hits) == 1 else None

    def dtypes_in(self, name: str) -> NameDtypes | None:
        """The operand (and output) dtypes a name states: by its library's naming convention
        (``dtype_name_conventions``: CK's ``_f8_f8_bf16`` is A fp8, B fp8, output bf16), else
        the one dtype word it contains (``dtype_name_hints``)."""
        return read_name(self.dtype_conventions, self.dtype_hints, name)

    def dtype_in(self, name: str) -> str | None:
        """The operand dtype a name states, when A and B agree."""
        found = self.dtypes_in(name)
        return found.operands[0] if found is not None and len(found.operands) == 1 else None

    def kernel_role(self, *names: str | None) -> str | None:
        """The MoE-layer role of a kernel (``kernel_roles``): the first role, in the
        vocabulary's order, that fits any of the names."""
        for role, rx in (self.kernel_roles or {}).items():
            if any(n and rx.search(n) for n in names):
                return role
        return None

    def moe_stage_in(self, *names: str | None) -> str | None:
        """The stage a MoE GEMM's names state outright, when exactly one does."""
        hits = {stage for stage, rx in (self.moe_stage_names or {}).items() if any(n and rx.search(n) for n in names)}
        return hits.pop() if len(hits) == 1 else None

    def moe_stages_named(self, *names: str | None) -> set[str]:
        """Every stage any of the names states (none: a name both stages share)."""
        return {stage for stage, rx in (self.moe_stage_names or {}).items() if any(n and rx.search(n) for n in names)}

    def known_operators(self) -> list[str]:
        return sorted(self.operators)


def _compile(pattern: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise VocabularyError(f"{VOCABULARY_FILE}: {where}: invalid regex {pattern!r}: {exc}") from None


def _alias_table(section: dict[str, list[str]]) -> dict[str, str]:
    table: dict[str, str] = {}
    for canonical, aliases in section.items():
        for alias in [canonical, *(aliases or [])]:
            table[_key(str(alias))] = canonical
    return table


@lru_cache(maxsize=1)
def vocabulary() -> Vocabulary:
    # libyaml when present: ~15x faster than the pure-Python loader, on the first request's path
    raw = yaml.load(VOCABULARY_FILE.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
    generations = {
        name: GenerationInfo(
            name=name,
            vendor=spec["vendor"],
            compute_units=int(spec["compute_units"]),
            xcds=int(spec["xcds"]),
            lds_bytes_per_cu=int(spec["lds_bytes_per_cu"]),
            llc_bytes=int(spec["llc_bytes"]),
            fp8_flavor=spec["fp8_flavor"],
            vgprs_per_simd=spec.get("vgprs_per_simd"),
        )
        for name, spec in raw["generations"].items()
    }
    gen_aliases = _alias_table({n: s.get("aliases", []) for n, s in raw["generations"].items()})
    implies = {
        _key(k): (v[0], v[1]) for k, v in (raw.get("dtype_implies_scale_format") or {}).items()
    }
    return Vocabulary(
        generations=generations,
        gen_aliases=gen_aliases,
        dtype_aliases=_alias_table(raw["dtypes"]),
        dtype_implies=implies,
        scale_aliases=_alias_table(raw["scale_formats"]),
        scale_hints={k: _compile(v, f"scale_format_name_hints.{k}") for k, v in raw["scale_format_name_hints"].items()},
        dtype_hints={k: _compile(v, f"dtype_name_hints.{k}") for k, v in raw["dtype_name_hints"].items()},
        operators={k: _compile(v, f"operators.{k}") for k, v in raw["operators"].items()},
        gen_noise=_compile(r"\b(?:" + "|".join(raw.get("generation_name_noise") or ["(?!)"]) + r")\b",
                           "generation_name_noise"),
        dtype_prefixes=tuple(raw.get("dtype_prefixes") or ()),
        kernel_roles={k: _compile(v, f"kernel_roles.{k}") for k, v in (raw.get("kernel_roles") or {}).items()},
        moe_stage_names={k: _compile(v, f"moe_stage_names.{k}") for k, v in (raw.get("moe_stage_names") or {}).items()},
        regimes=RegimeThresholds(**raw["regime_from_m"]) if raw.get("regime_from_m") else None,
        dtype_conventions=_conventions(raw.get("dtype_name_conventions")),
    )


def _conventions(raw) -> tuple[Convention, ...]:
    try:
        return compile_conventions(raw, "dtype_name_conventions")
    except ConventionError as exc:
        raise VocabularyError(f"{VOCABULARY_FILE}: {exc}") from None

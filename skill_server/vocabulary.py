"""Normalisation of generations, dtypes, scale formats and operator classes.

The facts live in ``data/vocabulary.yaml`` (one place); this module only reads them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

VOCABULARY_FILE = Path(__file__).with_name("data") / "vocabulary.yaml"


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
class Vocabulary:
    generations: dict[str, GenerationInfo]
    gen_aliases: dict[str, str]
    dtype_aliases: dict[str, str]
    dtype_implies: dict[str, tuple[str, str]]
    scale_aliases: dict[str, str]
    scale_hints: dict[str, re.Pattern[str]]
    dtype_hints: dict[str, re.Pattern[str]]
    operators: dict[str, re.Pattern[str]]

    # -- normalisation -------------------------------------------------------------
    def generation(self, text: str) -> str:
        found = self.gen_aliases.get(_key(text))
        if found is None:
            raise VocabularyError(
                f"unknown GPU generation {text!r}; known: {', '.join(sorted(self.generations))} "
                f"(aliases such as MI355X -> gfx950, H200 -> sm_90 are accepted)"
            )
        return found

    def generation_info(self, text: str) -> GenerationInfo:
        return self.generations[self.generation(text)]

    def dtype(self, text: str) -> str:
        key = _key(text)
        if key in self.dtype_implies:
            return self.dtype_implies[key][0]
        found = self.dtype_aliases.get(key)
        if found is None:
            raise VocabularyError(
                f"unknown dtype {text!r}; known: {', '.join(sorted(set(self.dtype_aliases.values())))}"
            )
        return found

    def scale_format_implied_by_dtype(self, text: str) -> str | None:
        implied = self.dtype_implies.get(_key(text))
        return implied[1] if implied else None

    def scale_format(self, text: str) -> str:
        found = self.scale_aliases.get(_key(text))
        if found is None:
            raise VocabularyError(
                f"unknown scale format {text!r}; known: {', '.join(sorted(set(self.scale_aliases.values())))}"
            )
        return found

    def is_known_dtype(self, text: str) -> bool:
        return _key(text) in self.dtype_aliases or _key(text) in self.dtype_implies

    def is_known_generation(self, text: str) -> bool:
        return _key(text) in self.gen_aliases

    def is_known_scale_format(self, text: str) -> bool:
        return _key(text) in self.scale_aliases

    # -- inference from names -----------------------------------------------------
    def operators_in(self, name: str) -> list[str]:
        return [op for op, rx in self.operators.items() if rx.search(name)]

    def scale_format_in(self, name: str) -> str | None:
        hits = [fmt for fmt, rx in self.scale_hints.items() if rx.search(name)]
        return hits[0] if len(hits) == 1 else None

    def dtype_in(self, name: str) -> str | None:
        hits = [dt for dt, rx in self.dtype_hints.items() if rx.search(name)]
        return hits[0] if len(hits) == 1 else None


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
    )

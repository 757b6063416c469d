"""Operand and output dtypes read from a kernel name by its library's naming convention.

Many libraries spell the A, B and output dtypes in a fixed order (CK's ``..._f8_f8_bf16``,
hipBLASLt's ``Cijk_..._F8BS_...``, cuBLASLt's ``nvjet_sm90_qqtst_...``, CUTLASS's
``gemm_e4m3_e4m3_f32_void_bf16``): the position says which dtype belongs to the operands and
which to the output. The conventions are data (``dtype_name_conventions`` in
``data/vocabulary.yaml``); this module compiles and applies them. A name no convention
fits falls back to the plain dtype hints (any dtype word; exactly one must fit).

No imports from the rest of the server (the vocabulary imports this module).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_GROUP = re.compile(r"^(a|b|ab|out)\d*$")


class ConventionError(ValueError):
    """A malformed ``dtype_name_conventions`` entry."""


@dataclass(frozen=True)
class NameDtypes:
    """What a name says about dtypes: the operands' (A then B, duplicates dropped), the
    output's when the convention places one, and how it was read."""

    operands: tuple[str, ...]
    output: str | None = None
    convention: str | None = None  # the convention's ``about``; None for a plain hint
    fragment: str = ""  # the part of the name that was read

    def describe(self, verdict: str = "") -> str:
        """``operand dtype fp8_e4m3 (A and B) <verdict>, read from 'f8_f8_bf16' by <convention>;
        bf16 is the output dtype``."""
        ops = " and ".join(self.operands)
        verdict = f" {verdict}" if verdict else ""
        if self.convention is None:
            return f"operand dtype {ops}{verdict} (the one dtype word in the name)"
        head = f"operand dtype {ops} (A and B)" if len(self.operands) == 1 else \
            f"operand dtypes {ops} (A, B){':' if verdict else ''}"
        out = f"; {self.output} is the output dtype, not an operand's" if self.output else ""
        return f"{head}{verdict}, read from {self.fragment!r} by {self.convention}{out}"


@dataclass(frozen=True)
class Convention:
    name: str
    about: str
    regex: re.Pattern[str]
    tokens: dict[str, tuple[str, ...]]  # lower-cased spelling -> dtypes (two for a combined A-B token)

    def read(self, name: str) -> NameDtypes | None:
        m = self.regex.search(name)
        if m is None:
            return None
        got: dict[str, str] = {}
        for group, text in m.groupdict().items():
            if text is not None:
                got.setdefault(_GROUP.match(group).group(1), text)  # type: ignore[union-attr]
        a, b = got.get("a"), got.get("b")
        if a is not None:
            operands = [*self._dtypes(a)[:1], *self._dtypes(b if b is not None else a)[:1]]
        elif "ab" in got:
            both = self._dtypes(got["ab"])
            operands = [both[0], both[-1]]
        else:
            return None
        out = self._dtypes(got["out"])[0] if "out" in got else None
        start = m.start()
        if m.end() - start > 48:  # a long match (a CK symbol's template list): from the first dtype on
            start = min(m.start(g) for g, text in m.groupdict().items() if text is not None)
        return NameDtypes(operands=tuple(dict.fromkeys(operands)), output=out, convention=self.about,
                          fragment=name[start:m.end()].strip("_, "))

    def _dtypes(self, token: str) -> tuple[str, ...]:
        return self.tokens[token.lower()]


def compile_conventions(raw: dict[str, Any] | None, where: str) -> tuple[Convention, ...]:
    """The conventions of ``dtype_name_conventions`` in file order; ``{T}`` in a pattern
    becomes an alternation of the convention's tokens, longest first."""
    out = []
    for name, spec in (raw or {}).items():
        try:
            tokens = {str(k).lower(): tuple(v) if isinstance(v, list) else (str(v),) for k, v in spec["tokens"].items()}
            if any(len(v) not in (1, 2) for v in tokens.values()):
                raise ConventionError("a token names one dtype, or two (A, B) for a combined token")
            alternation = "(?:" + "|".join(re.escape(t) for t in sorted(spec["tokens"], key=lambda t: (-len(str(t)), str(t)))) + ")"
            pattern = spec["pattern"].replace("{T}", alternation)
            regex = re.compile(pattern, re.IGNORECASE)
            unknown = [g for g in regex.groupindex if not _GROUP.match(g)]
            if unknown:
                raise ConventionError(f"unknown group(s) {unknown}; use a, b, ab, out (a digit suffix for alternatives)")
            out.append(Convention(name=name, about=str(spec.get("about") or name), regex=regex, tokens=tokens))
        except ConventionError as exc:
            raise ConventionError(f"{where}.{name}: {exc}") from None
        except (KeyError, TypeError, AttributeError, re.error) as exc:
            raise ConventionError(f"{where}.{name}: needs pattern and tokens ({type(exc).__name__}: {exc})") from None
    return tuple(out)


def read_name(conventions: tuple[Convention, ...], hints: dict[str, re.Pattern[str]], name: str) -> NameDtypes | None:
    """The first convention that fits ``name``; else the one dtype hint that fits, if exactly one does."""
    for convention in conventions:
        found = convention.read(name)
        if found is not None:
            return found
    hits = [dt for dt, rx in hints.items() if rx.search(name)]
    return NameDtypes(operands=(hits[0],)) if len(hits) == 1 else None

"""The one shape parser of the project: every front end (CLI ``match``/``show``/``verify``,
the MCP tools, the ledger, the verifiers) reads shape text through ``parse_shape_text``.

Spellings accepted, the same everywhere:

- positional: ``4096x2048x7168`` (``x``, ``X``, ``×`` or ``*`` between the values, or
  commas / spaces; ``(4096, 2048, 7168)`` too), one value per dimension in order (M, N, K
  unless the problem says otherwise);
- named: ``M=4096,N=2048,K=7168`` (``,``, ``;`` or spaces between the pairs, spaces around
  ``=`` allowed).

Every value is a positive decimal integer (ASCII digits) up to ``MAX_SHAPE_DIM``. Anything
else (an empty value such as the trailing ``x`` of ``4096x2048x7168x``, a sign, a fraction,
a unit) is refused with a one-line ``ShapeTextError`` naming the expected form.
Standard library only: the verifiers import it, and they never import the server.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

MAX_SHAPE_DIM = 2**31 - 1  # GEMM dims index int32 ranges on every backend here
GEMM_DIMS = ("M", "N", "K")

_POSITIONAL_SEP = re.compile(r"\s*[xX×*,]\s*|\s+")
_PAIR_SEP = re.compile(r"\s*[,;]\s*|\s+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")
_DIGITS = re.compile(r"[0-9]+")
_AROUND_EQUALS = re.compile(r"\s*=\s*")


class ShapeTextError(ValueError):
    """Shape text that is not one of the accepted spellings."""


def expected_form(dim_names: Sequence[str] = GEMM_DIMS) -> str:
    """``expected MxNxK, e.g. 4096x2048x7168 or M=4096,N=2048,K=7168`` for these dimensions."""
    example = {"M": "4096", "N": "2048", "K": "7168"}
    names = list(dim_names)
    sample = "x".join(example.get(n, "8") for n in names)
    pairs = ",".join(f"{n}={example.get(n, '8')}" for n in names)
    return f"expected {'x'.join(names)}, e.g. {sample} or {pairs}"


def parse_shape_text(text: object, dim_names: Sequence[str] | None = None) -> dict[str, int]:
    """``{name: value}`` from shape text. ``dim_names``: the dimensions the caller needs, in
    positional order (default M, N, K); named pairs must then name exactly these. With
    ``dim_names=None`` named pairs may use any names (the ledger keeps a problem's own)."""
    names = tuple(dim_names) if dim_names is not None else GEMM_DIMS
    if not isinstance(text, str):
        raise ShapeTextError(f"shape of type {type(text).__name__}: {expected_form(names)}")
    body = text.strip()
    shown = body[:80]
    if len(body) > 1 and (body[0], body[-1]) in (("(", ")"), ("[", "]")):  # (4096, 2048, 7168)
        body = body[1:-1].strip()
    body = _AROUND_EQUALS.sub("=", body)  # M = 4096
    if not body:
        raise ShapeTextError(f"shape is empty: {expected_form(names)}")
    if "=" in body:
        dims = _named(body, shown, names)
        if dim_names is not None:
            unknown = [k for k in dims if k not in names]
            missing = [n for n in names if n not in dims]
            if unknown or missing:
                what = f"unknown dimension {', '.join(unknown)}" if unknown else f"missing {', '.join(missing)}"
                raise ShapeTextError(f"shape {shown!r}: {what}; {expected_form(names)}")
        return dims
    parts = _POSITIONAL_SEP.split(body)
    if len(parts) != len(names) or any(not p for p in parts):
        why = "stray separator" if any(not p for p in parts) else \
            f"{len(parts)} value{'s' if len(parts) != 1 else ''} (expected {len(names)} values)"
        raise ShapeTextError(f"shape {shown!r}: {why}; {expected_form(names)}")
    return {n: _value(p, n, shown, names) for n, p in zip(names, parts)}


def _named(body: str, shown: str, names: tuple[str, ...]) -> dict[str, int]:
    dims: dict[str, int] = {}
    for part in _PAIR_SEP.split(body):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not _NAME.fullmatch(key):
            raise ShapeTextError(f"shape {shown!r}: {part[:40]!r} is not a name=value pair; {expected_form(names)}")
        if key in dims:
            raise ShapeTextError(f"shape {shown!r}: {key} given twice; {expected_form(names)}")
        dims[key] = _value(value, key, shown, names)
    return dims


def _value(value: str, name: str, shown: str, names: tuple[str, ...]) -> int:
    text = value.strip()
    if not _DIGITS.fullmatch(text):
        raise ShapeTextError(f"shape {shown!r}: {name}={text[:20]!r} is not a positive integer; {expected_form(names)}")
    if len(text) > 12 or not 0 < int(text) <= MAX_SHAPE_DIM:
        raise ShapeTextError(f"shape {shown!r}: {name}={text[:20]} is out of range (1 to {MAX_SHAPE_DIM})")
    return int(text)


def shape_dims(value: object, dim_names: Sequence[str] = GEMM_DIMS) -> dict[str, int]:
    """Shape text, a ``{name: value}`` mapping or a list of values (in ``dim_names`` order):
    the same dimensions whichever spelling a front end received. Values in a mapping or list
    must be positive integers (no bools, no floats)."""
    names = tuple(dim_names)
    if isinstance(value, str):
        return parse_shape_text(value, names)
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        if len(value) != len(names):
            raise ShapeTextError(f"shape {list(value)[:8]!r}: {len(value)} values; {expected_form(names)}")
        items = list(zip(names, value))
    else:
        raise ShapeTextError(f"shape of type {type(value).__name__}: {expected_form(names)}")
    unknown = [str(k)[:20] for k, _ in items if k not in names]
    missing = [n for n in names if n not in dict(items)]
    if unknown or missing:
        what = f"unknown dimension {', '.join(unknown)}" if unknown else f"missing {', '.join(missing)}"
        raise ShapeTextError(f"shape: {what}; {expected_form(names)}")
    out: dict[str, int] = {}
    for k, v in items:
        if isinstance(v, str):
            out[k] = _value(v, k, f"{k}={v}"[:80], names)
        elif isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_SHAPE_DIM:
            out[k] = v
        else:
            raise ShapeTextError(f"shape: {k}={str(v)[:20]!r} is not a positive integer up to {MAX_SHAPE_DIM}")
    return out

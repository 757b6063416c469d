"""Typed operands of a decoded instruction (what the disassembler's text means).

Register files (per wave): SGPRs s0..s101 plus the named ones at their hardware
indices (flat_scratch 102:103, xnack_mask 104:105, vcc 106:107, ttmp 108:123,
m0 124, exec 126:127); VGPRs v0..v255 and AccVGPRs a0..a255 (stored after the VGPRs).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

SGPR_FILE = 128
VGPR_FILE = 512  # v0..v255, then a0..a255
AGPR_BASE = 256

NAMED_SGPRS = {
    "flat_scratch_lo": (102, 1), "flat_scratch_hi": (103, 1), "flat_scratch": (102, 2),
    "xnack_mask_lo": (104, 1), "xnack_mask_hi": (105, 1), "xnack_mask": (104, 2),
    "vcc_lo": (106, 1), "vcc_hi": (107, 1), "vcc": (106, 2),
    "m0": (124, 1),
    "exec_lo": (126, 1), "exec_hi": (127, 1), "exec": (126, 2),
}
M0, VCC, EXEC = 124, 106, 126

#: inline float constants (the printed value -> f32 / f16 / f64 bit patterns come from the value)
INLINE_FLOATS = {"0.5", "-0.5", "1.0", "-1.0", "2.0", "-2.0", "4.0", "-4.0", "0.15915494"}
INV_2PI = {"f32": 0x3E22F983, "f16": 0x3118, "f64": 0x3FC45F306DC9C882}


@dataclass(frozen=True)
class Reg:
    """A register range: file 's' (SGPR index space above) or 'v' (VGPR+AGPR file)."""

    file: str  # 's' | 'v'
    index: int
    count: int
    neg: bool = False
    abs: bool = False
    text: str = ""


@dataclass(frozen=True)
class Const:
    """An inline constant or a 32-bit literal. ``kind``: 'int' (value is an integer,
    possibly negative) or 'float' (``text`` is one of the inline float spellings)."""

    kind: str
    value: int | float
    text: str
    literal: bool = False
    neg: bool = False
    abs: bool = False


@dataclass(frozen=True)
class Special:
    """Operands that are not registers or constants: ``off``, ``scc``, ``src_*``."""

    name: str


Operand = Reg | Const | Special

_REG = re.compile(r"^([sva])(?:\[(\d+)(?::(\d+))?\]|(\d+))$")
_TTMP = re.compile(r"^ttmp(?:\[(\d+)(?::(\d+))?\]|(\d+))$")


def parse_operand(tok: str) -> Operand:
    neg = absolute = False
    t = tok.strip()
    if t.startswith("-") and not re.fullmatch(r"-(\d+|0x[0-9a-fA-F]+|\d+\.\d+)", t):
        neg, t = True, t[1:]
    if t.startswith("|") and t.endswith("|"):
        absolute, t = True, t[1:-1]
    if t.startswith("neg(") and t.endswith(")"):
        neg, t = True, t[4:-1]
    if t.startswith("abs(") and t.endswith(")"):
        absolute, t = True, t[4:-1]
    m = _REG.match(t)
    if m:
        kind, lo, hi, single = m.groups()
        first = int(single if single is not None else lo)
        last = int(hi) if hi is not None else first
        base = AGPR_BASE if kind == "a" else 0
        return Reg("s" if kind == "s" else "v", base + first, last - first + 1, neg, absolute, tok)
    m = _TTMP.match(t)
    if m:
        lo, hi, single = m.groups()
        first = int(single if single is not None else lo)
        last = int(hi) if hi is not None else first
        return Reg("s", 108 + first, last - first + 1, neg, absolute, tok)
    if t in NAMED_SGPRS:
        idx, cnt = NAMED_SGPRS[t]
        return Reg("s", idx, cnt, neg, absolute, tok)
    if t in INLINE_FLOATS or t in ("-" + f for f in INLINE_FLOATS):
        return Const("float", float(t), t, False, neg, absolute)
    if re.fullmatch(r"-?0x[0-9a-fA-F]+", t):
        v = int(t, 16)
        return Const("int", v, t, literal=not (-16 <= v <= 64), neg=neg, abs=absolute)
    if re.fullmatch(r"-?\d+", t):
        v = int(t)
        return Const("int", v, t, literal=not (-16 <= v <= 64), neg=neg, abs=absolute)
    return Special(t)

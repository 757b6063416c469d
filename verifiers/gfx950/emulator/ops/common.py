"""Helpers shared by the VALU families: operand fetch, result write, poison, modifiers."""
from __future__ import annotations

import numpy as np

from verifiers.gfx950.emulator.operands import Reg
from verifiers.gfx950.emulator.state import LANES, POISON

U32 = np.uint32
CLEAN = np.zeros(LANES, dtype=np.uint8)


def srcs(w, ins, types: tuple[str, ...], first: int = 1):  # noqa: ANN001
    """Read operands ``first..`` with the given types ('b32','f32','b64','f64',...).
    Returns (list of values, combined poison [64] uint8)."""
    vals = []
    poison = None
    for k, t in enumerate(types):
        dwords = 2 if t in ("b64", "f64", "u64", "i64") else 1
        v, p = w.vread(ins.operands[first + k], ins, t, dwords)
        vals.append(v[0] if dwords == 1 else v)
        poison = p if poison is None else (poison | p)
    return vals, (CLEAN if poison is None else poison)


def full_poison(p: np.ndarray) -> np.ndarray:
    """Any poisoned byte of any input poisons the whole result dword."""
    return np.where(p != 0, POISON, np.uint8(0))


def write(w, ins, values: np.ndarray, poison: np.ndarray, dst: int = 0) -> None:  # noqa: ANN001
    w.vwrite(ins.operands[dst], values, full_poison(poison))


def f32(v: np.ndarray) -> np.ndarray:
    return v.view(np.float32)


def bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)


def output_mods(ins, x: np.ndarray) -> np.ndarray:  # noqa: ANN001
    """VOP3 output modifiers on an f32 result: omod (mul:2, mul:4, div:2) then clamp to [0, 1]."""
    m = ins.modifiers
    if "mul" in m:
        x = x * np.float32(m["mul"])
    if "div" in m:
        x = x / np.float32(m["div"])
    if m.get("clamp"):
        x = np.where(np.isnan(x), np.float32(0), np.clip(x, np.float32(0), np.float32(1)))
    return x.astype(np.float32)


def mask_sgpr_pair(w, op) -> int:  # noqa: ANN001
    """64-bit lane mask from an SGPR pair operand (vcc or s[n:n+1])."""
    if isinstance(op, Reg) and op.file == "s":
        return w.s[op.index] | (w.s[op.index + 1] << 32)
    raise ValueError(f"expected an SGPR pair, got {op}")


def lanes_to_bits(b: np.ndarray) -> int:
    return int(np.packbits(b.astype(np.uint8), bitorder="little").view(np.uint64)[0])


def write_mask(w, op, lanes: np.ndarray, poisoned: bool) -> None:  # noqa: ANN001
    """Write a per-lane condition into an SGPR pair: active lanes get the result, inactive 0."""
    w.swrite(op, lanes_to_bits(lanes & w.exec), poisoned, wide=True)


#: name -> (source types, numpy function, is_float): the ALU ops SDWA and DPP forms can wrap
PURE: dict[str, tuple[tuple[str, ...], object, bool]] = {}

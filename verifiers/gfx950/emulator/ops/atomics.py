"""Global and buffer atomics on 32-bit words: integer add/sub/min/max/and/or/xor/inc/dec,
swap, cmpswap and f32 add, with and without the pre-op value returned.

Forms (gfx950 syntax): ``global_atomic_OP [vdst,] vaddr, vdata, saddr|off`` and
``buffer_atomic_OP vdata, vaddr, srsrc, soffset``; ``sc0`` (GLC) asks for the old value,
which lands in vdst (global) or vdata's first register (buffer) at ``s_waitcnt vmcnt``
like a load. ``cmpswap``'s data is a pair: [new value, compare value].

Lanes of one instruction update memory one after another in lane order; when several
lanes hit the same word each sees its predecessors' result. The hardware's order among
colliding lanes (and among waves) is unspecified, so an f32 add sums in an order a GPU
may also use: results agree with any other order to f32 rounding, integer ones exactly.
Out-of-range buffer lanes do nothing and return 0. 64-bit (``_x2``), f64 and packed
f16/bf16 atomics are not implemented: the run stops naming them.
"""
from __future__ import annotations

import re

import numpy as np

from verifiers.gfx950.emulator.operands import Special
from verifiers.gfx950.emulator.ops.registry import op
from verifiers.gfx950.emulator.ops.vmem import _buffer_addresses, _global_addresses, _issue_load, _what
from verifiers.gfx950.emulator.state import LANES, Pending

U32 = np.uint32
_NAME = re.compile(r"^(global|buffer)_atomic_(\w+)$")


def _i32(x: np.ndarray) -> np.ndarray:
    return x.view(np.int32)


def _f32(x: np.ndarray) -> np.ndarray:
    return x.view(np.float32)


#: op -> new = fn(old, data, compare); uint32 arrays in and out
OPS = {
    "add": lambda o, d, c: o + d,
    "sub": lambda o, d, c: o - d,
    "smin": lambda o, d, c: np.minimum(_i32(o), _i32(d)).view(U32),
    "smax": lambda o, d, c: np.maximum(_i32(o), _i32(d)).view(U32),
    "umin": lambda o, d, c: np.minimum(o, d),
    "umax": lambda o, d, c: np.maximum(o, d),
    "and": lambda o, d, c: o & d,
    "or": lambda o, d, c: o | d,
    "xor": lambda o, d, c: o ^ d,
    "swap": lambda o, d, c: d.copy(),
    "inc": lambda o, d, c: np.where(o >= d, U32(0), o + U32(1)),
    "dec": lambda o, d, c: np.where((o == 0) | (o > d), d, o - U32(1)),
    "cmpswap": lambda o, d, c: np.where(o == c, d, o),
    "add_f32": lambda o, d, c: (_f32(o) + _f32(d)).view(U32),
}


def _atomic(w, ins):  # noqa: ANN001
    m = _NAME.match(ins.mnemonic)
    seg, name = m.group(1), m.group(2)
    fn = OPS[name]
    ret = bool(ins.modifiers.get("sc0") or ins.modifiers.get("glc"))
    ops_ = ins.operands
    if seg == "global":
        dst, rest = (ops_[0], ops_[1:]) if ret else (None, ops_)
        vaddr, vdata = rest[0], rest[1]
        saddr = rest[2] if len(rest) > 2 else Special("off")
        addr = _global_addresses(w, ins, vaddr, saddr)
        in_range = np.ones(LANES, dtype=bool)
    else:
        vdata, vaddr, rsrc, soff = ops_[:4]
        dst = vdata if ret else None
        addr, rng = _buffer_addresses(w, ins, vaddr, rsrc, soff, 4)
        in_range = rng[:, 0]
    ndata = 2 if name == "cmpswap" else 1
    data, pdata = w.vread(vdata, ins, "b32", ndata)
    lanes = w.exec & in_range
    if (pdata[lanes] != 0).any():
        w.ctx.hazards.add("poison_store", w, ins, "an atomic writes uninitialised (poisoned) data to global memory")
    w.ctx.stats["buffer_oob_stores"] += int((w.exec & ~in_range).sum())
    old = np.zeros(LANES, dtype=U32)
    idx = np.nonzero(lanes)[0]
    if idx.size:
        old[idx] = _update(w, ins, addr[idx], data[0][idx], data[1][idx] if ndata == 2 else None, fn)
    if ret:
        _issue_load(w, ins, dst, old.view(np.uint8).reshape(LANES, 4), w.exec, "dword", "")
    else:
        w.pending.append(Pending("vm", issue=ins.text))


def _update(w, ins, addr: np.ndarray, data: np.ndarray, cmp: np.ndarray | None, fn) -> np.ndarray:  # noqa: ANN001
    """Apply ``fn`` at each address in lane order; the old values, one per lane."""
    mem, what = w.ctx.memory, _what(w, ins)
    with np.errstate(all="ignore"):
        if np.unique(addr).size == addr.size:  # no collisions: one vector update
            old = np.ascontiguousarray(mem.load(addr, 4, what)).view(U32)[:, 0].copy()
            new = fn(old, data, cmp).astype(U32)
            mem.store(addr, new.view(np.uint8).reshape(-1, 4), what)
            return old
        olds = np.empty(addr.size, dtype=U32)
        for i in range(addr.size):  # colliding lanes: one after another
            a = addr[i : i + 1]
            o = np.ascontiguousarray(mem.load(a, 4, what)).view(U32)[:, 0].copy()
            c = None if cmp is None else cmp[i : i + 1]
            mem.store(a, fn(o, data[i : i + 1], c).astype(U32).view(np.uint8).reshape(1, 4), what)
            olds[i] = o[0]
        return olds


for _seg in ("global", "buffer"):
    for _name in OPS:
        op(f"{_seg}_atomic_{_name}")(_atomic)

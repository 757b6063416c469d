"""Scalar memory: s_load_dword* (64-bit base) and s_buffer_load_dword* (buffer resource).

Results arrive at the covering ``s_waitcnt lgkmcnt(0)`` (scalar loads return out of order).
A scalar buffer load past ``num_records`` reads 0 per dword, as the hardware does.
"""
from __future__ import annotations

import numpy as np

from verifiers.gfx950.emulator.operands import Const, Reg
from verifiers.gfx950.emulator.ops import batched as B
from verifiers.gfx950.emulator.ops.registry import op
from verifiers.gfx950.emulator.state import Pending

_COUNT = {"dword": 1, "dwordx2": 2, "dwordx4": 4, "dwordx8": 8, "dwordx16": 16}


def _offset(w, ins) -> int:  # noqa: ANN001
    """Immediate (operand 2 or ``offset:``) plus an SGPR soffset when present."""
    off = 0
    if len(ins.operands) > 2:
        o = ins.operands[2]
        off += w.sread(o, ins)
    off += int(ins.modifiers.get("offset", 0))
    return off & 0xFFFFFFFF if off >= 0 else off


def _issue(w, ins, regs: tuple[int, ...], data: list[int]) -> None:  # noqa: ANN001
    p = Pending("lgkm", smem=True, sregs=regs, sdata=tuple(data), issue=ins.text)
    w.pending.append(p)
    for r in regs:
        w.pending_s[r] = p


def _smem_load(kind: str, buffer: bool):
    n = _COUNT[kind]

    def h(w, ins):  # noqa: ANN001
        dst, base_op = ins.operands[0], ins.operands[1]
        regs = tuple(range(dst.index, dst.index + n))
        what = f"kernel {w.ctx.kernel_name!r}: {ins.text} (wave {w.index} of workgroup {w.group.id})"
        off = _offset(w, ins)
        if buffer:
            rsrc = [w.s[base_op.index + k] for k in range(4)]
            base = rsrc[0] | ((rsrc[1] & 0xFFFF) << 32)
            num_records = rsrc[2]
            offs = np.array([off + 4 * k for k in range(n)], dtype=np.int64)
            inside = offs + 4 <= num_records
            data = [0] * n
            if inside.any():
                raw = w.ctx.memory.load(base + offs[inside], 4, what)
                vals = raw.view(np.uint32).reshape(-1).tolist()
                for k, v in zip(np.nonzero(inside)[0].tolist(), vals):
                    data[k] = v
        else:
            base = w.s[base_op.index] | (w.s[base_op.index + 1] << 32)
            addr = np.array([base + off], dtype=np.int64)
            data = w.ctx.memory.load(addr, 4 * n, what).view(np.uint32).reshape(-1).tolist()
        if any(w.sp[base_op.index + k] for k in range(4 if buffer else 2)):
            w.ctx.hazards.add("poison_branch", w, ins, "scalar load address from an uninitialised value")
        _issue(w, ins, regs, data)

    return h


def _batched(h, buffer: bool):
    """Waves whose address registers (and soffset) hold the same values load the same dwords:
    run the load once per distinct address and issue its result to each of them."""
    nbase = 4 if buffer else 2

    def hb(waves, ins) -> bool:  # noqa: ANN001
        if not B.quiet(waves, ins):
            return False
        dst, base_op = ins.operands[0], ins.operands[1]
        i = base_op.index
        extra = ins.operands[2] if len(ins.operands) > 2 else None
        if extra is not None and not isinstance(extra, (Reg, Const)):
            return False
        if any(w.sp[i + k] for w in waves for k in range(nbase)):
            return False  # the per-wave path reports the poisoned address
        first: dict[tuple, object] = {}
        for w in waves:
            key = tuple(w.s[i : i + nbase]) + ((w.s[extra.index],) if isinstance(extra, Reg) else ())
            p = first.get(key)
            if p is None:
                h(w, ins)
                first[key] = w.pending[-1]
            else:
                _issue(w, ins, p.sregs, list(p.sdata))
        return True

    return hb


for _k in _COUNT:
    for _name, _buf in ((f"s_load_{_k}", False), (f"s_buffer_load_{_k}", True)):
        _h = _smem_load(_k, _buf)
        op(_name)(_h)
        B.batched(_name, _h, _batched(_h, _buf))

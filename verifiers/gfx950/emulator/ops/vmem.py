"""Vector memory: MUBUF buffer loads/stores (incl. D16 and buffer->LDS DMA), global
(FLAT global segment) loads/stores (incl. global->LDS DMA), and scratch (spills).

Buffer resources (gfx9 V#): base = dword0 | dword1[15:0] << 32, stride = dword1[29:16],
num_records = dword2, add_tid_enable = dword3[23]. Address = base + soffset +
(offen ? vaddr : 0) + inst_offset + stride * (index [+ lane]). Range check (CDNA ISA
"buffer range checking"): with stride 0 an access is in range when its byte offset
(vaddr + inst_offset, soffset excluded) plus its size fits in num_records, checked per
dword for multi-dword accesses; with a stride, when the index is below num_records.
Out-of-range loads read 0, out-of-range stores are dropped (counted in the report).
Any in-range access outside every argument's buffer is an error.

Loads land in registers (or LDS) at the covering ``s_waitcnt vmcnt``. LDS DMA writes
``M0 + inst_offset + lane * size`` in the workgroup's LDS.
"""
from __future__ import annotations

import re

import numpy as np

from verifiers.gfx950.emulator.operands import Reg, Special
from verifiers.gfx950.emulator.ops import op
from verifiers.gfx950.emulator.state import LANES, POISON, Pending

U32 = np.uint32
LANE = np.arange(LANES, dtype=np.int64)
_SIZES = {"ubyte": 1, "sbyte": 1, "ushort": 2, "sshort": 2, "byte": 1, "short": 2, "dword": 4, "dwordx2": 8,
          "dwordx3": 12, "dwordx4": 16}
_NAME = re.compile(r"^(buffer|global|scratch)_(load|store)_(lds_)?(ubyte|sbyte|ushort|sshort|byte|short|dword(?:x[234])?)(_d16(?:_hi)?)?$")


def _what(w, ins) -> str:  # noqa: ANN001
    return f"kernel {w.ctx.kernel_name!r}: {ins.text} (wave {w.index} of workgroup {w.group.id})"


def _vgpr_u32(w, ins, o) -> np.ndarray:  # noqa: ANN001
    v, p = w.vread(o, ins)
    if (p[w.exec] != 0).any():
        w.ctx.hazards.add("poison_branch", w, ins, "memory address computed from an uninitialised value")
    return v[0].astype(np.int64)


# ------------------------------------------------------------------ address generation
def _buffer_addresses(w, ins, vaddr_op, rsrc_op, soff_op, size: int):  # noqa: ANN001
    """(addresses int64 [64], in-range bool [64] per first byte, per-dword in-range [64, dwords])."""
    m = ins.modifiers
    s = [w.s[rsrc_op.index + k] for k in range(4)]
    if any(w.sp[rsrc_op.index + k] for k in range(4)):
        w.ctx.hazards.add("poison_branch", w, ins, "buffer resource from an uninitialised value")
    base = s[0] | ((s[1] & 0xFFFF) << 32)
    stride = (s[1] >> 16) & 0x3FFF
    num_records = s[2]
    if s[1] >> 31 & 1:
        raise w.ctx.unimplemented(ins, "swizzled buffer resources")
    add_tid = bool(s[3] >> 23 & 1)
    soffset = w.sread(soff_op, ins) if not isinstance(soff_op, Special) else 0
    inst = int(m.get("offset", 0))
    idxen, offen = bool(m.get("idxen")), bool(m.get("offen"))
    voff = np.zeros(LANES, dtype=np.int64)
    index = np.zeros(LANES, dtype=np.int64)
    if idxen and offen:
        vv, pv = w.vread(vaddr_op, ins, "b32", 2)
        index, voff = vv[0].astype(np.int64), vv[1].astype(np.int64)
    elif idxen:
        index = _vgpr_u32(w, ins, vaddr_op)
    elif offen:
        voff = _vgpr_u32(w, ins, vaddr_op)
    if add_tid:
        index = index + LANE
    offset = (voff + inst) & 0xFFFFFFFF
    addr = base + soffset + offset + stride * index
    ndw = max(1, size // 4)
    comp = 4 if size >= 4 else size
    if stride == 0:
        starts = offset[:, None] + 4 * np.arange(ndw)[None, :]
        in_range = starts + comp <= num_records
    else:
        in_range = np.broadcast_to((index < num_records)[:, None], (LANES, ndw)).copy()
    return addr, in_range


def _global_addresses(w, ins, vaddr_op, saddr_op) -> np.ndarray:  # noqa: ANN001
    inst = int(ins.modifiers.get("offset", 0))
    if isinstance(saddr_op, Reg):
        base = w.s[saddr_op.index] | (w.s[saddr_op.index + 1] << 32)
        if w.sp[saddr_op.index] or w.sp[saddr_op.index + 1]:
            w.ctx.hazards.add("poison_branch", w, ins, "global address from an uninitialised value")
        return base + _vgpr_u32(w, ins, vaddr_op) + inst
    v, p = w.vread(vaddr_op, ins, "b64", 2)
    if (p[w.exec] != 0).any():
        w.ctx.hazards.add("poison_branch", w, ins, "global address from an uninitialised value")
    return (v[0].astype(np.int64) | (v[1].astype(np.int64) << 32)) + inst


# ------------------------------------------------------------------ data formatting
def _to_dwords(raw: np.ndarray, kind: str) -> np.ndarray:
    """[64, bytes] -> [dwords, 64] uint32 (sub-dword loads zero/sign-extended)."""
    if kind in ("ubyte", "byte"):
        return raw[:, 0].astype(U32)[None, :]
    if kind == "sbyte":
        return raw[:, 0].view(np.int8).astype(np.int32).view(U32)[None, :]
    if kind in ("ushort", "short"):
        return np.ascontiguousarray(raw[:, :2]).view(np.uint16)[:, 0].astype(U32)[None, :]
    if kind == "sshort":
        return np.ascontiguousarray(raw[:, :2]).view(np.int16)[:, 0].astype(np.int32).view(U32)[None, :]
    return np.ascontiguousarray(raw).view(U32).T.copy()


def _store_bytes(w, ins, data_op, kind: str, d16: str):  # noqa: ANN001
    """(bytes [64, size], poisoned-byte mask [64, size]) to store from the data VGPRs."""
    size = _SIZES[kind]
    ndw = max(1, size // 4)
    v, _ = w.vread(data_op, ins, "b32", ndw)
    pois = w.vp[data_op.index : data_op.index + ndw]
    if w.pending_v and any(r in w.pending_v for r in range(data_op.index, data_op.index + ndw)):
        pois = np.full_like(pois, POISON)
    raw = np.ascontiguousarray(v.T).view(np.uint8)  # [64, 4*ndw]
    pbits = ((pois.T[:, :, None] >> np.arange(4, dtype=np.uint8)) & 1).reshape(LANES, 4 * ndw).astype(bool)
    shift = 2 if d16 == "_d16_hi" else 0
    return raw[:, shift : shift + size], pbits[:, shift : shift + size]


def _check_store_poison(w, ins, pbits: np.ndarray, lanes: np.ndarray) -> None:  # noqa: ANN001
    if (pbits[lanes]).any():
        n = int(pbits[lanes].any(axis=1).sum())
        w.ctx.hazards.add("poison_store", w, ins, f"{n} lanes store uninitialised (poisoned) bytes to global memory")


# ------------------------------------------------------------------ handlers
def _issue_load(w, ins, dst_op, raw: np.ndarray, lanes: np.ndarray, kind: str, d16: str) -> None:  # noqa: ANN001
    vals = _to_dwords(raw, kind)
    if d16:
        keep = 0xFFFF0000 if d16 == "_d16_hi" else 0xFFFF
        v16 = vals[0] & U32(0xFFFF) if kind not in ("sbyte",) else vals[0] & U32(0xFFFF)
        vals = (v16 << U32(16) if d16 == "_d16_hi" else v16)[None, :]
        byte_mask = [keep]
    else:
        byte_mask = None
    n = vals.shape[0]
    regs = tuple(range(dst_op.index, dst_op.index + n))
    if w.pending_v and any(r in w.pending_v for r in regs):
        pass  # a second load into a register already in flight: lands in order
    p = Pending("vm", vregs=regs, vdata=vals, vpoison=np.zeros((n, LANES), dtype=np.uint8), vmask=lanes.copy(),
                vbyte_mask=byte_mask, issue=ins.text)
    w.pending.append(p)
    for r in regs:
        w.pending_v[r] = p


def _mem_op(w, ins):  # noqa: ANN001, C901 - one dispatch over the memory forms
    m = _NAME.match(ins.mnemonic)
    if m is None:
        raise w.ctx.unimplemented(ins, "memory instruction form")
    seg, direction, lds_name, kind, d16 = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5) or ""
    size = _SIZES[kind]
    to_lds = bool(lds_name) or bool(ins.modifiers.get("lds"))
    ops_ = ins.operands
    lanes = w.exec.copy()
    what = _what(w, ins)
    ctx = w.ctx
    if seg == "scratch":
        _scratch(w, ins, direction, kind, size, d16)
        return
    # operand roles
    if seg == "buffer":
        if direction == "load" and not to_lds:
            data_op, vaddr_op, rsrc_op, soff_op = ops_[0], ops_[1], ops_[2], ops_[3]
        elif direction == "load":
            data_op = None
            if len(ops_) == 3:
                vaddr_op, rsrc_op, soff_op = ops_
            else:
                vaddr_op, (rsrc_op, soff_op) = Special("off"), ops_[:2]
        else:
            data_op, vaddr_op, rsrc_op, soff_op = ops_[0], ops_[1], ops_[2], ops_[3]
        addr, in_range = _buffer_addresses(w, ins, vaddr_op, rsrc_op, soff_op, size)
    else:  # global
        if direction == "load" and not to_lds:
            data_op, vaddr_op, saddr_op = ops_[0], ops_[1], ops_[2] if len(ops_) > 2 else Special("off")
        elif direction == "load":
            data_op, vaddr_op, saddr_op = None, ops_[0], ops_[1] if len(ops_) > 1 else Special("off")
        else:
            vaddr_op, data_op, saddr_op = ops_[0], ops_[1], ops_[2] if len(ops_) > 2 else Special("off")
        addr = _global_addresses(w, ins, vaddr_op, saddr_op)
        in_range = np.ones((LANES, max(1, size // 4)), dtype=bool)
    comp = 4 if size >= 4 else size
    ndw = max(1, size // 4)
    if direction == "load":
        raw = np.zeros((LANES, size), dtype=np.uint8)
        active = np.nonzero(lanes)[0]
        for k in range(ndw):
            sel = active[in_range[active, k]]
            if sel.size:
                raw[sel, 4 * k : 4 * k + comp] = ctx.memory.load(addr[sel] + 4 * k, comp, what)
        oob = int((~in_range[lanes]).any(axis=1).sum())
        ctx.stats["buffer_oob_loads"] += oob
        if to_lds:
            lds_base = w.m0 + int(ins.modifiers.get("offset", 0)) if seg == "buffer" else w.m0
            lds_addr = lds_base + LANE[lanes] * size
            ctx.lds_dma_issue(w, ins, lds_addr, raw[lanes])
        else:
            _issue_load(w, ins, data_op, raw, lanes, kind, d16)
        return
    data, pbits = _store_bytes(w, ins, data_op, kind, d16)
    _check_store_poison(w, ins, pbits, lanes & in_range.all(axis=1))
    ctx.stats["buffer_oob_stores"] += int((~in_range[lanes]).any(axis=1).sum())
    active = np.nonzero(lanes)[0]
    for k in range(ndw):
        sel = active[in_range[active, k]]
        if sel.size:
            ctx.memory.store(addr[sel] + 4 * k, data[sel, 4 * k : 4 * k + comp], what)
    w.pending.append(Pending("vm", issue=ins.text))


def _scratch(w, ins, direction: str, kind: str, size: int, d16: str) -> None:  # noqa: ANN001
    """Per-lane private memory for register spills (scratch_* with an SGPR/VGPR/offset address)."""
    ops_ = ins.operands
    if direction == "load":
        data_op, vaddr_op, saddr_op = ops_[0], ops_[1], ops_[2]
    else:
        vaddr_op, data_op, saddr_op = ops_[0], ops_[1], ops_[2]
    off = np.full(LANES, int(ins.modifiers.get("offset", 0)), dtype=np.int64)
    if isinstance(vaddr_op, Reg):
        off = off + _vgpr_u32(w, ins, vaddr_op)
    if isinstance(saddr_op, Reg):
        off = off + w.s[saddr_op.index]
    priv = w.private(int(off.max()) + size if off.size else 0, ins)
    lanes = w.exec
    cols = np.arange(size)
    if direction == "load":
        raw = priv[np.arange(LANES)[:, None], off[:, None] + cols]
        pois = w.private_poison[np.arange(LANES)[:, None], off[:, None] + cols]
        _issue_load(w, ins, data_op, raw, lanes, kind, d16)
        p = w.pending[-1]
        ndw = max(1, size // 4)
        pw = pois.reshape(LANES, ndw, min(4, size)).any(axis=2).T
        p.vpoison = np.where(pw, POISON, np.uint8(0)).astype(np.uint8)
        return
    data, pbits = _store_bytes(w, ins, data_op, kind, d16)
    idx = np.nonzero(lanes)[0]
    priv[idx[:, None], off[idx][:, None] + cols] = data[idx]
    w.private_poison[idx[:, None], off[idx][:, None] + cols] = pbits[idx]
    w.pending.append(Pending("vm", issue=ins.text))


for _seg in ("buffer", "global", "scratch"):
    for _kind in ("ubyte", "sbyte", "ushort", "sshort", "dword", "dwordx2", "dwordx3", "dwordx4"):
        op(f"{_seg}_load_{_kind}")(_mem_op)
    for _kind in ("byte", "short", "dword", "dwordx2", "dwordx3", "dwordx4"):
        op(f"{_seg}_store_{_kind}")(_mem_op)
    for _kind in ("ubyte", "sbyte", "short"):
        op(f"{_seg}_load_{_kind}_d16", f"{_seg}_load_{_kind}_d16_hi")(_mem_op)
    op(f"{_seg}_store_byte_d16_hi", f"{_seg}_store_short_d16_hi")(_mem_op)
for _kind in ("ubyte", "sbyte", "ushort", "sshort", "dword", "dwordx3", "dwordx4"):
    op(f"global_load_lds_{_kind}")(_mem_op)

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

from verifiers.gfx950.emulator.errors import MemoryAccessError
from verifiers.gfx950.emulator.operands import Reg, Special
from verifiers.gfx950.emulator.ops import batched as B
from verifiers.gfx950.emulator.ops.ds import dma_issue_batched
from verifiers.gfx950.emulator.ops.registry import op
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


# ------------------------------------------------------------------ batched loads (ops.batched)
def _batch_addresses(waves, rows, ins, seg: str, vaddr_op, base_op, soff_op, size: int):  # noqa: ANN001
    """(addresses [W, 64], in range [W, 64, dwords] or None when every access is) as
    ``_buffer_addresses`` / ``_global_addresses`` compute them per wave; None when a case needs
    the per-wave path (poison, swizzle)."""
    m = ins.modifiers
    inst = int(m.get("offset", 0))
    ndw = max(1, size // 4)
    if seg == "global":
        if isinstance(base_op, Reg):
            pair, bad = B.sgprs(waves, base_op.index, 2)
            if bad:
                return None
            base = (pair[:, 0] | (pair[:, 1] << 32))[:, None]
            g = B.src(waves, rows, vaddr_op)
            if g is None or g[1].any():
                return None
            return base + g[0].astype(np.int64) + inst, None
        g = B.src(waves, rows, vaddr_op, "b64", 2)
        if g is None or g[1].any():
            return None
        v = g[0].astype(np.int64)
        return (v[:, 0] | (v[:, 1] << 32)) + inst, None
    desc, bad = B.sgprs(waves, base_op.index, 4)  # [W, 4]
    if bad:
        return None
    if (desc[:, 1] >> 31 & 1).any():
        return None  # swizzled: per wave (which reports it as unimplemented)
    base = (desc[:, 0] | ((desc[:, 1] & 0xFFFF) << 32))[:, None]
    stride = ((desc[:, 1] >> 16) & 0x3FFF)[:, None]
    num_records = desc[:, 2][:, None]
    soff = np.zeros((len(waves), 1), dtype=np.int64)
    if isinstance(soff_op, Reg):
        if soff_op.file != "s":
            return None  # the per-wave read reports it
        soff, bad = B.sgprs(waves, soff_op.index)
        if bad:
            return None
    elif not isinstance(soff_op, Special):
        soff[:, 0] = waves[0].sread(soff_op, ins)  # a constant: the same in every wave
    idxen, offen = bool(m.get("idxen")), bool(m.get("offen"))
    index = np.zeros((len(waves), LANES), dtype=np.int64)
    voff = np.zeros((len(waves), LANES), dtype=np.int64)
    if idxen or offen:
        g = B.src(waves, rows, vaddr_op, "b32", 2 if idxen and offen else 1)
        if g is None or g[1].any():
            return None
        v = g[0].astype(np.int64)
        if idxen and offen:
            index, voff = v[:, 0], v[:, 1]
        elif idxen:
            index = v
        else:
            voff = v
    if (desc[:, 3] >> 23 & 1).any():
        index = index + np.where((desc[:, 3] >> 23 & 1)[:, None] == 1, LANE[None, :], 0)
    offset = (voff + inst) & 0xFFFFFFFF
    addr = base + soff + offset + stride * index
    comp = 4 if size >= 4 else size
    if not stride.any() and (offset.max(axis=1) + 4 * (ndw - 1) + comp <= num_records[:, 0]).all():
        return addr, None  # every dword of every lane in range (the check below, on each wave's largest offset)
    starts = offset[..., None] + 4 * np.arange(ndw)
    in_range = np.where((stride == 0)[..., None], starts + comp <= num_records[..., None],
                        (index < num_records)[..., None])
    return addr, in_range


def _store_batched(waves, ins) -> bool:  # noqa: ANN001 - ``_mem_op`` stores of whole dwords for many waves
    m = _NAME.match(ins.mnemonic)
    if m is None:
        return False
    seg, kind, d16 = m.group(1), m.group(4), m.group(5)
    if seg == "scratch" or d16 or not kind.startswith("dword"):
        return False
    if not B.quiet(waves, ins) or B.exec_rows(waves) is not None:
        return False
    ops_ = ins.operands
    if seg == "buffer":
        data_op, vaddr_op, base_op, soff_op = ops_[0], ops_[1], ops_[2], ops_[3]
    else:
        vaddr_op, data_op, soff_op = ops_[0], ops_[1], None
        base_op = ops_[2] if len(ops_) > 2 else Special("off")
    size = _SIZES[kind]
    ndw = size // 4
    rows = B.slots(waves)
    g = B.src(waves, rows, data_op, "b32", ndw)
    if g is None or g[1].any():
        return False  # poisoned data: the per-wave path reports which lanes
    got = _batch_addresses(waves, rows, ins, seg, vaddr_op, base_op, soff_op, size)
    if got is None:
        return False
    addr, in_range = got
    data = g[0] if ndw > 1 else g[0][:, None, :]
    raw = np.ascontiguousarray(np.broadcast_to(data, (len(waves), ndw, LANES)).transpose(0, 2, 1)).view(np.uint8)
    ctx = waves[0].ctx
    what = _what(waves[0], ins)
    sels = [np.ones(addr.shape, dtype=bool) if in_range is None else in_range[..., k] for k in range(ndw)]
    try:  # every address checked before anything is written
        for k, sel in enumerate(sels):
            if sel.any():
                ctx.memory._extent_for(addr[sel] + 4 * k, 4, what)
    except MemoryAccessError:
        return False
    for k, sel in enumerate(sels):
        if sel.any():
            ctx.memory.store(addr[sel] + 4 * k, raw[..., 4 * k : 4 * k + 4][sel], what)
    if in_range is not None:
        ctx.stats["buffer_oob_stores"] += int((~in_range).any(axis=2).sum())
    B.issue_marker(waves, "vm", ins.text)
    return True


def _load_batched(waves, ins) -> bool:  # noqa: ANN001 - ``_mem_op`` loads of whole dwords for many waves
    m = _NAME.match(ins.mnemonic)
    if m is None:
        return False
    seg, direction, lds_name, kind, d16 = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5)
    if direction != "load" or seg == "scratch" or d16 or not kind.startswith("dword"):
        return False
    if not B.quiet(waves, ins) or B.exec_rows(waves) is not None:
        return False
    to_lds = bool(lds_name) or bool(ins.modifiers.get("lds"))
    ops_ = ins.operands
    if seg == "buffer":
        if not to_lds:
            data_op, vaddr_op, base_op, soff_op = ops_[0], ops_[1], ops_[2], ops_[3]
        elif len(ops_) == 3:
            data_op, (vaddr_op, base_op, soff_op) = None, ops_
        else:
            data_op, vaddr_op, (base_op, soff_op) = None, Special("off"), ops_[:2]
    elif not to_lds:
        data_op, vaddr_op, soff_op = ops_[0], ops_[1], None
        base_op = ops_[2] if len(ops_) > 2 else Special("off")
    else:
        data_op, vaddr_op, soff_op = None, ops_[0], None
        base_op = ops_[1] if len(ops_) > 1 else Special("off")
    size = _SIZES[kind]
    rows = B.slots(waves)
    got = _batch_addresses(waves, rows, ins, seg, vaddr_op, base_op, soff_op, size)
    if got is None:
        return False
    addr, in_range = got
    ndw = size // 4
    raw = np.zeros((len(waves), LANES, size), dtype=np.uint8)
    ctx = waves[0].ctx
    try:
        if in_range is None or in_range.all():  # the common case: one gather of whole accesses
            raw = ctx.memory.load(addr.ravel(), size, _what(waves[0], ins)).reshape(len(waves), LANES, size)
        else:
            for k in range(ndw):
                sel = in_range[..., k]
                if sel.any():
                    raw[..., 4 * k : 4 * k + 4][sel] = ctx.memory.load(addr[sel] + 4 * k, 4, _what(waves[0], ins))
    except MemoryAccessError:
        return False  # the per-wave path names the wave and lane
    if in_range is not None:
        ctx.stats["buffer_oob_loads"] += int((~in_range).any(axis=2).sum())
    if to_lds:
        off = int(ins.modifiers.get("offset", 0)) if seg == "buffer" else 0
        lds_addr = np.array([w.m0 for w in waves], dtype=np.int64)[:, None] + off + LANE * size
        if not dma_issue_batched(waves, ins, lds_addr, raw):
            for j, w in enumerate(waves):
                ctx.lds_dma_issue(w, ins, lds_addr[j], raw[j])
        return True
    vals = np.ascontiguousarray(raw).view(U32).transpose(0, 2, 1)  # [W, dwords, 64]
    regs = tuple(range(data_op.index, data_op.index + ndw))
    # as _issue_load, with every lane active and no poison
    B.issue_loads(waves, rows, "vm", regs, vals, np.broadcast_to(_CLEAN[ndw], vals.shape), ins.text)
    return True


_CLEAN = {n: np.zeros((n, LANES), dtype=np.uint8) for n in (1, 2, 3, 4)}
for _a in _CLEAN.values():
    _a.setflags(write=False)


for _seg in ("buffer", "global", "scratch"):
    for _kind in ("ubyte", "sbyte", "ushort", "sshort", "dword", "dwordx2", "dwordx3", "dwordx4"):
        op(f"{_seg}_load_{_kind}")(_mem_op)
        B.batched(f"{_seg}_load_{_kind}", _mem_op, _load_batched)
    for _kind in ("byte", "short", "dword", "dwordx2", "dwordx3", "dwordx4"):
        op(f"{_seg}_store_{_kind}")(_mem_op)
        B.batched(f"{_seg}_store_{_kind}", _mem_op, _store_batched)
    for _kind in ("ubyte", "sbyte", "short"):
        op(f"{_seg}_load_{_kind}_d16", f"{_seg}_load_{_kind}_d16_hi")(_mem_op)
    op(f"{_seg}_store_byte_d16_hi", f"{_seg}_store_short_d16_hi")(_mem_op)
for _kind in ("ubyte", "sbyte", "ushort", "sshort", "dword", "dwordx3", "dwordx4"):
    op(f"global_load_lds_{_kind}")(_mem_op)
    B.batched(f"global_load_lds_{_kind}", _mem_op, _load_batched)

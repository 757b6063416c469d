"""LDS (DS) instructions: reads, writes, read2/write2, and the cross-lane DS permutes.

Address = vaddr + offset (16-bit), in bytes within the workgroup's LDS; read2/write2
use ``offset0``/``offset1`` in units of the element size (x64 for the st64 forms).
Reads see LDS at issue and land at the covering ``s_waitcnt lgkmcnt``; every access is
checked for races (``memory.Lds``) and for reads of bytes a DMA has not delivered yet.
"""
from __future__ import annotations

import re

import numpy as np

from verifiers.gfx950.emulator.ops import batched as B
from verifiers.gfx950.emulator.ops.registry import op
from verifiers.gfx950.emulator.state import LANES, POISON, Pending

U32 = np.uint32
LANE = np.arange(LANES, dtype=np.int64)
_READ = re.compile(r"^ds_read_(b32|b64|b96|b128|u8|i8|u16|i16)(_d16(?:_hi)?)?$")
_WRITE = re.compile(r"^ds_write_(b8|b16|b32|b64|b96|b128)(_d16_hi)?$")
_SIZE = {"b8": 1, "u8": 1, "i8": 1, "b16": 2, "u16": 2, "i16": 2, "b32": 4, "b64": 8, "b96": 12, "b128": 16}


def _addr(w, ins) -> np.ndarray:  # noqa: ANN001
    v, p = w.vread(ins.operands[1] if ins.mnemonic.startswith("ds_read") else ins.operands[0], ins)
    if (p[w.exec] != 0).any():
        w.ctx.hazards.add("poison_branch", w, ins, "LDS address computed from an uninitialised value")
    return v[0].astype(np.int64)


def _lds_read(w, ins, addrs: np.ndarray, size: int):  # noqa: ANN001
    """(bytes [n, size], poisoned-byte mask [n, size]) for active lanes' addresses."""
    ctx = w.ctx
    lds = w.group.lds
    inb = lds.in_bounds(addrs, size)
    raw = np.zeros((addrs.size, size), dtype=np.uint8)
    pois = np.zeros((addrs.size, size), dtype=bool)
    if not inb.all():
        ctx.stats["lds_oob_reads"] += int((~inb).sum())
        straddle(w, ins, inb, addrs, size)
        addrs = addrs[inb]
    if not addrs.size:
        return raw, pois
    idx = addrs[:, None] + np.arange(size)
    raw[inb] = lds.data[idx]
    pois[inb] = lds.poison[idx]
    d = lds.dwords(addrs, size)
    racy = lds.note_read(d, w.index, w.group.epoch)
    if racy.size:
        ctx.hazards.add("lds_race", w, ins, f"reads LDS dword(s) at byte {4 * int(racy[0])} written by another wave "
                        "with no s_barrier in between")
    pend = lds.pending[d]
    if (pend >= 0).any():
        ctx.hazards.add("lds_pending_read", w, ins, f"reads LDS byte {4 * int(d[pend >= 0][0])} before the "
                        "buffer->LDS load into it completed (missing s_waitcnt vmcnt / s_barrier)")
        pois[inb] |= np.isin(idx // 4, d[pend >= 0])
    return raw, pois


def straddle(w, ins, inb: np.ndarray, addrs: np.ndarray, size: int) -> None:  # noqa: ANN001
    """Report an access whose lanes are partly inside and partly past the allocation. A
    wave-uniform out-of-range base (every lane out) is the hardware's masking idiom
    (Triton moves M0 out of range to drop a copy); a partial overflow is an undersized
    LDS allocation: on silicon those lanes' writes are dropped / reads return 0."""
    if inb.any():
        lds = w.group.lds
        last = int(addrs[~inb].max()) + size
        w.ctx.hazards.add("lds_out_of_range", w, ins, f"{int((~inb).sum())} lanes access LDS up to byte {last}, past the "
                          f"workgroup's {lds.size}-byte allocation (reads return 0, writes are dropped)")


def lds_write(w, ins, addrs: np.ndarray, data: np.ndarray, pois: np.ndarray) -> None:  # noqa: ANN001
    ctx = w.ctx
    lds = w.group.lds
    size = data.shape[1]
    inb = lds.in_bounds(addrs, size)
    if not inb.all():
        ctx.stats["lds_oob_writes"] += int((~inb).sum())
        straddle(w, ins, inb, addrs, size)
        addrs, data, pois = addrs[inb], data[inb], pois[inb]
    if not addrs.size:
        return
    d = lds.dwords(addrs, size)
    racy = lds.note_write(d, w.index, w.group.epoch)
    if racy.size:
        ctx.hazards.add("lds_race", w, ins, f"writes LDS dword(s) at byte {4 * int(racy[0])} that another wave "
                        "accessed with no s_barrier in between")
    idx = addrs[:, None] + np.arange(size)
    lds.data[idx] = data
    lds.poison[idx] = pois


def _to_regs(raw: np.ndarray, pois: np.ndarray, kind: str):
    """[64, size] bytes -> ([dwords, 64] uint32, [dwords, 64] poison bits)."""
    size = raw.shape[1]
    if size >= 4:
        vals = np.ascontiguousarray(raw).view(U32).T.copy()
        pb = pois.reshape(LANES, size // 4, 4)
        pbits = (pb * (1 << np.arange(4, dtype=np.uint8))).sum(axis=2).astype(np.uint8).T
        return vals, pbits
    if kind == "i8":
        v = raw[:, 0].view(np.int8).astype(np.int32).view(U32)
    elif kind == "i16":
        v = np.ascontiguousarray(raw).view(np.int16)[:, 0].astype(np.int32).view(U32)
    elif size == 1:
        v = raw[:, 0].astype(U32)
    else:
        v = np.ascontiguousarray(raw).view(np.uint16)[:, 0].astype(U32)
    p = np.where(pois.any(axis=1), POISON, np.uint8(0))
    return v[None, :], p[None, :]


def _issue(w, ins, first_reg: int, vals: np.ndarray, pbits: np.ndarray, byte_mask=None) -> None:  # noqa: ANN001
    regs = tuple(range(first_reg, first_reg + vals.shape[0]))
    p = Pending("lgkm", vregs=regs, vdata=vals, vpoison=pbits, vmask=w.exec.copy(), vbyte_mask=byte_mask, issue=ins.text)
    w.pending.append(p)
    for r in regs:
        w.pending_v[r] = p


def _read(w, ins):  # noqa: ANN001
    m = _READ.match(ins.mnemonic)
    kind, d16 = m.group(1), m.group(2) or ""
    size = _SIZE[kind]
    addrs = _addr(w, ins) + int(ins.modifiers.get("offset", 0))
    raw = np.zeros((LANES, size), dtype=np.uint8)
    pois = np.zeros((LANES, size), dtype=bool)
    act = w.exec
    if act.any():
        raw[act], pois[act] = _lds_read(w, ins, addrs[act], size)
    vals, pbits = _to_regs(raw, pois, kind)
    mask = None
    if d16:
        hi = d16 == "_d16_hi"
        v16 = vals[0] & U32(0xFFFF)
        vals = (v16 << U32(16) if hi else v16)[None, :]
        mask = [0xFFFF0000 if hi else 0xFFFF]
        pbits = np.where(pbits != 0, np.uint8(0xC if hi else 0x3), np.uint8(0))
    _issue(w, ins, ins.operands[0].index, vals, pbits, mask)


def _write(w, ins):  # noqa: ANN001
    m = _WRITE.match(ins.mnemonic)
    kind, d16 = m.group(1), m.group(2) or ""
    size = _SIZE[kind]
    addrs = _addr(w, ins) + int(ins.modifiers.get("offset", 0))
    data, pois = _data_bytes(w, ins, ins.operands[1], size, 2 if d16 else 0)
    act = w.exec
    if act.any():
        lds_write(w, ins, addrs[act], data[act], pois[act])
    w.pending.append(Pending("lgkm", issue=ins.text))


def _data_bytes(w, ins, o, size: int, shift: int = 0):  # noqa: ANN001
    ndw = max(1, (size + shift + 3) // 4)
    v, _ = w.vread(o, ins, "b32", ndw)
    pv = w.vp[o.index : o.index + ndw]
    if w.pending_v and any(r in w.pending_v for r in range(o.index, o.index + ndw)):
        pv = np.full_like(pv, POISON)
    raw = np.ascontiguousarray(v.T).view(np.uint8)
    pbits = ((pv.T[:, :, None] >> np.arange(4, dtype=np.uint8)) & 1).reshape(LANES, 4 * ndw).astype(bool)
    return raw[:, shift : shift + size], pbits[:, shift : shift + size]


def _read2(w, ins):  # noqa: ANN001
    esz = 8 if "b64" in ins.mnemonic else 4
    unit = esz * (64 if "st64" in ins.mnemonic else 1)
    base = _addr(w, ins)
    o0, o1 = int(ins.modifiers.get("offset0", 0)), int(ins.modifiers.get("offset1", 0))
    act = w.exec
    raws, poiss = [], []
    for o in (o0, o1):
        raw = np.zeros((LANES, esz), dtype=np.uint8)
        pois = np.zeros((LANES, esz), dtype=bool)
        if act.any():
            raw[act], pois[act] = _lds_read(w, ins, base[act] + o * unit, esz)
        raws.append(raw)
        poiss.append(pois)
    vals, pbits = _to_regs(np.concatenate(raws, axis=1), np.concatenate(poiss, axis=1), "b")
    _issue(w, ins, ins.operands[0].index, vals, pbits)


def _write2(w, ins):  # noqa: ANN001
    esz = 8 if "b64" in ins.mnemonic else 4
    unit = esz * (64 if "st64" in ins.mnemonic else 1)
    base = _addr(w, ins)
    act = w.exec
    for k, key in enumerate(("offset0", "offset1")):
        data, pois = _data_bytes(w, ins, ins.operands[1 + k], esz)
        if act.any():
            lds_write(w, ins, base[act] + int(ins.modifiers.get(key, 0)) * unit, data[act], pois[act])
    w.pending.append(Pending("lgkm", issue=ins.text))


def _bpermute(w, ins):  # noqa: ANN001
    """ds_bpermute_b32 (pull: lane i reads lane addr_i/4) and ds_permute_b32 (push)."""
    a, pa = w.vread(ins.operands[1], ins)
    d, pd = w.vread(ins.operands[2], ins)
    off = int(ins.modifiers.get("offset", 0))
    lane = ((a[0].astype(np.int64) + off) // 4) % LANES
    out = np.zeros(LANES, dtype=U32)
    pout = np.zeros(LANES, dtype=np.uint8)
    if ins.mnemonic == "ds_bpermute_b32":
        ok = w.exec[lane]
        out = np.where(ok, d[0][lane], U32(0))
        pout = np.where(ok, pd[lane], np.uint8(0)) | np.where(pa != 0, POISON, np.uint8(0))
    else:
        for i in np.nonzero(w.exec)[0]:
            out[lane[i]] = d[0][i]
            pout[lane[i]] = pd[i] | pa[i]
    _issue(w, ins, ins.operands[0].index, out[None, :], pout[None, :])


# ------------------------------------------------------------------ batched (ops.batched)
class _Site:
    """Where many waves' aligned accesses (whole dwords, or 1 / 2 bytes inside one dword) land
    in their workgroups' ``LdsBank``: ``key`` [W, 64 * dwords] flat bank dword indices
    (lane-major), ``byte`` [W, 64] flat bank byte addresses."""

    def __init__(self, waves, addrs: np.ndarray, size: int) -> None:  # noqa: ANN001
        lds = waves[0].group.lds
        self.bank = lds.bank
        self.ok = (self.bank is not None and not (addrs & (min(size, 4) - 1)).any()
                   and not ((addrs < 0) | (addrs + size > lds.size)).any())
        if not self.ok:
            return
        gi = np.array([w.group.lds.row for w in waves])[:, None]
        ndw = max(1, size // 4)
        self.byte = gi * (4 * self.bank.dwords) + addrs
        self.key = ((self.byte // 4)[..., None] + np.arange(ndw)).reshape(len(waves), -1)
        self.epoch = np.array([w.group.epoch for w in waves])[:, None]
        self.me = np.array([w.index for w in waves])[:, None]

    def flat(self, name: str) -> np.ndarray:
        return getattr(self.bank, name).reshape(-1)


def _note_readers(rd: np.ndarray, key: np.ndarray, me: np.ndarray) -> None:
    """OR each wave's reader bit into ``rd`` at its ``key`` row. Per wave index: rows with the
    same index belong to different workgroups (disjoint keys), and a key repeated within one
    assignment gets the same value, so plain fancy assignment is exact (``ufunc.at`` is slow)."""
    me = me[:, 0]
    for k in np.unique(me).tolist():
        sel = key if len(me) == 1 else key[me == k]
        sel = sel.ravel()
        rd[sel] |= np.uint32(1 << k)


def _poison_bits(pw: np.ndarray) -> np.ndarray:
    """4 per-byte poison flags packed in a dword (``LdsBank.pwords``) -> the 4-bit dword poison."""
    return ((pw & 1) | ((pw >> 7) & 2) | ((pw >> 14) & 4) | ((pw >> 21) & 8)).astype(np.uint8)


def _poison_words(pbits: np.ndarray) -> np.ndarray:
    """The inverse of ``_poison_bits``: a 4-bit dword poison -> 4 packed per-byte flags."""
    p = pbits.astype(np.uint32)
    return (p & 1) | ((p & 2) << 7) | ((p & 4) << 14) | ((p & 8) << 21)


def _lds_address(waves, rows, ins, k: int):  # noqa: ANN001
    g = B.src(waves, rows, ins.operands[k])
    if g is None or g[1].any():
        return None  # a poisoned address: the per-wave path reports it
    return g[0].astype(np.int64) + int(ins.modifiers.get("offset", 0))


def _read_batched(waves, ins) -> bool:  # noqa: ANN001 - ``_read`` of aligned whole dwords for many waves
    size = _SIZE[_READ.match(ins.mnemonic).group(1)]
    if size < 4 or not B.quiet(waves, ins) or B.exec_rows(waves) is not None:
        return False
    rows = B.slots(waves)
    addrs = _lds_address(waves, rows, ins, 1)
    if addrs is None:
        return False
    at = _Site(waves, addrs, size)
    if not at.ok:
        return False
    bank, key, ndw = at.bank, at.key, size // 4
    nw = len(waves)
    words, pw = bank.words[key], bank.pwords[key]  # [W, 64 * dwords]
    wr, we = at.flat("writer")[key], at.flat("write_epoch")[key]
    racy = (we == at.epoch) & (wr != at.me) & (wr >= 0)
    re_, rd = at.flat("read_epoch"), at.flat("readers")
    rd[key[re_[key] != at.epoch]] = 0
    re_[key] = np.broadcast_to(at.epoch, key.shape)
    _note_readers(rd, key, at.me)
    pbits = _poison_bits(pw)
    pend = at.flat("pending")[key] >= 0
    if racy.any() or pend.any():
        for j in np.nonzero(racy.any(axis=1) | pend.any(axis=1))[0].tolist():
            w, byte = waves[j], 4 * (key[j] % bank.dwords)
            if racy[j].any():
                w.ctx.hazards.add("lds_race", w, ins, f"reads LDS dword(s) at byte {int(byte[racy[j]][0])} written by "
                                  "another wave with no s_barrier in between")
            if pend[j].any():
                w.ctx.hazards.add("lds_pending_read", w, ins, f"reads LDS byte {int(byte[pend[j]][0])} before the "
                                  "buffer->LDS load into it completed (missing s_waitcnt vmcnt / s_barrier)")
        pbits = np.where(pend, POISON, pbits)
    vals = words.reshape(nw, LANES, ndw).transpose(0, 2, 1)  # [W, dwords, 64]
    pbits = pbits.reshape(nw, LANES, ndw).transpose(0, 2, 1)
    regs = tuple(range(ins.operands[0].index, ins.operands[0].index + ndw))
    B.issue_loads(waves, rows, "lgkm", regs, vals, pbits, ins.text)  # as ``_issue``, every lane active
    return True


def _write_batched(waves, ins) -> bool:  # noqa: ANN001 - ``_write`` of aligned accesses for many waves
    m = _WRITE.match(ins.mnemonic)
    size = _SIZE[m.group(1)]
    if m.group(2) or not B.quiet(waves, ins) or B.exec_rows(waves) is not None:
        return False
    rows = B.slots(waves)
    addrs = _lds_address(waves, rows, ins, 0)
    if addrs is None:
        return False
    ndw = max(1, size // 4)
    g = B.src(waves, rows, ins.operands[1], "b32", ndw)
    if g is None:
        return False
    at = _Site(waves, addrs, size)
    if not at.ok:
        return False
    nw = len(waves)
    vals = np.broadcast_to(g[0] if ndw > 1 else g[0][:, None, :], (nw, ndw, LANES))
    vp = np.broadcast_to(g[1] if ndw > 1 else g[1][:, None, :], (nw, ndw, LANES))
    bank, key = at.bank, at.key
    mebit = np.uint32(1) << at.me.astype(np.uint32)
    re_, rd, wr, we = (at.flat(n)[key] for n in ("read_epoch", "readers", "writer", "write_epoch"))
    racy = ((re_ == at.epoch) & ((rd & ~mebit) != 0)) | ((we == at.epoch) & (wr != at.me) & (wr >= 0))
    if nw > 1:  # an earlier wave of this step writing the same dword: a race, as in wave order
        flat = key.ravel()
        order = np.argsort(flat, kind="stable")
        sk = flat[order]
        starts = np.r_[True, sk[1:] != sk[:-1]]
        first_wave = (order // key.shape[1])[np.maximum.accumulate(np.where(starts, np.arange(sk.size), 0))]
        later = np.empty(flat.size, dtype=bool)
        later[order] = (order // key.shape[1]) != first_wave
        racy |= later.reshape(key.shape)
    at.flat("writer")[key] = np.broadcast_to(at.me, key.shape).astype(np.int16)
    at.flat("write_epoch")[key] = np.broadcast_to(at.epoch, key.shape)
    if size >= 4:
        bank.words[key] = vals.transpose(0, 2, 1).reshape(nw, -1)  # lane-major, as ``key``
        bank.pwords[key] = _poison_words(vp.transpose(0, 2, 1).reshape(nw, -1))
    else:  # the low ``size`` bytes of the data register, and their poison bits
        k = np.arange(size)
        byte = at.byte[..., None] + k
        bank.data.reshape(-1)[byte] = ((vals[:, 0, :, None] >> (8 * k).astype(U32)) & U32(0xFF)).astype(np.uint8)
        bank.poison.reshape(-1)[byte] = ((vp[:, 0, :, None] >> k.astype(np.uint8)) & 1).astype(bool)
    if racy.any():
        for j in np.nonzero(racy.any(axis=1))[0].tolist():
            w = waves[j]
            w.ctx.hazards.add("lds_race", w, ins, f"writes LDS dword(s) at byte {int(4 * (key[j][racy[j]][0] % bank.dwords))} "
                              "that another wave accessed with no s_barrier in between")
    B.issue_marker(waves, "lgkm", ins.text)
    return True




def _bpermute_batched(waves, ins) -> bool:  # noqa: ANN001 - ``_bpermute`` (pull) with every lane active
    if ins.mnemonic != "ds_bpermute_b32" or not B.quiet(waves, ins) or B.exec_rows(waves) is not None:
        return False
    rows = B.slots(waves)
    ga, gd = B.src(waves, rows, ins.operands[1]), B.src(waves, rows, ins.operands[2])
    if ga is None or gd is None:
        return False
    shape = (len(waves), LANES)
    a, pa = np.broadcast_to(ga[0], shape), np.broadcast_to(ga[1], shape)
    d, pd = np.broadcast_to(gd[0], shape), np.broadcast_to(gd[1], shape)
    lane = ((a.astype(np.int64) + int(ins.modifiers.get("offset", 0))) // 4) % LANES
    out = np.take_along_axis(d, lane, axis=1)
    pout = np.take_along_axis(pd, lane, axis=1) | np.where(pa != 0, POISON, np.uint8(0))
    B.issue_loads(waves, rows, "lgkm", (ins.operands[0].index,), out[:, None, :], pout[:, None, :], ins.text)
    return True

# ------------------------------------------------------------------ buffer/global -> LDS DMA for many waves
def dma_issue_batched(waves, ins, addrs: np.ndarray, raw: np.ndarray) -> bool:  # noqa: ANN001
    """``Context.lds_dma_issue`` for every wave at once (``addrs`` [W, 64], ``raw`` [W, 64, size]):
    the pending marks set, one ``Pending`` shared by the waves' queues with the rows in a
    ``B.DmaLot``. False (nothing done) unless every lane of every wave writes whole aligned
    dwords inside its allocation, each wave one contiguous run of them (what ``dma_landing``
    relies on)."""
    size = raw.shape[2]
    if size % 4:
        return False
    at = _Site(waves, addrs, size)
    if not at.ok or (np.diff(at.key, axis=1) != 1).any():
        return False
    at.flat("pending")[at.key] = np.broadcast_to(at.me, at.key.shape)  # in wave order, as per wave
    p = Pending("vm", lds_addr=addrs, issue=ins.text, lot=B.DmaLot(waves, addrs, raw, at.key))
    for w in waves:
        w.pending.append(p)
    return True


def dma_landing(records: list):  # noqa: ANN201
    """The landing of batched DMA ``records`` (``Pending`` with a ``B.DmaLot``) at one s_waitcnt,
    as ``Context.lds_dma_land`` per wave and record computes it: a function that lands them
    all, or None when only the per-wave order gives the same result (two landings into one
    dword; a race to report, whose first report depends on that order)."""
    lots = [p.lot for p in records]
    starts = np.concatenate([lot.key[:, 0] for lot in lots])
    ends = starts + np.concatenate([np.full(lot.size, lot.key.shape[1]) for lot in lots])
    order = np.argsort(starts, kind="stable")
    if (starts[order][1:] < ends[order][:-1]).any():
        return None
    bank = lots[0].waves[0].group.lds.bank
    flat = {n: getattr(bank, n).reshape(-1) for n in ("pending", "writer", "write_epoch", "readers", "read_epoch")}
    plans = []
    for lot in lots:
        key = lot.key
        epoch = np.array([w.group.epoch for w in lot.waves])[:, None]
        me = np.array([w.index for w in lot.waves])[:, None]
        mebit = np.uint32(1) << me.astype(np.uint32)
        re_, rd, wr, we = (flat[n][key] for n in ("read_epoch", "readers", "writer", "write_epoch"))
        if (((re_ == epoch) & ((rd & ~mebit) != 0)) | ((we == epoch) & (wr != me) & (wr >= 0))).any():
            return None  # keys are disjoint: no landing here changes another's check
        plans.append((key, me, epoch, lot.raw))

    def land() -> None:
        for key, me, epoch, raw in plans:
            flat["pending"][key] = -1
            flat["writer"][key] = np.broadcast_to(me, key.shape)
            flat["write_epoch"][key] = np.broadcast_to(epoch, key.shape)
            bank.words[key] = np.ascontiguousarray(raw).view(U32).reshape(key.shape)
            bank.pwords[key] = 0

    return land


for _k in ("b32", "b64", "b96", "b128", "u8", "i8", "u16", "i16"):
    op(f"ds_read_{_k}")(_read)
    B.batched(f"ds_read_{_k}", _read, _read_batched)
for _k in ("u8", "i8", "u16"):
    op(f"ds_read_{_k}_d16", f"ds_read_{_k}_d16_hi")(_read)
for _k in ("b8", "b16", "b32", "b64", "b96", "b128"):
    op(f"ds_write_{_k}")(_write)
    B.batched(f"ds_write_{_k}", _write, _write_batched)
op("ds_write_b8_d16_hi", "ds_write_b16_d16_hi")(_write)
op("ds_read2_b32", "ds_read2_b64", "ds_read2st64_b32", "ds_read2st64_b64")(_read2)
op("ds_write2_b32", "ds_write2_b64", "ds_write2st64_b32", "ds_write2st64_b64")(_write2)
op("ds_bpermute_b32", "ds_permute_b32")(_bpermute)
B.batched("ds_bpermute_b32", _bpermute, _bpermute_batched)

"""Program flow and waits (SOPP and friends): branches, s_endpgm, s_barrier, s_waitcnt,
s_nop, priority/sleep hints, and the MODE register (s_setreg / s_getreg).

``s_waitcnt`` is where memory results arrive: loads complete in issue order per counter
(vmcnt: vector memory incl. buffer->LDS DMA; lgkmcnt: LDS, GDS and scalar memory).
Scalar loads return out of order, so they are complete only at ``lgkmcnt(0)``.
"""
from __future__ import annotations

import re

import numpy as np

from verifiers.gfx950.emulator.operands import VCC
from verifiers.gfx950.emulator.ops import batched as B
from verifiers.gfx950.emulator.ops.batched import register_hints
from verifiers.gfx950.emulator.ops.ds import dma_landing
from verifiers.gfx950.emulator.ops.registry import op

HW_REG_MODE = 1


def branch(w, ins) -> None:  # noqa: ANN001
    if ins.target is None:
        raise w.ctx.error(ins, "branch target is not an instruction of this kernel")
    if ins.target <= w.pc - 1:
        w.ctx.backward_branch(w, ins)
    w.pc = ins.target


@op("s_branch")
def _branch(w, ins):  # noqa: ANN001
    branch(w, ins)


def _cond(name: str, test):  # noqa: ANN001
    def h(w, ins):  # noqa: ANN001
        taken, poisoned = test(w)
        if poisoned:
            w.ctx.hazards.add("poison_branch", w, ins, "branch condition computed from an uninitialised value")
        if taken:
            branch(w, ins)

    op(name)(h)


def _vcc(w):  # noqa: ANN001
    return (w.s[VCC] | w.s[VCC + 1] << 32) & w.exec_bits, bool(w.sp[VCC] or w.sp[VCC + 1])


_cond("s_cbranch_scc0", lambda w: (w.scc == 0, w.scc_poison))
_cond("s_cbranch_scc1", lambda w: (w.scc == 1, w.scc_poison))
_cond("s_cbranch_vccz", lambda w: (_vcc(w)[0] == 0, _vcc(w)[1]))
_cond("s_cbranch_vccnz", lambda w: (_vcc(w)[0] != 0, _vcc(w)[1]))
_cond("s_cbranch_execz", lambda w: (w.exec_bits == 0, False))
_cond("s_cbranch_execnz", lambda w: (w.exec_bits != 0, False))


@op("s_endpgm")
def _endpgm(w, ins):  # noqa: ANN001
    complete(w, 0, 0)
    w.done = True


@op("s_barrier")
def _barrier(w, ins):  # noqa: ANN001
    w.at_barrier = True


@op("s_nop", "s_setprio", "s_sleep", "s_icache_inv", "s_dcache_inv", "s_dcache_wb", "buffer_wbl2", "buffer_inv",
    "buffer_wbinvl1", "buffer_wbinvl1_vol", "s_ttracedata", "s_set_gpr_idx_off")
def _hint(w, ins):  # noqa: ANN001
    """No architectural effect the emulator models (timing, caches, priorities)."""


register_hints(_hint, ("s_nop", "s_setprio", "s_sleep"))


def decode_waitcnt(simm16: int) -> tuple[int, int, int]:
    """(vmcnt, expcnt, lgkmcnt) from a gfx9 s_waitcnt immediate."""
    vm = (simm16 & 0xF) | ((simm16 >> 14) & 0x3) << 4
    return vm, (simm16 >> 4) & 0x7, (simm16 >> 8) & 0xF


@op("s_waitcnt")
def _waitcnt(w, ins):  # noqa: ANN001
    vm, _exp, lgkm = decode_waitcnt(ins.words[0] & 0xFFFF)
    complete(w, vm, lgkm)


def complete(w, vm: int | None, lgkm: int | None) -> None:  # noqa: ANN001
    """Land the outstanding operations that a wait for (vm, lgkm) guarantees."""
    for p in due(w, vm, lgkm):
        land(w, p)


def due(w, vm: int | None, lgkm: int | None) -> list:  # noqa: ANN001
    """Take the outstanding operations a wait for (vm, lgkm) completes off ``w.pending``, oldest first."""
    if not w.pending:
        return []
    done = []
    if vm is not None:
        vms = [p for p in w.pending if p.counter == "vm"]
        done += vms[: max(0, len(vms) - vm)]
    if lgkm is not None:
        lg = [p for p in w.pending if p.counter == "lgkm"]
        if lgkm == 0:
            done += lg
        else:
            excess = len(lg) - lgkm
            for p in lg:  # in-order LDS ops older than the last `lgkm` complete
                if excess <= 0:
                    break
                if p.smem:
                    break  # an outstanding scalar load may be the one still in flight
                done.append(p)
                excess -= 1
    if not done:
        return []
    ids = {id(p) for p in done}
    order = [p for p in w.pending if id(p) in ids]
    w.pending = [p for p in w.pending if id(p) not in ids]
    return order


def _waitcnt_batched(waves, ins) -> bool:  # noqa: ANN001
    """``s_waitcnt`` for many waves: whole-register, all-lane loads landing into the same
    registers in several waves are copied into the batch's register file at once."""
    vm, _exp, lgkm = decode_waitcnt(ins.words[0] & 0xFFFF)
    b = waves[0].batch
    if _uniform_wait(waves, vm, lgkm):
        return True
    by_regs: dict[tuple, list] = {}
    lots: dict[int, tuple] = {}
    for w in waves:
        if not w.pending:
            continue
        done = due(w, vm, lgkm)
        seen: set = set()
        simple = True
        for p in done:
            if p.lds_addr is not None or (p.sregs and p.vregs):
                simple = False
                break
            if not p.vregs:
                continue  # a store or LDS write (nothing lands), a scalar load (SGPRs only: below)
            if p.vbyte_mask is not None or not (p.lot is not None or p.vmask.all()) or not seen.isdisjoint(p.vregs):
                simple = False
                break
            seen.update(p.vregs)
        if not simple:  # overlapping or partial landings: in order, per wave
            for p in done:
                land(w, p)
            continue
        pv = w.pending_v
        for p in done:
            if not p.vregs:
                if p.sregs:
                    land(w, p)
                continue
            for r in p.vregs:
                if pv.get(r) is p:
                    del pv[r]
            if p.lot is not None:  # issued for many waves at once: landed together below
                got = lots.get(id(p.lot))
                if got is None:
                    got = lots[id(p.lot)] = (p.lot, [])
                got[1].append(p.lot.j(w))
            else:
                by_regs.setdefault(p.vregs, []).append((w.slot, p))
    for lot, js in lots.values():  # a wave's landings here are disjoint registers: any order
        lot.land(b, js)
    for regs, items in by_regs.items():
        r0, n = regs[0], len(regs)
        rows = [slot for slot, _ in items]
        b.v[rows, r0 : r0 + n] = np.stack([p.vdata for _, p in items])
        b.vp[rows, r0 : r0 + n] = np.stack([p.vpoison for _, p in items])
    return True


def _uniform_wait(waves, vm: int, lgkm: int) -> bool:  # noqa: ANN001
    """The common lockstep case, done once for all: every wave's queue holds the same
    operations (shared batched-issue records; in the same places, each wave's own scalar
    loads), so the same positions complete everywhere (``due`` reads only the counters and
    the order); each completed vector load is a ``Lot`` of exactly these waves and lands
    with one copy, each scalar load lands per wave. False (nothing done) when the case is
    not that."""
    ref = waves[0].pending
    n = len(ref)
    for w in waves:
        q = w.pending
        if q != ref and (len(q) != n or not all(a is b or _scalar_twins(a, b) for a, b in zip(q, ref))):
            return False  # ``Pending`` compares by identity: ``!=`` is a C-level scan
    if not n:
        return True
    probe = _Queue(list(ref))  # ``due`` on a copy: nothing changes unless the case holds
    done = due(probe, vm, lgkm)
    if not done:
        return True
    for p in done:
        if p.lds_addr is not None:
            if not isinstance(p.lot, B.DmaLot) or p.lot.size != len(waves):
                return False  # a wave's own DMA record (issued per wave): landed per wave
        elif p.vregs and (p.sregs or p.lot is None or p.lot.size != len(waves)):
            return False
    dma = [p for p in done if p.lds_addr is not None]
    land_dma = dma_landing(dma) if dma else None
    if dma and land_dma is None:
        return False
    ids = {id(p) for p in done}
    keep = [i for i, p in enumerate(ref) if id(p) not in ids]
    scalar = [i for i, p in enumerate(ref) if id(p) in ids and p.sregs]  # each wave's own record there
    for w in waves:
        q = w.pending
        for i in scalar:
            land(w, q[i])
        w.pending = [q[i] for i in keep]
    b = waves[0].batch
    later = {r for i in keep for r in ref[i].vregs}  # registers a still-outstanding load will fill
    mine = []  # registers whose in-flight entry is a landing record in every wave: bulk removal
    for p in done:
        for r in p.vregs:
            if r in later:  # a newer load into r may be the entry: per wave, as ``land`` does
                for w in waves:
                    if w.pending_v.get(r) is p:
                        del w.pending_v[r]
            else:
                mine.append(r)
    if mine:
        counts, pop = b.inflight_v, dict.pop  # the plain dict's pop: counted here, exactly
        for r in dict.fromkeys(mine):
            gone = 0
            for w in waves:
                if pop(w.pending_v, r, None) is not None:
                    gone += 1
            counts[r] -= gone
    for p in done:
        if p.vregs:
            p.lot.land(b)
    if land_dma is not None:
        land_dma()
    return True


def _scalar_twins(a, b) -> bool:  # noqa: ANN001
    """Two waves' own scalar-load records in the same queue place: ``due`` treats them alike."""
    return (bool(a.sregs) and bool(b.sregs) and not a.vregs and not b.vregs and a.lds_addr is None
            and b.lds_addr is None and a.counter == b.counter and a.smem == b.smem)


class _Queue:
    """Stands in for a wave in ``due`` (which reads and replaces ``pending`` only)."""

    def __init__(self, pending: list) -> None:
        self.pending = pending


B.batched("s_waitcnt", _waitcnt, _waitcnt_batched)


def land(w, p) -> None:  # noqa: ANN001
    if p.vregs and p.vbyte_mask is None and p.vmask.all():  # whole registers, every lane: one copy
        r0 = p.vregs[0]
        n = len(p.vregs)
        for r in p.vregs:
            if w.pending_v.get(r) is p:
                del w.pending_v[r]
        vdata, vpoison = (p.vdata, p.vpoison) if p.lot is None else p.lot.row(w)  # a batched issue: w's row
        w.v[r0 : r0 + n] = vdata
        w.vp[r0 : r0 + n] = vpoison
    elif p.vregs:
        for k, r in enumerate(p.vregs):
            if w.pending_v.get(r) is p:
                del w.pending_v[r]
            keep = p.vbyte_mask[k] if p.vbyte_mask is not None else 0xFFFFFFFF
            m = p.vmask
            if keep == 0xFFFFFFFF:
                np.copyto(w.v[r], p.vdata[k], where=m)
                np.copyto(w.vp[r], p.vpoison[k], where=m)
            else:  # D16: only the written half (and its poison bits) lands
                keepv = np.uint32(keep)
                merged = (w.v[r] & ~keepv) | (p.vdata[k] & keepv)
                pbits = np.uint8(0x3 if keep == 0xFFFF else 0xC)
                mp = (w.vp[r] & ~pbits) | (p.vpoison[k] & pbits)
                np.copyto(w.v[r], merged, where=m)
                np.copyto(w.vp[r], mp, where=m)
    if p.sregs:
        for k, r in enumerate(p.sregs):
            if w.pending_s.get(r) is p:
                del w.pending_s[r]
            w.swrite_index(r, p.sdata[k])
    if p.lds_addr is not None:
        w.ctx.lds_dma_land(w, p)


def _hwreg(raw: str):
    m = re.search(r"hwreg\((\w+)(?:,\s*(\d+),\s*(\d+))?\)", raw)
    if not m:
        return None
    name, off, size = m.group(1), int(m.group(2) or 0), int(m.group(3) or 32)
    return name, off, size


@op("s_setreg_imm32_b32", "s_setreg_b32")
def _setreg(w, ins):  # noqa: ANN001
    simm = ins.words[0] & 0xFFFF
    reg_id, offset, size = simm & 0x3F, (simm >> 6) & 0x1F, ((simm >> 11) & 0x1F) + 1
    if reg_id != HW_REG_MODE:
        raise w.ctx.unimplemented(ins, f"s_setreg of hardware register {reg_id} (only MODE is modelled)")
    if ins.mnemonic == "s_setreg_imm32_b32":
        value = ins.words[1]
    else:
        sreg = re.search(r",\s*(s\d+)\s*$", ins.modifiers.get("raw", ""))
        if not sreg:
            raise w.ctx.unimplemented(ins, "s_setreg_b32 source operand")
        value = w.s[int(sreg.group(1)[1:])]
    mask = ((1 << size) - 1) << offset
    w.mode = (w.mode & ~mask) | ((value << offset) & mask)


@op("s_getreg_b32")
def _getreg(w, ins):  # noqa: ANN001
    simm = ins.words[0] & 0xFFFF
    reg_id, offset, size = simm & 0x3F, (simm >> 6) & 0x1F, ((simm >> 11) & 0x1F) + 1
    if reg_id != HW_REG_MODE:
        raise w.ctx.unimplemented(ins, f"s_getreg of hardware register {reg_id} (only MODE is modelled)")
    dst = re.match(r"\s*s(\d+)", ins.modifiers.get("raw", ""))
    if not dst:
        raise w.ctx.unimplemented(ins, "s_getreg_b32 destination")
    w.swrite_index(int(dst.group(1)), (w.mode >> offset) & ((1 << size) - 1))

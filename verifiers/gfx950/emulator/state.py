"""Per-wave architectural state and operand access.

A wave holds 128 SGPR dwords (Python ints; named registers at their hardware indices,
see ``operands``), 512 x 64 VGPR/AccVGPR dwords (numpy), SCC, the MODE register, and the
loads it has in flight. Every register dword carries a 4-bit poison mask (one bit per
byte): registers start poisoned, results of poisoned inputs are poisoned, and a
register whose load has not been waited for reads as poison (and is reported).

Operand reads go through ``sread`` (scalar) and ``vread`` (per lane); writes through
``swrite`` and ``vwrite`` (exec-masked). Constants are materialised here according to
the operand type the instruction declares: ``'b32'`` integer bits, ``'f32'``, ``'f16'``,
``'f64'``, ``'b64'``/``'i64'`` 64-bit integers.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from verifiers.gfx950.emulator.errors import MemoryAccessError
from verifiers.gfx950.emulator.operands import (
    AGPR_BASE,
    EXEC,
    INV_2PI,
    M0,
    SGPR_FILE,
    VCC,
    VGPR_FILE,
    Const,
    Reg,
    Special,
)

LANES = 64
ALL_LANES = (1 << LANES) - 1
POISON = np.uint8(0xF)
F32_SIGN = np.uint32(0x80000000)


@dataclass(eq=False)  # identity: a record may stand in several waves' queues (``ops.batched.Lot``)
class Pending:
    """One outstanding memory operation (counted by vmcnt or lgkmcnt)."""

    counter: str  # 'vm' | 'lgkm'
    smem: bool = False  # scalar loads return out of order: complete only at lgkmcnt(0)
    vregs: tuple[int, ...] = ()
    sregs: tuple[int, ...] = ()
    vdata: np.ndarray | None = None  # [len(vregs), 64] uint32
    vpoison: np.ndarray | None = None  # [len(vregs), 64] uint8
    vmask: np.ndarray | None = None  # lanes written
    vbyte_mask: np.ndarray | None = None  # [len(vregs)] uint32 mask of bits written (d16 loads)
    sdata: tuple[int, ...] = ()
    lds_addr: np.ndarray | None = None  # buffer->LDS DMA: byte addresses and bytes
    lds_bytes: np.ndarray | None = None
    issue: str = ""
    #: issued by a batched handler for several waves at once (``ops.batched.Lot``): this
    #: wave's data is row ``j`` of the lot's, so a wait that lands them all copies once
    lot: object = None
    j: int = 0


class InFlight(dict):
    """A wave's registers with a load in flight (register -> its ``Pending``) that also keeps
    ``counts[r]``: how many waves of its lockstep batch have ``r`` in flight, so a batched
    handler sees in O(registers) that no wave waits on its registers (``ops.batched.quiet``).
    Only item assignment, ``del`` and ``update`` change it (the rest would skip the counts)."""

    __slots__ = ("counts",)

    def __init__(self, counts: dict[int, int]) -> None:
        super().__init__()
        self.counts = counts

    def __setitem__(self, r: int, p: Pending) -> None:
        if r not in self:
            self.counts[r] = self.counts.get(r, 0) + 1
        super().__setitem__(r, p)

    def __delitem__(self, r: int) -> None:
        super().__delitem__(r)
        self.counts[r] -= 1

    def update(self, other: dict[int, Pending]) -> None:  # type: ignore[override]
        for r, p in other.items():
            self[r] = p

    def _uncounted(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise NotImplementedError("InFlight changes only by item assignment, del and update (the batch counts)")

    pop = popitem = clear = setdefault = __ior__ = _uncounted


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f64_bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def const_bits(c: Const, ftype: str) -> int:
    """The bit pattern a constant operand has for an operand of type ``ftype``."""
    wide = ftype in ("f64", "b64", "i64", "u64")
    if c.kind == "float":
        if c.text.lstrip("-") == "0.15915494":
            key = "f64" if wide else ("f16" if ftype in ("f16", "b16") else "f32")
            return INV_2PI[key]
        if ftype in ("f16", "b16"):
            return int(np.float16(c.value).view(np.uint16))
        if ftype == "bf16":
            return f32_bits(c.value) >> 16
        return f64_bits(c.value) if wide else f32_bits(c.value)
    v = int(c.value)
    if wide:
        if c.literal and ftype == "f64":
            return (v & 0xFFFFFFFF) << 32  # a 32-bit literal is the high half of an f64
        if c.literal and ftype in ("b64", "u64") and v >= 0:
            return v & 0xFFFFFFFF  # zero-extended for unsigned
        return v & 0xFFFFFFFFFFFFFFFF  # sign-extended
    return v & 0xFFFFFFFF


class Wave:
    def __init__(self, group, index: int, active_lanes: int, ctx, regs=None) -> None:  # noqa: ANN001
        """``regs``: (batch, slot) when the wave's vector registers live in a ``lockstep.Batch``
        (row ``slot`` of its register arrays, written in place); else the wave owns them."""
        self.group = group
        self.index = index
        self.ctx = ctx
        self.s = [0] * SGPR_FILE
        self.sp = [0xF] * SGPR_FILE
        if regs is None:
            self.batch, self.slot = None, 0
            self.v = np.zeros((VGPR_FILE, LANES), dtype=np.uint32)
            self.vp = np.full((VGPR_FILE, LANES), POISON, dtype=np.uint8)
        else:
            self.batch, self.slot = regs
            self.v, self.vp = self.batch.v[self.slot], self.batch.vp[self.slot]
        self.scc = 0
        self.scc_poison = False
        self.mode = 0
        self.pc = 0
        self.done = False
        self.at_barrier = False
        self.executed = 0
        self.pending: list[Pending] = []
        if self.batch is None:
            self.pending_v: dict[int, Pending] = {}
            self.pending_s: dict[int, Pending] = {}
        else:
            self.pending_v = InFlight(self.batch.inflight_v)
            self.pending_s = InFlight(self.batch.inflight_s)
        self.set_exec(active_lanes)
        self.launch_lanes = active_lanes
        self._private = np.zeros((LANES, 0), dtype=np.uint8)
        self.private_poison = np.zeros((LANES, 0), dtype=bool)

    def private(self, nbytes: int, ins) -> np.ndarray:  # noqa: ANN001
        """Per-lane scratch (private segment) bytes, grown on demand, poisoned when new."""
        limit = self.ctx.private_bytes
        if nbytes > limit:

            raise MemoryAccessError(f"kernel {self.ctx.kernel_name!r}: {ins.text}: scratch access up to byte {nbytes} "
                                    f"exceeds the kernel's {limit}-byte private segment")
        have = self._private.shape[1]
        if nbytes > have:
            grow = nbytes - have
            self._private = np.concatenate([self._private, np.zeros((LANES, grow), dtype=np.uint8)], axis=1)
            self.private_poison = np.concatenate([self.private_poison, np.ones((LANES, grow), dtype=bool)], axis=1)
        return self._private

    # ------------------------------------------------------------------ exec
    def set_exec(self, bits: int) -> None:
        self.s[EXEC] = bits & 0xFFFFFFFF
        self.s[EXEC + 1] = (bits >> 32) & 0xFFFFFFFF
        self.sp[EXEC] = self.sp[EXEC + 1] = 0
        self._refresh_exec()

    def _refresh_exec(self) -> None:
        bits = self.s[EXEC] | (self.s[EXEC + 1] << 32)
        self.exec_bits = bits
        self.exec = _MASKS.get(bits)
        if self.exec is None:
            self.exec = ((bits >> np.arange(LANES, dtype=np.uint64)) & np.uint64(1)).astype(bool)
        self.exec_all = bits == ALL_LANES
        self.exec_none = bits == 0

    @property
    def m0(self) -> int:
        return self.s[M0]

    def mask_of(self, bits: int) -> np.ndarray:
        m = _MASKS.get(bits)
        if m is None:
            m = ((bits >> np.arange(LANES, dtype=np.uint64)) & np.uint64(1)).astype(bool)
        return m

    # ------------------------------------------------------------------ scalar operands
    def sread(self, op, ins, ftype: str = "b32") -> int:  # noqa: ANN001
        """A scalar operand's value: 32 bits, or 64 for ftype b64/i64/u64/f64."""
        wide = ftype in ("b64", "i64", "u64", "f64")
        if isinstance(op, Reg):
            if op.file != "s":
                raise self.ctx.unimplemented(ins, f"scalar operand {op.text!r} is not an SGPR")
            i = op.index
            if self.pending_s and (i in self.pending_s or (wide and i + 1 in self.pending_s)):
                self.ctx.hazards.add("read_before_wait", self, ins, f"{op.text} read before the s_waitcnt covering its load")
            v = self.s[i] | (self.s[i + 1] << 32) if wide else self.s[i]
            return v
        if isinstance(op, Const):
            return const_bits(op, ftype)
        if isinstance(op, Special) and op.name == "scc":
            return self.scc
        raise self.ctx.unimplemented(ins, f"scalar operand {getattr(op, 'name', op)!r}")

    def spoison(self, op, wide: bool = False) -> bool:  # noqa: ANN001
        if isinstance(op, Reg) and op.file == "s":
            i = op.index
            bad = bool(self.sp[i]) or (wide and bool(self.sp[i + 1]))
            if self.pending_s and (i in self.pending_s or (wide and i + 1 in self.pending_s)):
                bad = True
            return bad
        return False

    def swrite(self, op, value: int, poison: bool = False, wide: bool = False) -> None:  # noqa: ANN001
        i = op.index
        p = 0xF if poison else 0
        self.s[i] = value & 0xFFFFFFFF
        self.sp[i] = p
        if wide or op.count == 2:
            self.s[i + 1] = (value >> 32) & 0xFFFFFFFF
            self.sp[i + 1] = p
        if self.pending_s and i in self.pending_s:
            self.ctx.hazards.add("write_before_wait", self, self.ctx.current, f"s{i} written while a load into it is outstanding")
        if i >= EXEC - 1:
            self._refresh_exec()

    def swrite_index(self, i: int, value: int, poison: bool = False) -> None:
        self.s[i] = value & 0xFFFFFFFF
        self.sp[i] = 0xF if poison else 0
        if i >= EXEC:
            self._refresh_exec()

    # ------------------------------------------------------------------ vector operands
    def vread(self, op, ins, ftype: str = "b32", dwords: int = 1):  # noqa: ANN001
        """Per-lane operand: (values uint32 [dwords, 64], poison uint8 [64] OR over dwords/bytes).

        SGPRs and constants are broadcast; neg/abs modifiers apply for float types."""
        if isinstance(op, Reg):
            i = op.index
            if op.file == "v":
                vals = self.v[i : i + dwords]
                pois = self.vp[i : i + dwords]
                if self.pending_v:
                    pend = [r for r in range(i, i + dwords) if r in self.pending_v]
                    if pend:
                        self.ctx.hazards.add("read_before_wait", self, ins,
                                             f"{_vname(pend[0])} read before the s_waitcnt covering its load")
                        pois = np.full_like(pois, POISON)
                p = pois[0] if dwords == 1 else np.bitwise_or.reduce(pois, axis=0)
            else:
                sv = [self.s[i + k] for k in range(dwords)]
                vals = np.array(sv, dtype=np.uint32)[:, None].repeat(LANES, axis=1)
                bad = any(self.sp[i + k] for k in range(dwords))
                if self.pending_s and any(i + k in self.pending_s for k in range(dwords)):
                    self.ctx.hazards.add("read_before_wait", self, ins, f"s{i} read before the s_waitcnt covering its load")
                    bad = True
                p = _POISON_ROW if bad else _CLEAN_ROW
        elif isinstance(op, Const):
            bits = const_bits(op, ftype if dwords == 1 else ("f64" if ftype == "f64" else "b64"))
            sv = [(bits >> (32 * k)) & 0xFFFFFFFF for k in range(dwords)]
            vals = np.array(sv, dtype=np.uint32)[:, None].repeat(LANES, axis=1)
            p = _CLEAN_ROW
        else:
            raise self.ctx.unimplemented(ins, f"vector operand {getattr(op, 'name', op)!r}")
        if op.neg or op.abs:
            vals = _float_mods(vals, op, ftype)
        return vals, p

    def vread_parts(self, op, ins, ftype: str = "b32", dwords: int = 1):  # noqa: ANN001
        """Like ``vread`` but poison per dword ([dwords, 64]): for operands whose dwords are
        used separately (packed math with op_sel, MFMA accumulators)."""
        vals, p = self.vread(op, ins, ftype, dwords)
        if isinstance(op, Reg) and op.file == "v":
            pois = self.vp[op.index : op.index + dwords].copy()
            if self.pending_v and any(r in self.pending_v for r in range(op.index, op.index + dwords)):
                pois[:] = POISON
            return vals, pois
        if isinstance(op, Reg) and dwords > 1:
            # An SGPR pair source of a packed-f32 VOP3P op (s[n:n+1]) is read as two dwords that
            # op_sel / op_sel_hi pick from separately (LLVM broadcasts s[n] with op_sel_hi 0 and
            # leaves s[n+1] unwritten): each dword keeps its own poison, as a VGPR pair's does.
            rows = [POISON if self.sp[op.index + k] or (self.pending_s and op.index + k in self.pending_s) else 0
                    for k in range(dwords)]
            return vals, np.array(rows, dtype=np.uint8)[:, None].repeat(LANES, axis=1)
        return vals, np.broadcast_to(p, (dwords, LANES))

    def vwrite(self, op_or_index, values: np.ndarray, poison: np.ndarray, mask: np.ndarray | None = None) -> None:  # noqa: ANN001
        """Write per-lane dwords (values [n, 64] or [64]) where exec (or ``mask``) is set."""
        i = op_or_index if isinstance(op_or_index, int) else op_or_index.index
        vals = values if values.ndim == 2 else values[None, :]
        n = vals.shape[0]
        pois = poison if poison.ndim == 2 else np.broadcast_to(poison, (n, LANES))
        if self.pending_v:
            pend = [r for r in range(i, i + n) if r in self.pending_v]
            if pend:
                self.ctx.hazards.add("write_before_wait", self, self.ctx.current,
                                     f"{_vname(pend[0])} written while a load into it is outstanding")
        m = self.exec if mask is None else mask
        if m is self.exec and self.exec_all:
            self.v[i : i + n] = vals
            self.vp[i : i + n] = pois
        else:
            np.copyto(self.v[i : i + n], vals, where=m)
            np.copyto(self.vp[i : i + n], pois, where=m)


def _vname(i: int) -> str:
    return f"a{i - AGPR_BASE}" if i >= AGPR_BASE else f"v{i}"


def _float_mods(vals: np.ndarray, op, ftype: str) -> np.ndarray:  # noqa: ANN001
    vals = vals.copy()
    if ftype == "f32":
        if op.abs:
            vals &= np.uint32(0x7FFFFFFF)
        if op.neg:
            vals ^= F32_SIGN
    elif ftype == "f64":
        if op.abs:
            vals[1] &= np.uint32(0x7FFFFFFF)
        if op.neg:
            vals[1] ^= F32_SIGN
    elif ftype in ("f16", "bf16"):
        if op.abs:
            vals &= np.uint32(0x7FFF7FFF)
        if op.neg:
            vals ^= np.uint32(0x80008000)
    else:
        raise ValueError(f"neg/abs on a {ftype} operand")
    return vals


_CLEAN_ROW = np.zeros(LANES, dtype=np.uint8)
_POISON_ROW = np.full(LANES, POISON, dtype=np.uint8)
_CLEAN_ROW.setflags(write=False)
_POISON_ROW.setflags(write=False)
_MASKS: dict[int, np.ndarray] = {}
for _bits in (ALL_LANES, 0, (1 << 32) - 1, ALL_LANES ^ ((1 << 32) - 1)):
    _m = ((_bits >> np.arange(LANES, dtype=np.uint64)) & np.uint64(1)).astype(bool)
    _m.setflags(write=False)
    _MASKS[_bits] = _m
VCC_INDEX = VCC

"""Batched handlers: one instruction for several waves of a ``lockstep.Batch`` at once.

A batched handler is ``fn(waves, ins) -> bool`` over waves at the same PC; it computes what
the per-wave handler computes, on ``[waves, 64]`` arrays, and returns False (the executor
then runs the per-wave handler for each wave) whenever the case needs the per-wave
bookkeeping: a register of the instruction with a load in flight in any wave (the
read/write-before-wait hazards), an operand form it does not gather. Poison propagates as
in ``ops.common`` (any poisoned input byte poisons the result dword).

``batched_for(mnemonic, handler)`` binds one only when ``handler`` is the per-wave handler
it mirrors, so a test that swaps a handler for a wrong variant runs that variant.
Elementwise ALU ops (``PURE``) are batched when their function gives row by row the same
result on a ``[2, 64]`` probe as on each row alone (some are written for one lane row).
"""
from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter

import numpy as np

from verifiers.gfx950.emulator.operands import EXEC, Const, Reg
from verifiers.gfx950.emulator.ops.common import PURE, bits, f32, output_mods
from verifiers.gfx950.emulator.ops.registry import ORIGINAL
from verifiers.gfx950.emulator.state import LANES, POISON, Pending, _float_mods, const_bits

U32 = np.uint32
WIDE = frozenset({"b64", "f64", "u64", "i64"})

#: mnemonic -> (per-wave handler it mirrors, batched handler); filled by the op families
BATCHED: dict[str, tuple[Callable, Callable]] = {}


def batched(name: str, per_wave: Callable, fn: Callable) -> None:
    BATCHED[name] = (per_wave, fn)


# ------------------------------------------------------------------ gather / scatter
def registers_of(ins) -> tuple[frozenset, frozenset]:  # noqa: ANN001
    """(VGPR indices, SGPR indices) the instruction names (for the in-flight-load check)."""
    cached = getattr(ins, "_regs", None)
    if cached is None:
        v, s = set(), set()
        for o in ins.operands:
            if isinstance(o, Reg):
                (v if o.file == "v" else s).update(range(o.index, o.index + max(o.count, 1)))
        cached = ins._regs = (frozenset(v), frozenset(s))
    return cached


def quiet(waves, ins, extra_v: range | None = None) -> bool:  # noqa: ANN001
    """True when no wave has a load in flight into a register the instruction touches."""
    vr, sr = registers_of(ins)
    if extra_v is not None:
        vr = vr | frozenset(extra_v)
    b = waves[0].batch
    cv, cs = b.inflight_v, b.inflight_s
    if not any(cv.get(r) for r in vr) and not any(cs.get(r) for r in sr):
        return True  # no wave of the batch has a load in flight into these registers
    for w in waves:  # a dict's keys view iterates the (small) set side
        if w.pending_v and not w.pending_v.keys().isdisjoint(vr):
            return False
        if w.pending_s and not w.pending_s.keys().isdisjoint(sr):
            return False
    return True


def slots(waves):  # noqa: ANN001, ANN201
    """Row index of the waves in their batch: a slice when they are all of it, in order."""
    b = waves[0].batch
    if len(waves) == len(b.waves):
        return slice(None)
    return [w.slot for w in waves]


def src(waves, rows, op, ftype: str = "b32", dwords: int = 1):  # noqa: ANN001, ANN201
    """(values, poison) of an operand for every wave: [W, 64] (or [W, dwords, 64]); SGPRs and
    constants broadcast ([W, 1] / [1, 1]). None for an operand form not gathered here."""
    b = waves[0].batch
    if isinstance(op, Reg):
        i = op.index
        if op.file == "v":
            if dwords == 1:
                vals, pois = b.v[rows, i], b.vp[rows, i]
            else:
                vals, pois = b.v[rows, i : i + dwords], b.vp[rows, i : i + dwords]
        else:
            if dwords == 1:
                vals = np.array([w.s[i] for w in waves], dtype=U32)[:, None]
                pois = np.array([w.sp[i] for w in waves], dtype=np.uint8)[:, None]
            else:
                vals = np.array([w.s[i : i + dwords] for w in waves], dtype=U32)[:, :, None]
                pois = np.array([w.sp[i : i + dwords] for w in waves], dtype=np.uint8)[:, :, None]
    elif isinstance(op, Const):
        c = const_bits(op, ftype if dwords == 1 else ("f64" if ftype == "f64" else "b64"))
        if dwords == 1:
            vals = np.full((1, 1), c, dtype=U32)
        else:
            vals = np.array([(c >> (32 * k)) & 0xFFFFFFFF for k in range(dwords)], dtype=U32)[None, :, None]
        pois = np.zeros(vals.shape, dtype=np.uint8)
    else:
        return None
    if op.neg or op.abs:
        if dwords != 1:
            return None
        vals = _float_mods(vals, op, ftype)
    return vals, pois


def sgprs(waves, i: int, n: int = 1) -> tuple[np.ndarray, bool]:  # noqa: ANN001
    """(values int64 [W, n], whether any is poisoned) of SGPRs ``i .. i+n-1`` in every wave,
    gathered at C speed. For registers the instruction names after ``quiet`` passed (no load in
    flight into them: the per-wave read's hazard check has nothing to report)."""
    get = itemgetter(*range(i, i + n))
    if n == 1:
        vals = np.fromiter(map(get, (w.s for w in waves)), dtype=np.int64, count=len(waves))[:, None]
        return vals, any(map(get, (w.sp for w in waves)))
    vals = np.array(list(map(get, (w.s for w in waves))), dtype=np.int64)
    return vals, any(map(any, map(get, (w.sp for w in waves))))


def exec_rows(waves) -> np.ndarray | None:  # noqa: ANN001
    """[W, 64] active lanes, or None when every wave runs all 64 lanes."""
    if all(w.exec_all for w in waves):
        return None
    return np.stack([w.exec for w in waves])


def store(waves, rows, dst: Reg, vals: np.ndarray, pois: np.ndarray, dwords: int = 1) -> None:  # noqa: ANN001
    """Write ``vals`` [W, 64] (or [W, dwords, 64]) into ``dst`` where each wave's EXEC is set."""
    b = waves[0].batch
    i = dst.index
    sel = (rows, i) if dwords == 1 else (rows, slice(i, i + dwords))
    m = exec_rows(waves)
    shape = (len(waves), LANES) if dwords == 1 else (len(waves), dwords, LANES)
    vals = np.broadcast_to(vals, shape)
    pois = np.broadcast_to(pois, shape)
    if m is None:
        b.v[sel] = vals
        b.vp[sel] = pois
    else:
        if dwords != 1:
            m = m[:, None, :]
        b.v[sel] = np.where(m, vals, b.v[sel])
        b.vp[sel] = np.where(m, pois, b.vp[sel])


def full_poison(p: np.ndarray) -> np.ndarray:
    return np.where(p != 0, POISON, np.uint8(0))


# ------------------------------------------------------------------ loads issued for many waves
_ALL_LANES = np.ones(LANES, dtype=bool)
_ALL_LANES.setflags(write=False)


class Lot:
    """The registers one batched load fills in several waves: ``vdata`` / ``vpoison``
    [W, dwords, 64], row ``j`` for ``waves[j]`` (batch rows ``rows``: a slice or a list).
    One ``Pending`` (``pending``) stands for the load in every one of those waves."""

    __slots__ = ("rows", "regs", "vdata", "vpoison", "size", "pending", "_index")

    def __init__(self, rows, regs: tuple[int, ...], vdata: np.ndarray, vpoison: np.ndarray) -> None:  # noqa: ANN001
        self.rows, self.regs, self.vdata, self.vpoison = rows, regs, vdata, vpoison
        self.size = vdata.shape[0]
        self.pending = None
        self._index = None

    def j(self, w) -> int:  # noqa: ANN001
        """The lot's row of wave ``w``."""
        if isinstance(self.rows, slice):
            return w.slot
        if self._index is None:
            self._index = {slot: j for j, slot in enumerate(self.rows)}
        return self._index[w.slot]

    def row(self, w):  # noqa: ANN001, ANN201
        """(vdata, vpoison) [dwords, 64] of wave ``w``."""
        j = self.j(w)
        return self.vdata[j], self.vpoison[j]

    def land(self, batch, js: list[int] | None = None) -> None:  # noqa: ANN001 - lockstep.Batch
        """Copy rows ``js`` (None: every wave of the lot) into the batch's register file."""
        r0, n = self.regs[0], len(self.regs)
        if js is None or len(js) == self.size:
            rows, data, pois = self.rows, self.vdata, self.vpoison
        else:
            sel = np.asarray(js)
            rows = sel if isinstance(self.rows, slice) else np.asarray(self.rows)[sel]
            data, pois = self.vdata[sel], self.vpoison[sel]
        batch.v[rows, r0 : r0 + n] = data
        batch.vp[rows, r0 : r0 + n] = pois


class DmaLot:
    """One buffer/global->LDS load issued for several waves (``ops.ds.dma_issue_batched``): row
    ``j`` of ``addrs`` [W, 64] (LDS byte addresses), ``raw`` [W, 64, size] (the bytes) and ``key``
    [W, 64 * dwords] (the flat ``LdsBank`` dwords they fill, lane-major) is ``waves[j]``'s."""

    __slots__ = ("waves", "addrs", "raw", "key", "size", "_index")

    def __init__(self, waves, addrs: np.ndarray, raw: np.ndarray, key: np.ndarray) -> None:  # noqa: ANN001
        self.waves, self.addrs, self.raw, self.key = list(waves), addrs, raw, key
        self.size = len(self.waves)
        self._index = None

    def j(self, w) -> int:  # noqa: ANN001
        if self._index is None:
            self._index = {id(x): j for j, x in enumerate(self.waves)}
        return self._index[id(w)]

    def row(self, w):  # noqa: ANN001, ANN201
        """(LDS byte addresses [64], bytes [64, size]) of wave ``w``: its per-wave landing."""
        j = self.j(w)
        return self.addrs[j], self.raw[j]


def issue_loads(waves, rows, counter: str, regs: tuple[int, ...], vdata: np.ndarray, vpoison: np.ndarray,  # noqa: ANN001
                issue: str) -> None:
    """As the per-wave handlers' load issue with every lane active, for ``waves`` (batch rows
    ``rows``) at once: the data in one ``Lot``, one ``Pending`` shared by the waves' queues
    (the hazard and wait bookkeeping stay per wave; ``flow.land`` takes a wave's row)."""
    lot = Lot(rows, regs, vdata, vpoison)
    p = lot.pending = Pending(counter, vregs=regs, vmask=_ALL_LANES, issue=issue, lot=lot)
    fresh = dict.fromkeys(regs, p)
    for w in waves:
        w.pending.append(p)
        dict.update(w.pending_v, fresh)  # counted below, in bulk
    # exact: the caller passed ``quiet``, so none of these waves had a load in flight into ``regs``
    counts = waves[0].batch.inflight_v
    for r in regs:
        counts[r] = counts.get(r, 0) + len(waves)


def issue_marker(waves, counter: str, issue: str) -> None:  # noqa: ANN001
    """A store or LDS write counted by ``counter`` in every wave: one shared ``Pending`` (it
    carries no data, landing it changes nothing)."""
    p = Pending(counter, issue=issue)
    for w in waves:
        w.pending.append(p)


# ------------------------------------------------------------------ elementwise VALU
def _row_consistent(fn, types: tuple[str, ...], is_float: bool) -> bool:  # noqa: ANN001
    rng = np.random.default_rng(0)
    args = [rng.integers(0, 1 << 32, size=(2, LANES), dtype=np.uint64).astype(U32) for _ in types]
    if is_float:  # finite floats: the probe is about shapes, not NaN payloads
        args = [np.where(np.isfinite(a.view(np.float32)), a, U32(0x3F800000)) for a in args]
    conv = [(lambda x, t: x.view(np.float32) if is_float and t == "f32" else x)(a, t) for a, t in zip(args, types)]
    try:
        with np.errstate(all="ignore"):
            whole = np.asarray(fn(*conv))
            rows = [np.asarray(fn(*[c[r] for c in conv])) for r in range(2)]
    except Exception:  # noqa: BLE001 - written for one row only
        return False
    return whole.shape == (2, LANES) and all(
        whole[r].dtype == rows[r].dtype and whole[r].tobytes() == rows[r].tobytes() for r in range(2))


def pure_batched(name: str) -> Callable | None:
    types, fn, is_float = PURE[name]
    if any(t in WIDE for t in types) or not _row_consistent(fn, types, is_float):
        return None

    def h(waves, ins) -> bool:  # noqa: ANN001
        if not quiet(waves, ins):
            return False
        rows = slots(waves)
        vals, pois = [], None
        for k, t in enumerate(types):
            g = src(waves, rows, ins.operands[1 + k], t)
            if g is None:
                return False
            vals.append(f32(g[0]) if is_float and t == "f32" else g[0])
            pois = g[1] if pois is None else pois | g[1]
        with np.errstate(all="ignore"):
            r = fn(*vals)
            r = bits(output_mods(ins, r)) if is_float else np.asarray(r).astype(U32, copy=False)
        store(waves, rows, ins.operands[0], r, full_poison(pois))
        return True

    return h


def _nop(waves, ins) -> bool:  # noqa: ANN001
    return True


def batched_for(mnemonic: str, handler: Callable | None) -> Callable | None:
    """The batched handler of ``mnemonic`` if ``handler`` is the per-wave one it mirrors."""

    base = mnemonic
    entry = BATCHED.get(mnemonic)
    if entry is None:
        for suffix in ("_e32", "_e64"):
            if mnemonic.endswith(suffix):
                base = mnemonic[: -len(suffix)]
        entry = BATCHED.get(base)
        if entry is None and base in PURE and ORIGINAL.get(base) is not None:
            fn = pure_batched(base)
            entry = BATCHED[base] = (ORIGINAL[base], fn) if fn else (None, None)
    if entry is None or entry[1] is None or entry[0] is not handler or ORIGINAL.get(base) is not handler:
        return None
    return entry[1]


def register_hints(hint_handler: Callable, names: tuple[str, ...]) -> None:
    for n in names:
        batched(n, hint_handler, _nop)


def write_masks(waves, op, lanes: np.ndarray, poison: np.ndarray) -> bool:  # noqa: ANN001
    """``common.write_mask`` for every wave: ``lanes`` [W, 64] bool (masked by each wave's EXEC
    here), ``poison`` [W, 64] of the inputs. False (nothing written) for a destination this
    does not handle (EXEC itself, not an SGPR pair)."""

    if not (isinstance(op, Reg) and op.file == "s") or op.index >= EXEC - 1:
        return False
    m = exec_rows(waves)
    if m is not None:
        lanes = lanes & m
        bad = ((poison != 0) & m).any(axis=1)
    else:
        bad = (poison != 0).any(axis=1)
    words = np.packbits(np.ascontiguousarray(np.broadcast_to(lanes, (len(waves), LANES))), axis=1,
                        bitorder="little").view(np.uint64)[:, 0]
    i = op.index
    for w, v, b in zip(waves, words.tolist(), bad.tolist()):
        p = 0xF if b else 0
        w.s[i], w.s[i + 1] = v & 0xFFFFFFFF, v >> 32
        w.sp[i] = w.sp[i + 1] = p
    return True

"""Vector ALU, integer and bitwise (VOP1/VOP2/VOP3 forms), lane moves, VOPC integer compares.

Every handler works on all 64 lanes with numpy and writes only lanes active in EXEC.
Results of poisoned inputs are poisoned (see ``state``); v_cndmask only takes the poison
of the input it selects.
"""
from __future__ import annotations

import numpy as np

from verifiers.gfx950.emulator.operands import EXEC, Reg
from verifiers.gfx950.emulator.ops import batched as B
from verifiers.gfx950.emulator.ops.common import (
    PURE,
    full_poison,
    lanes_to_bits,
    mask_sgpr_pair,
    srcs,
    write,
    write_mask,
)
from verifiers.gfx950.emulator.ops.registry import op
from verifiers.gfx950.emulator.state import LANES

U32 = np.uint32
U64 = np.uint64
M32 = np.uint64(0xFFFFFFFF)
LANE_IDS = np.arange(LANES, dtype=np.uint32)


def _i32(x: np.ndarray) -> np.ndarray:
    return x.view(np.int32)


def _u64(v: np.ndarray) -> np.ndarray:
    """[..., 2, 64] dwords -> uint64 [..., 64]."""
    return v[..., 0, :].astype(U64) | (v[..., 1, :].astype(U64) << U64(32))


def _split64(x: np.ndarray) -> np.ndarray:
    return np.stack([(x & M32).astype(U32), (x >> U64(32)).astype(U32)], axis=-2)


def _valu(name: str, types: tuple[str, ...], fn) -> None:  # noqa: ANN001
    PURE[name] = (types, fn, False)

    def h(w, ins):  # noqa: ANN001
        vals, p = srcs(w, ins, types)
        with np.errstate(over="ignore"):
            r = fn(*vals)
        write(w, ins, r.astype(U32, copy=False), p)

    op(name)(h)


B1, B2, B3 = ("b32",), ("b32", "b32"), ("b32", "b32", "b32")
_valu("v_mov_b32", B1, lambda a: a)
_valu("v_not_b32", B1, lambda a: ~a)
_valu("v_bfrev_b32", B1, lambda a: np.array([int(f"{x:032b}"[::-1], 2) for x in a.tolist()], dtype=U32))
_valu("v_add_u32", B2, lambda a, b: a + b)
_valu("v_sub_u32", B2, lambda a, b: a - b)
_valu("v_subrev_u32", B2, lambda a, b: b - a)
_valu("v_mul_lo_u32", B2, lambda a, b: a * b)
_valu("v_mul_hi_u32", B2, lambda a, b: ((a.astype(U64) * b.astype(U64)) >> U64(32)).astype(U32))
_valu("v_mul_hi_i32", B2, lambda a, b: ((_i32(a).astype(np.int64) * _i32(b).astype(np.int64)) >> 32).astype(np.int64).astype(U32))
_valu("v_mul_u32_u24", B2, lambda a, b: (a & U32(0xFFFFFF)) * (b & U32(0xFFFFFF)))
_valu("v_mul_hi_u32_u24", B2, lambda a, b: (((a & U32(0xFFFFFF)).astype(U64) * (b & U32(0xFFFFFF)).astype(U64)) >> U64(32)).astype(U32))
_valu("v_mul_i32_i24", B2, lambda a, b: (_s24(a) * _s24(b)).astype(U32))
_valu("v_mad_u32_u24", B3, lambda a, b, c: (a & U32(0xFFFFFF)) * (b & U32(0xFFFFFF)) + c)
_valu("v_mad_i32_i24", B3, lambda a, b, c: (_s24(a) * _s24(b) + c.view(np.int32).astype(np.int64)).astype(U32))
_valu("v_and_b32", B2, lambda a, b: a & b)
_valu("v_or_b32", B2, lambda a, b: a | b)
_valu("v_xor_b32", B2, lambda a, b: a ^ b)
_valu("v_xnor_b32", B2, lambda a, b: ~(a ^ b))
_valu("v_lshlrev_b32", B2, lambda s, a: a << (s & U32(31)))
_valu("v_lshrrev_b32", B2, lambda s, a: a >> (s & U32(31)))
_valu("v_ashrrev_i32", B2, lambda s, a: (_i32(a) >> (s & U32(31)).astype(np.int32)).view(U32))
_valu("v_lshlrev_b16", B2, lambda s, a: (a & U32(0xFFFF0000)) | (((a & U32(0xFFFF)) << (s & U32(15))) & U32(0xFFFF)))
_valu("v_min_u32", B2, np.minimum)
_valu("v_max_u32", B2, np.maximum)
_valu("v_min_i32", B2, lambda a, b: np.minimum(_i32(a), _i32(b)).view(U32))
_valu("v_max_i32", B2, lambda a, b: np.maximum(_i32(a), _i32(b)).view(U32))
_valu("v_min3_u32", B3, lambda a, b, c: np.minimum(np.minimum(a, b), c))
_valu("v_max3_u32", B3, lambda a, b, c: np.maximum(np.maximum(a, b), c))
_valu("v_min3_i32", B3, lambda a, b, c: np.minimum(np.minimum(_i32(a), _i32(b)), _i32(c)).view(U32))
_valu("v_max3_i32", B3, lambda a, b, c: np.maximum(np.maximum(_i32(a), _i32(b)), _i32(c)).view(U32))
_valu("v_med3_i32", B3, lambda a, b, c: np.median(np.stack([_i32(a), _i32(b), _i32(c)]), axis=0).astype(np.int32).view(U32))
_valu("v_med3_u32", B3, lambda a, b, c: np.median(np.stack([a, b, c]).astype(np.int64), axis=0).astype(U32))
_valu("v_add3_u32", B3, lambda a, b, c: a + b + c)
_valu("v_xad_u32", B3, lambda a, b, c: (a ^ b) + c)
_valu("v_lshl_add_u32", B3, lambda a, s, c: (a << (s & U32(31))) + c)
_valu("v_add_lshl_u32", B3, lambda a, b, s: (a + b) << (s & U32(31)))
_valu("v_lshl_or_b32", B3, lambda a, s, c: (a << (s & U32(31))) | c)
_valu("v_and_or_b32", B3, lambda a, b, c: (a & b) | c)
_valu("v_or3_b32", B3, lambda a, b, c: a | b | c)
_valu("v_xor3_b32", B3, lambda a, b, c: a ^ b ^ c)
_valu("v_bfi_b32", B3, lambda m, a, b: (m & a) | (~m & b))
_valu("v_bfm_b32", B2, lambda a, b: ((U32(1) << (a & U32(31))) - U32(1)) << (b & U32(31)))
_valu("v_bcnt_u32_b32", B2, lambda a, b: np.array([bin(x).count("1") for x in a.tolist()], dtype=U32) + b)
_valu("v_ffbh_u32", B1, lambda a: np.array([31 - x.bit_length() + 1 if x else 0xFFFFFFFF for x in a.tolist()], dtype=np.int64).astype(U32))
_valu("v_ffbl_b32", B1, lambda a: np.array([(x & -x).bit_length() - 1 if x else 0xFFFFFFFF for x in a.tolist()], dtype=np.int64).astype(U32))
_valu("v_alignbit_b32", B3, lambda a, b, s: (((a.astype(U64) << U64(32)) | b.astype(U64)) >> (s & U32(31)).astype(U64)).astype(U64) & M32)
_valu("v_alignbyte_b32", B3, lambda a, b, s: (((a.astype(U64) << U64(32)) | b.astype(U64)) >> (U64(8) * (s & U32(3)).astype(U64))) & M32)
_valu("v_sad_u32", B3, lambda a, b, c: np.abs(a.astype(np.int64) - b.astype(np.int64)).astype(U32) + c)


def _s24(a: np.ndarray) -> np.ndarray:
    x = (a & U32(0xFFFFFF)).astype(np.int64)
    return np.where(x & 0x800000, x - 0x1000000, x)


def _bfe(signed: bool):
    def f(a, off, width):  # noqa: ANN001
        o = (off & U32(31)).astype(U64)
        wd = (width & U32(31)).astype(U64)
        r = (a.astype(U64) >> o) & ((U64(1) << wd) - U64(1))
        if signed:
            sign = (r >> np.maximum(wd, U64(1)) - U64(1)) & U64(1)
            r = np.where((wd > 0) & (sign == 1), r | ~((U64(1) << wd) - U64(1)), r)
        return np.where(wd == 0, U64(0), r) & M32

    return f


_valu("v_bfe_u32", B3, _bfe(False))
_valu("v_bfe_i32", B3, _bfe(True))


def _perm(a, b, sel):  # noqa: ANN001
    """v_perm_b32: byte select from {a, b} (a the high dword) per selector byte."""
    both = (a.astype(U64) << U64(32)) | b.astype(U64)
    out = np.zeros(LANES, dtype=U32)
    for k in range(4):
        s = ((sel >> U32(8 * k)) & U32(0xFF)).astype(U64)
        byte = ((both >> (U64(8) * np.minimum(s, U64(7)))) & U64(0xFF)).astype(U32)
        sign_src = np.where(s == 8, (b >> U32(15)) & 1, np.where(s == 9, (b >> U32(31)) & 1,
                   np.where(s == 10, (a >> U32(15)) & 1, (a >> U32(31)) & 1)))
        byte = np.where(s >= 12, np.where(s == 12, U32(0), U32(0xFF)), np.where(s >= 8, sign_src * U32(0xFF), byte))
        out |= byte << U32(8 * k)
    return out


_valu("v_perm_b32", B3, _perm)


def _bitop3(width: int):
    def h(w, ins):  # noqa: ANN001
        (a, b, c), p = srcs(w, ins, B3)
        table = int(ins.modifiers.get("bitop3", 0))
        r = np.zeros(LANES, dtype=U32)
        for i in range(8):
            if table >> i & 1:
                ta = a if i & 4 else ~a
                tb = b if i & 2 else ~b
                tc = c if i & 1 else ~c
                r |= ta & tb & tc
        if width == 16:
            old = w.v[ins.operands[0].index]
            r = (old & U32(0xFFFF0000)) | (r & U32(0xFFFF))
        write(w, ins, r, p)

    return h


def _bitop3_batched(waves, ins) -> bool:  # noqa: ANN001 - v_bitop3_b32 for many waves (ops.batched)
    if not B.quiet(waves, ins) or any(getattr(o, "neg", False) or getattr(o, "abs", False) for o in ins.operands[1:4]):
        return False
    rows = B.slots(waves)
    got = [B.src(waves, rows, o) for o in ins.operands[1:4]]
    if any(g is None for g in got):
        return False
    (a, pa), (b, pb), (c, pc) = got
    table = int(ins.modifiers.get("bitop3", 0))
    r = np.zeros((len(waves), LANES), dtype=U32)
    for i in range(8):
        if table >> i & 1:
            r |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
    B.store(waves, rows, ins.operands[0], r, B.full_poison(pa | pb | pc))
    return True


_BITOP3_B32 = _bitop3(32)
op("v_bitop3_b32")(_BITOP3_B32)
B.batched("v_bitop3_b32", _BITOP3_B32, _bitop3_batched)
op("v_bitop3_b16")(_bitop3(16))


# ------------------------------------------------------------------ 64-bit
def _valu64(name: str, types: tuple[str, ...], fn) -> None:  # noqa: ANN001
    def h(w, ins):  # noqa: ANN001
        vals, p = srcs(w, ins, types)
        with np.errstate(over="ignore"):
            r = fn(*vals)
        w.vwrite(ins.operands[0], _split64(r.astype(U64)), np.stack([full_poison(p)] * 2))

    def hb(waves, ins) -> bool:  # noqa: ANN001 - the same on [waves, ...] arrays (ops.batched)
        if not B.quiet(waves, ins):
            return False
        rows = B.slots(waves)
        vals, p = [], None
        for k, t in enumerate(types):
            g = B.src(waves, rows, ins.operands[1 + k], t, 2 if t == "b64" else 1)
            if g is None:
                return False
            vals.append(g[0])
            q = np.bitwise_or.reduce(g[1], axis=-2) if t == "b64" else g[1]
            p = q if p is None else p | q
        with np.errstate(over="ignore"):
            r = fn(*vals)
        B.store(waves, rows, ins.operands[0], _split64(np.asarray(r).astype(U64)), B.full_poison(p)[..., None, :],
                dwords=2)
        return True

    op(name)(h)
    B.batched(name, h, hb)


_valu64("v_lshlrev_b64", ("b32", "b64"), lambda s, a: _u64(a) << (s & U32(63)).astype(U64))
_valu64("v_lshrrev_b64", ("b32", "b64"), lambda s, a: _u64(a) >> (s & U32(63)).astype(U64))
_valu64("v_ashrrev_i64", ("b32", "b64"), lambda s, a: (_u64(a).view(np.int64) >> (s & U32(63)).astype(np.int64)).view(U64))
_valu64("v_lshl_add_u64", ("b64", "b32", "b64"), lambda a, s, c: (_u64(a) << (s & U32(7)).astype(U64)) + _u64(c))
_valu64("v_mov_b64", ("b64",), lambda a: _u64(a))


@op("v_mad_u64_u32", "v_mad_i64_i32")
def _mad64(w, ins):  # noqa: ANN001
    # v_mad_u64_u32 vdst[2], sdst(carry), a, b, c[2]
    (a, b, c), p = srcs(w, ins, ("b32", "b32", "b64"), first=2)
    with np.errstate(over="ignore"):
        if ins.mnemonic.startswith("v_mad_u64"):
            prod = a.astype(object) * b.astype(object) + _u64(c).astype(object)
        else:
            prod = _i32(a).astype(object) * _i32(b).astype(object) + _u64(c).view(np.int64).astype(object)
    low = np.array([int(x) & 0xFFFFFFFFFFFFFFFF for x in prod], dtype=U64)
    carry = np.array([(int(x) >> 64) != 0 if ins.mnemonic.startswith("v_mad_u64") else not (-(1 << 63) <= int(x) < (1 << 63)) for x in prod])
    w.vwrite(ins.operands[0], _split64(low), np.stack([full_poison(p)] * 2))
    write_mask(w, ins.operands[1], carry, bool((p != 0).any()))


# ------------------------------------------------------------------ carry in / out
def _carry_op(name: str, kind: str, carry_in: bool):
    def h(w, ins):  # noqa: ANN001
        # VOP2: v_add_co_u32_e32 vdst, vcc, a, b[, vcc]; VOP3: vdst, sdst, a, b[, ssrc]
        (a, b), p = srcs(w, ins, B2, first=2)
        cin = np.zeros(LANES, dtype=np.int64)
        cpois = False
        if carry_in:
            cop = ins.operands[4]
            bits = mask_sgpr_pair(w, cop)
            cin = ((np.uint64(bits) >> np.arange(LANES, dtype=U64)) & U64(1)).astype(np.int64)
            cpois = w.spoison(cop, True)
        a64, b64 = a.astype(np.int64), b.astype(np.int64)
        if kind == "add":
            r = a64 + b64 + cin
            cout = r > 0xFFFFFFFF
        elif kind == "sub":
            r = a64 - b64 - cin
            cout = r < 0
        else:  # subrev
            r = b64 - a64 - cin
            cout = r < 0
        pp = p | (np.uint8(0xF) if cpois else np.uint8(0))
        w.vwrite(ins.operands[0], (r & 0xFFFFFFFF).astype(U32), full_poison(pp))
        write_mask(w, ins.operands[1], cout, bool((pp[w.exec] != 0).any()))

    def hb(waves, ins) -> bool:  # noqa: ANN001 - the same for many waves (ops.batched)
        sdst = ins.operands[1]
        if not B.quiet(waves, ins) or not isinstance(sdst, Reg) or sdst.file != "s" or sdst.index >= EXEC - 1:
            return False
        rows = B.slots(waves)
        ga, gb = (B.src(waves, rows, o) for o in ins.operands[2:4])
        if ga is None or gb is None:
            return False
        a64, b64 = ga[0].astype(np.int64), gb[0].astype(np.int64)
        pp = ga[1] | gb[1]
        cin = 0
        if carry_in:
            cop = ins.operands[4]
            if not (isinstance(cop, Reg) and cop.file == "s"):
                return False
            i = cop.index
            bits_ = np.array([w.s[i] | (w.s[i + 1] << 32) for w in waves], dtype=U64)
            cin = ((bits_[:, None] >> np.arange(LANES, dtype=U64)) & U64(1)).astype(np.int64)
            pp = pp | np.array([0xF if (w.sp[i] or w.sp[i + 1]) else 0 for w in waves], dtype=np.uint8)[:, None]
        if kind == "add":
            r = a64 + b64 + cin
            cout = r > 0xFFFFFFFF
        elif kind == "sub":
            r = a64 - b64 - cin
            cout = r < 0
        else:
            r = b64 - a64 - cin
            cout = r < 0
        pp = np.broadcast_to(pp, (len(waves), LANES))
        B.store(waves, rows, ins.operands[0], (r & 0xFFFFFFFF).astype(U32), B.full_poison(pp))
        return B.write_masks(waves, sdst, cout, pp)

    op(name)(h)
    B.batched(name, h, hb)


_carry_op("v_add_co_u32", "add", False)
_carry_op("v_sub_co_u32", "sub", False)
_carry_op("v_subrev_co_u32", "subrev", False)
_carry_op("v_addc_co_u32", "add", True)
_carry_op("v_subb_co_u32", "sub", True)
_carry_op("v_subbrev_co_u32", "subrev", True)


@op("v_cndmask_b32")
def _cndmask(w, ins):  # noqa: ANN001
    (a, b), _ = srcs(w, ins, B2)
    _, pa = w.vread(ins.operands[1], ins)
    _, pb = w.vread(ins.operands[2], ins)
    sel_op = ins.operands[3]
    bits = mask_sgpr_pair(w, sel_op)
    sel = w.mask_of(bits)
    r = np.where(sel, b, a)
    p = np.where(sel, pb, pa) | (np.uint8(0xF) if w.spoison(sel_op, True) else np.uint8(0))
    w.vwrite(ins.operands[0], r, p)


def _cndmask_batched(waves, ins) -> bool:  # noqa: ANN001 - the same for many waves (ops.batched)
    sel_op = ins.operands[3]
    if (not isinstance(sel_op, Reg) or sel_op.file != "s" or not B.quiet(waves, ins)
            or any(getattr(o, "neg", False) or getattr(o, "abs", False) for o in ins.operands[1:3])):
        return False
    bits, bad = B.sgprs(waves, sel_op.index, 2)
    if bad:
        return False  # a poisoned select: per wave (its poison is that wave's)
    rows = B.slots(waves)
    ga, gb = B.src(waves, rows, ins.operands[1]), B.src(waves, rows, ins.operands[2])
    if ga is None or gb is None:
        return False
    words = (bits[:, 0] | (bits[:, 1] << 32)).astype(np.uint64)
    sel = np.unpackbits(words.view(np.uint8).reshape(len(waves), 8), axis=1, bitorder="little").astype(bool)
    B.store(waves, rows, ins.operands[0], np.where(sel, gb[0], ga[0]), np.where(sel, gb[1], ga[1]))
    return True


B.batched("v_cndmask_b32", _cndmask, _cndmask_batched)


# ------------------------------------------------------------------ lane access
@op("v_readfirstlane_b32")
def _readfirstlane(w, ins):  # noqa: ANN001
    v, p = w.vread(ins.operands[1], ins)
    lane = (w.exec_bits & -w.exec_bits).bit_length() - 1 if w.exec_bits else 0
    w.swrite(ins.operands[0], int(v[0][lane]), bool(p[lane]))


@op("v_readlane_b32")
def _readlane(w, ins):  # noqa: ANN001
    v, p = w.vread(ins.operands[1], ins)
    lane = w.sread(ins.operands[2], ins) & 63
    w.swrite(ins.operands[0], int(v[0][lane]), bool(p[lane]) or w.spoison(ins.operands[2]))


@op("v_writelane_b32")
def _writelane(w, ins):  # noqa: ANN001
    val = w.sread(ins.operands[1], ins)
    lane = w.sread(ins.operands[2], ins) & 63
    d = ins.operands[0].index
    w.v[d, lane] = val
    w.vp[d, lane] = 0xF if (w.spoison(ins.operands[1]) or w.spoison(ins.operands[2])) else 0


@op("v_mbcnt_lo_u32_b32", "v_mbcnt_hi_u32_b32")
def _mbcnt(w, ins):  # noqa: ANN001
    (m, c), p = srcs(w, ins, B2)
    hi = ins.mnemonic.startswith("v_mbcnt_hi")
    lanes = LANE_IDS.astype(np.int64) - (32 if hi else 0)
    counts = np.zeros(LANES, dtype=U32)
    mv = m.astype(np.int64)
    for i in range(LANES):
        n = int(min(max(lanes[i], 0), 32))
        counts[i] = bin(int(mv[i]) & ((1 << n) - 1)).count("1")
    write(w, ins, counts + c, p)


@op("v_accvgpr_read_b32", "v_accvgpr_write_b32", "v_accvgpr_mov_b32")
def _accmove(w, ins):  # noqa: ANN001
    v, p = w.vread(ins.operands[1], ins)
    w.vwrite(ins.operands[0], v[0], p)


# ------------------------------------------------------------------ integer compares (VOPC)
_REL = {"eq": np.equal, "ne": np.not_equal, "lg": np.not_equal, "lt": np.less, "le": np.less_equal,
        "gt": np.greater, "ge": np.greater_equal}


def _cmp(name: str, rel: str, kind: str, x: bool):
    wide = kind in ("i64", "u64")

    def h(w, ins):  # noqa: ANN001
        t = "b64" if wide else "b32"
        (a, b), p = srcs(w, ins, (t, t))
        if wide:
            a, b = _u64(a), _u64(b)
            if kind == "i64":
                a, b = a.view(np.int64), b.view(np.int64)
        elif kind == "i32":
            a, b = _i32(a), _i32(b)
        if rel in ("f", "t"):
            res = np.full(LANES, rel == "t")
        else:
            res = _REL[rel](a, b)
        poisoned = bool((p[w.exec] != 0).any())
        write_mask(w, ins.operands[0], res, poisoned)
        if x:
            w.set_exec(lanes_to_bits(res & w.exec))
            if poisoned:
                w.ctx.hazards.add("poison_branch", w, ins, "exec mask computed from an uninitialised value")

    def hb(waves, ins) -> bool:  # noqa: ANN001 - v_cmp (not cmpx) of 32-bit values for many waves
        if wide or x or not B.quiet(waves, ins):
            return False
        rows = B.slots(waves)
        ga, gb = (B.src(waves, rows, o) for o in ins.operands[1:3])
        if ga is None or gb is None:
            return False
        a, b = ga[0], gb[0]
        if kind == "i32":
            a, b = _i32(a), _i32(b)
        res = np.full((len(waves), LANES), rel == "t") if rel in ("f", "t") else _REL[rel](a, b)
        return B.write_masks(waves, ins.operands[0], res, np.broadcast_to(ga[1] | gb[1], (len(waves), LANES)))

    op(name)(h)
    B.batched(name, h, hb)


for _rel in ("eq", "ne", "lt", "le", "gt", "ge", "f", "t"):
    for _kind in ("i32", "u32", "i64", "u64"):
        _cmp(f"v_cmp_{_rel}_{_kind}", _rel, _kind, False)
        _cmp(f"v_cmpx_{_rel}_{_kind}", _rel, _kind, True)


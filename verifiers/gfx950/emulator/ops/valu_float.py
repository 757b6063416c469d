"""Vector ALU, floating point: f32 arithmetic (IEEE round-to-nearest-even, denormals kept),
packed f32 (VOP3P), f32/f64 compares and class tests, int<->float conversions.

f32 add/sub/mul use numpy float32 (IEEE); fused forms use ``numerics.fma_f32`` (one
rounding). Transcendentals (rcp, rsq, sqrt, exp, log) are computed correctly rounded;
the hardware's are within 1 ulp, which the code sequences that use them tolerate.
NaN handling of min/max follows IEEE minNum/maxNum (a quiet NaN operand loses);
``v_minimum3/v_maximum3`` propagate NaN.
"""
from __future__ import annotations

import numpy as np

from verifiers.gfx950.emulator.numerics import fma_f32
from verifiers.gfx950.emulator.operands import VCC
from verifiers.gfx950.emulator.ops import batched as B
from verifiers.gfx950.emulator.ops.common import (
    PURE,
    bits,
    f32,
    full_poison,
    lanes_to_bits,
    output_mods,
    srcs,
    write,
    write_mask,
)
from verifiers.gfx950.emulator.ops.registry import op
from verifiers.gfx950.emulator.state import LANES

U32 = np.uint32
F1, F2, F3 = ("f32",), ("f32", "f32"), ("f32", "f32", "f32")


def _fvalu(name: str, types: tuple[str, ...], fn) -> None:  # noqa: ANN001
    PURE[name] = (types, fn, True)

    def h(w, ins):  # noqa: ANN001
        vals, p = srcs(w, ins, types)
        with np.errstate(all="ignore"):
            r = output_mods(ins, fn(*[f32(v) if t == "f32" else v for v, t in zip(vals, types)]))
        write(w, ins, bits(r), p)

    op(name)(h)


def _fmin(a, b):  # noqa: ANN001 - IEEE minNum: a NaN operand loses
    return np.fmin(a, b)


def _fmax(a, b):  # noqa: ANN001
    return np.fmax(a, b)


_fvalu("v_add_f32", F2, lambda a, b: a + b)
_fvalu("v_sub_f32", F2, lambda a, b: a - b)
_fvalu("v_subrev_f32", F2, lambda a, b: b - a)
_fvalu("v_mul_f32", F2, lambda a, b: a * b)
_fvalu("v_fma_f32", F3, fma_f32)
_fvalu("v_mad_f32", F3, lambda a, b, c: (a * b) + c)  # unfused: two roundings
_fvalu("v_min_f32", F2, _fmin)
_fvalu("v_max_f32", F2, _fmax)
_fvalu("v_min3_f32", F3, lambda a, b, c: _fmin(_fmin(a, b), c))
_fvalu("v_max3_f32", F3, lambda a, b, c: _fmax(_fmax(a, b), c))
_fvalu("v_minimum3_f32", F3, lambda a, b, c: np.minimum(np.minimum(a, b), c))
_fvalu("v_maximum3_f32", F3, lambda a, b, c: np.maximum(np.maximum(a, b), c))
_fvalu("v_med3_f32", F3, lambda a, b, c: _fmax(_fmin(a, b), _fmin(_fmax(a, b), c)))
_fvalu("v_rcp_f32", F1, lambda a: np.float32(1) / a)
_fvalu("v_rcp_iflag_f32", F1, lambda a: np.float32(1) / a)
_fvalu("v_rsq_f32", F1, lambda a: (np.float32(1) / np.sqrt(a.astype(np.float64))).astype(np.float32))
_fvalu("v_sqrt_f32", F1, lambda a: np.sqrt(a))
_fvalu("v_exp_f32", F1, lambda a: np.exp2(a.astype(np.float64)).astype(np.float32))
_fvalu("v_log_f32", F1, lambda a: np.log2(a.astype(np.float64)).astype(np.float32))
_fvalu("v_fract_f32", F1, lambda a: np.where(np.isinf(a), np.float32(np.nan), a - np.floor(a)))
_fvalu("v_trunc_f32", F1, np.trunc)
_fvalu("v_floor_f32", F1, np.floor)
_fvalu("v_ceil_f32", F1, np.ceil)
_fvalu("v_rndne_f32", F1, np.rint)
_fvalu("v_ldexp_f32", ("f32", "b32"), lambda a, e: np.ldexp(a, e.view(np.int32)).astype(np.float32))
_fvalu("v_cvt_f32_u32", ("b32",), lambda a: a.astype(np.float32))
_fvalu("v_cvt_f32_i32", ("b32",), lambda a: a.view(np.int32).astype(np.float32))
_fvalu("v_cvt_f32_ubyte0", ("b32",), lambda a: (a & U32(0xFF)).astype(np.float32))
_fvalu("v_cvt_f32_ubyte1", ("b32",), lambda a: ((a >> U32(8)) & U32(0xFF)).astype(np.float32))
_fvalu("v_cvt_f32_ubyte2", ("b32",), lambda a: ((a >> U32(16)) & U32(0xFF)).astype(np.float32))
_fvalu("v_cvt_f32_ubyte3", ("b32",), lambda a: (a >> U32(24)).astype(np.float32))


@op("v_fmac_f32", "v_mac_f32")
def _fmac(w, ins):  # noqa: ANN001
    (a, b, c), p = srcs(w, ins, F3, first=1) if len(ins.operands) == 4 else _fmac_srcs(w, ins)
    fused = ins.mnemonic.startswith("v_fmac")
    with np.errstate(all="ignore"):
        r = fma_f32(f32(a), f32(b), f32(c)) if fused else f32(a) * f32(b) + f32(c)
    write(w, ins, bits(output_mods(ins, r)), p)


def _fmac_srcs(w, ins):  # noqa: ANN001
    (a, b), p = srcs(w, ins, F2)
    c, pc = w.vread(ins.operands[0], ins, "f32")
    return (a, b, c[0]), p | pc


@op("v_fmamk_f32", "v_madmk_f32")
def _fmamk(w, ins):  # noqa: ANN001  d = a * K + b
    (a, k, b), p = srcs(w, ins, F3)
    write(w, ins, bits(fma_f32(f32(a), f32(k), f32(b))), p)


@op("v_fmaak_f32", "v_madak_f32")
def _fmaak(w, ins):  # noqa: ANN001  d = a * b + K
    (a, b, k), p = srcs(w, ins, F3)
    write(w, ins, bits(fma_f32(f32(a), f32(b), f32(k))), p)


def _to_int(signed: bool):
    def f(a):  # noqa: ANN001
        x = np.nan_to_num(a.astype(np.float64), nan=0.0)
        lo, hi = (-(2.0**31), 2.0**31 - 1) if signed else (0.0, 2.0**32 - 1)
        r = np.trunc(np.clip(x, lo, hi)).astype(np.int64)
        return r.astype(U32)

    return f


for _n, _s in (("v_cvt_u32_f32", False), ("v_cvt_i32_f32", True)):
    def _h(w, ins, s=_s):  # noqa: ANN001
        (a,), p = srcs(w, ins, F1)
        write(w, ins, _to_int(s)(f32(a)), p)

    op(_n)(_h)


@op("v_cvt_f32_f16")
def _cvt_f32_f16(w, ins):  # noqa: ANN001
    (a,), p = srcs(w, ins, ("f16",))
    sel = ins.modifiers.get("op_sel", (0,))
    h = (a >> U32(16)) if sel and sel[0] else (a & U32(0xFFFF))
    write(w, ins, bits(h.astype(np.uint16).view(np.float16).astype(np.float32)), p)


@op("v_cvt_f16_f32")
def _cvt_f16_f32(w, ins):  # noqa: ANN001
    (a,), p = srcs(w, ins, F1)
    h = f32(a).astype(np.float16).view(np.uint16).astype(U32)
    old = w.v[ins.operands[0].index]
    write(w, ins, (old & U32(0xFFFF0000)) | h, p)


@op("v_cvt_f64_f32")
def _cvt_f64_f32(w, ins):  # noqa: ANN001
    (a,), p = srcs(w, ins, F1)
    d = f32(a).astype(np.float64).view(np.uint64)
    w.vwrite(ins.operands[0], np.stack([(d & np.uint64(0xFFFFFFFF)).astype(U32), (d >> np.uint64(32)).astype(U32)]),
             np.stack([full_poison(p)] * 2))


@op("v_cvt_f32_f64")
def _cvt_f32_f64(w, ins):  # noqa: ANN001
    (a,), p = srcs(w, ins, ("f64",))
    d = (a[0].astype(np.uint64) | (a[1].astype(np.uint64) << np.uint64(32))).view(np.float64)
    write(w, ins, bits(d.astype(np.float32)), p)


# ------------------------------------------------------------------ division helpers
# LLVM's f32 division: den' = div_scale(den, den, num); num' = div_scale(num, den, num) -> VCC;
# Newton-Raphson on den', num'; q = div_fmas(r, rcp, q0) (scaled back by VCC); div_fixup(q, den, num).
# Semantics: the CDNA4 pseudocode. The f64-denormal tests of the pseudocode never hold for f32
# operands (1/x of an f32 is never an f64 denormal), so they are left out.
def _expo(u: np.ndarray) -> np.ndarray:
    return ((u >> U32(23)) & U32(0xFF)).astype(np.int32)


def _is_denorm(u: np.ndarray) -> np.ndarray:
    return (_expo(u) == 0) & ((u & U32(0x7FFFFF)) != 0)


@op("v_div_scale_f32")
def _div_scale(w, ins):  # noqa: ANN001
    # vdst, sdst (VCC), s0 (the value to scale: numerator or denominator), s1 (denominator), s2 (numerator)
    (s0, den, num), p = srcs(w, ins, F3, first=2)
    x, d_, n_ = f32(s0), f32(den), f32(num)
    with np.errstate(all="ignore"):
        q_bits = bits(n_ / d_)
    big = (_expo(num) - _expo(den)) >= 96  # N/D near the f32 maximum: scale the denominator up
    tiny_q = _is_denorm(q_bits)  # N/D a denormal: scale the numerator up
    out = x.copy()
    vcc = np.zeros(LANES, dtype=bool)
    up = np.zeros(LANES, dtype=bool)
    todo = ~((n_ == 0) | (d_ == 0))
    for cond, flag, scale_if in ((big, True, x == d_), (_is_denorm(den), False, None), (tiny_q, True, x == n_),
                                 (_expo(num) <= 23, False, None)):
        hit = todo & cond
        vcc |= hit & flag
        up |= hit & (scale_if if scale_if is not None else True)
        todo &= ~cond
    with np.errstate(all="ignore"):
        out = np.where(up, np.ldexp(x, 64).astype(np.float32), out)
    out = np.where((n_ == 0) | (d_ == 0), np.float32(np.nan), out)
    write(w, ins, bits(out), p)
    write_mask(w, ins.operands[1], vcc, bool((p[w.exec] != 0).any()))


@op("v_div_fmas_f32")
def _div_fmas(w, ins):  # noqa: ANN001
    # D = fma(S0, S1, S2), scaled back where VCC is set: by 2^64 when div_scale scaled the
    # denominator (the quotient S2 is then large), 2^-64 when it scaled the numerator.
    (a, b, c), p = srcs(w, ins, F3)
    vcc = (w.s[VCC] | (w.s[VCC + 1] << 32)) & w.exec_bits
    on = w.mask_of(vcc)
    scale = np.where(on, np.where(_expo(c) > 127, 2.0**64, 2.0**-64), 1.0)
    p = p | np.where(w.sp[VCC] or w.sp[VCC + 1], np.uint8(0xF), np.uint8(0))
    write(w, ins, bits(fma_f32(f32(a), f32(b), f32(c), scale)), p)


@op("v_div_fixup_f32")
def _div_fixup(w, ins):  # noqa: ANN001
    (q, den, num), p = srcs(w, ins, F3)
    fq, fd, fn = f32(q), f32(den), f32(num)
    neg = ((den ^ num) >> U32(31)) == 1
    signed = lambda mag: np.where(neg, U32(0x80000000), U32(0)) | U32(mag)  # noqa: E731
    quiet = U32(0x00400000)
    out = np.where(neg, bits(-np.abs(fq)), bits(np.abs(fq)))
    cases = [  # the pseudocode's elsif chain, in order
        (np.isnan(fn), num | quiet),
        (np.isnan(fd), den | quiet),
        ((fd == 0) & (fn == 0), np.full(LANES, 0xFFC00000, dtype=U32)),
        (np.isinf(fd) & np.isinf(fn), np.full(LANES, 0xFFC00000, dtype=U32)),
        ((fd == 0) | np.isinf(fn), signed(0x7F800000)),
        (np.isinf(fd) | (fn == 0), signed(0)),
        # the quotient is below half the smallest denormal: rounds to (signed) zero
        ((_expo(num) - _expo(den)) < -150, signed(0)),
    ]
    done = np.zeros(LANES, dtype=bool)
    for cond, val in cases:
        out = np.where(cond & ~done, val, out)
        done |= cond
    write(w, ins, out.astype(U32), p)


# ------------------------------------------------------------------ packed f32 (VOP3P)
def _pk_halves(ins, k: int, v: np.ndarray, p: np.ndarray):  # noqa: ANN001
    """Lo/hi f32 halves (and their dwords' poison) of packed source ``k`` from its two dwords
    (``v``, ``p``: [..., 2, lanes]) after op_sel / op_sel_hi / neg_lo / neg_hi."""
    sel = ins.modifiers.get("op_sel", (0, 0, 0))
    sel_hi = ins.modifiers.get("op_sel_hi", (1, 1, 1))
    neg_lo = ins.modifiers.get("neg_lo", (0, 0, 0))
    neg_hi = ins.modifiers.get("neg_hi", (0, 0, 0))
    i_lo = 1 if k < len(sel) and sel[k] else 0
    i_hi = 1 if k >= len(sel_hi) or sel_hi[k] else 0
    lo, hi = v[..., i_lo, :].copy(), v[..., i_hi, :].copy()
    if k < len(neg_lo) and neg_lo[k]:
        lo ^= U32(0x80000000)
    if k < len(neg_hi) and neg_hi[k]:
        hi ^= U32(0x80000000)
    return f32(lo), f32(hi), (p[..., i_lo, :], p[..., i_hi, :])


def _pk_math(ins, fn, parts):  # noqa: ANN001
    """(lo bits, hi bits, lo poison, hi poison) of a packed op over its sources' halves."""
    p_lo, p_hi = parts[0][2]
    for part in parts[1:]:
        p_lo, p_hi = p_lo | part[2][0], p_hi | part[2][1]
    with np.errstate(all="ignore"):
        lo = fn(*[x[0] for x in parts])
        hi = fn(*[x[1] for x in parts])
    if ins.modifiers.get("clamp"):
        lo, hi = (np.clip(np.nan_to_num(x, nan=0.0), 0, 1).astype(np.float32) for x in (lo, hi))
    return bits(lo), bits(hi), full_poison(p_lo), full_poison(p_hi)


def _pk(name: str, n: int, fn) -> None:  # noqa: ANN001
    def h(w, ins):  # noqa: ANN001
        parts = []
        for k in range(n):
            v, p = w.vread_parts(ins.operands[1 + k], ins, "b64", 2)
            parts.append(_pk_halves(ins, k, v, p))
        lo, hi, plo, phi = _pk_math(ins, fn, parts)
        w.vwrite(ins.operands[0], np.stack([lo, hi]), np.stack([plo, phi]))

    def hb(waves, ins) -> bool:  # noqa: ANN001 - the same on [waves, 2, 64] (ops.batched)
        if not B.quiet(waves, ins):
            return False
        rows = B.slots(waves)
        parts = []
        for k in range(n):
            g = B.src(waves, rows, ins.operands[1 + k], "b64", 2)
            if g is None:
                return False
            parts.append(_pk_halves(ins, k, g[0], g[1]))
        lo, hi, plo, phi = _pk_math(ins, fn, parts)
        B.store(waves, rows, ins.operands[0], np.stack([lo, hi], axis=-2), np.stack([plo, phi], axis=-2), dwords=2)
        return True

    op(name)(h)
    B.batched(name, h, hb)


_pk("v_pk_add_f32", 2, lambda a, b: a + b)
_pk("v_pk_mul_f32", 2, lambda a, b: a * b)
_pk("v_pk_fma_f32", 3, fma_f32)


@op("v_pk_mov_b32")
def _pk_mov(w, ins):  # noqa: ANN001
    # v_pk_mov_b32 vdst[2], src0[2], src1[2] op_sel:[a,b]: lo = src0[a], hi = src1[b]
    v0, p0 = w.vread_parts(ins.operands[1], ins, "b64", 2)
    v1, p1 = w.vread_parts(ins.operands[2], ins, "b64", 2)
    sel = ins.modifiers.get("op_sel", (0, 0))
    i0, i1 = sel[0], sel[1] if len(sel) > 1 else 0
    w.vwrite(ins.operands[0], np.stack([v0[i0], v1[i1]]), np.stack([p0[i0], p1[i1]]))


# ------------------------------------------------------------------ float compares
def _fcmp(rel: str):
    def f(a, b):  # noqa: ANN001
        with np.errstate(invalid="ignore"):
            return {
                "eq": a == b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b,
                "lg": (a < b) | (a > b), "o": ~(np.isnan(a) | np.isnan(b)), "u": np.isnan(a) | np.isnan(b),
                "neq": ~(a == b), "nlt": ~(a < b), "nle": ~(a <= b), "ngt": ~(a > b), "nge": ~(a >= b),
                "nlg": ~((a < b) | (a > b)), "f": np.zeros(a.shape, bool), "tru": np.ones(a.shape, bool),
            }[rel]

    return f


def _fcmp_op(name: str, rel: str, ftype: str, x: bool):
    fn = _fcmp(rel)

    def h(w, ins):  # noqa: ANN001
        (a, b), p = srcs(w, ins, (ftype, ftype))
        if ftype == "f64":
            a = (a[0].astype(np.uint64) | (a[1].astype(np.uint64) << np.uint64(32))).view(np.float64)
            b = (b[0].astype(np.uint64) | (b[1].astype(np.uint64) << np.uint64(32))).view(np.float64)
        elif ftype == "f16":
            a = (a & U32(0xFFFF)).astype(np.uint16).view(np.float16)
            b = (b & U32(0xFFFF)).astype(np.uint16).view(np.float16)
        else:
            a, b = f32(a), f32(b)
        res = fn(a, b)
        poisoned = bool((p[w.exec] != 0).any())
        write_mask(w, ins.operands[0], res, poisoned)
        if x:
            w.set_exec(lanes_to_bits(res & w.exec))

    op(name)(h)


for _rel in ("eq", "lt", "le", "gt", "ge", "lg", "o", "u", "neq", "nlt", "nle", "ngt", "nge", "nlg", "f", "tru"):
    for _t in ("f32", "f64", "f16"):
        _fcmp_op(f"v_cmp_{_rel}_{_t}", _rel, _t, False)
        _fcmp_op(f"v_cmpx_{_rel}_{_t}", _rel, _t, True)


@op("v_cmp_class_f32", "v_cmpx_class_f32")
def _cmp_class(w, ins):  # noqa: ANN001
    (a, m), p = srcs(w, ins, ("f32", "b32"))
    x = f32(a)
    u = a
    neg = (u >> U32(31)) == 1
    expo = (u >> U32(23)) & U32(0xFF)
    man = u & U32(0x7FFFFF)
    classes = [
        np.isnan(x) & ((man & U32(0x400000)) == 0),  # signalling NaN
        np.isnan(x) & ((man & U32(0x400000)) != 0),  # quiet NaN
        np.isinf(x) & neg, (expo > 0) & (expo < 255) & neg, (expo == 0) & (man != 0) & neg, (u == U32(0x80000000)),
        (u == 0), (expo == 0) & (man != 0) & ~neg, (expo > 0) & (expo < 255) & ~neg, np.isinf(x) & ~neg,
    ]
    res = np.zeros(LANES, dtype=bool)
    for i, c in enumerate(classes):
        res |= c & (((m >> U32(i)) & U32(1)) == 1)
    write_mask(w, ins.operands[0], res, bool((p[w.exec] != 0).any()))
    if ins.mnemonic.startswith("v_cmpx"):
        w.set_exec(lanes_to_bits(res & w.exec))

"""Vector conversions between f32 and the narrow formats: bf16, OCP fp8 (e4m3 'fp8') and
bf8 (e5m2), with the gfx950 rules (see ``numerics``): RNE, MODE bit 23 (or clamp) makes
finite overflow saturate. Half-register writes (op_sel dst / D16) keep the other half
and its poison. Also the SDWA forms of the ALU ops (sub-dword operand select).
"""
from __future__ import annotations

import numpy as np

from verifiers.gfx950.emulator.numerics import decode_fp8, encode_fp8, f32_to_bf16_bits
from verifiers.gfx950.emulator.ops import batched as B
from verifiers.gfx950.emulator.ops.common import PURE, bits, f32, full_poison, srcs, write
from verifiers.gfx950.emulator.ops.registry import op
from verifiers.gfx950.emulator.state import LANES

U32 = np.uint32
MODE_FP8_SATURATE = 1 << 23


def saturating(w, ins) -> bool:  # noqa: ANN001
    return bool(w.mode & MODE_FP8_SATURATE) or bool(ins.modifiers.get("clamp"))


def write_half(w, ins, half: np.ndarray, p: np.ndarray, hi: bool) -> None:  # noqa: ANN001
    """Write 16 bits (low or high half) of the destination, keeping the other half."""
    d = ins.operands[0].index
    old, oldp = w.v[d], w.vp[d]
    if hi:
        val = (old & U32(0x0000FFFF)) | ((half & U32(0xFFFF)) << U32(16))
        pois = (oldp & np.uint8(0x3)) | (full_poison(p) & np.uint8(0xC))
    else:
        val = (old & U32(0xFFFF0000)) | (half & U32(0xFFFF))
        pois = (oldp & np.uint8(0xC)) | (full_poison(p) & np.uint8(0x3))
    w.vwrite(d, val, pois)


def _dst_hi(ins, nsrc: int) -> bool:  # noqa: ANN001
    sel = ins.modifiers.get("op_sel", ())
    return len(sel) > nsrc and bool(sel[nsrc])


@op("v_cvt_pk_bf16_f32")
def _cvt_pk_bf16(w, ins):  # noqa: ANN001
    (a, b), p = srcs(w, ins, ("f32", "f32"))
    r = f32_to_bf16_bits(a) | (f32_to_bf16_bits(b) << U32(16))
    write(w, ins, r, p)


def _cvt_pk_bf16_batched(waves, ins) -> bool:  # noqa: ANN001 - the same on [waves, 64] (ops.batched)
    if not B.quiet(waves, ins):
        return False
    rows = B.slots(waves)
    got = [B.src(waves, rows, o, "f32") for o in ins.operands[1:3]]
    if any(g is None for g in got):
        return False
    (a, pa), (b, pb) = got
    r = f32_to_bf16_bits(a) | (f32_to_bf16_bits(b) << U32(16))
    B.store(waves, rows, ins.operands[0], r, B.full_poison(pa | pb))
    return True


B.batched("v_cvt_pk_bf16_f32", _cvt_pk_bf16, _cvt_pk_bf16_batched)


def _pk_to_fp8(fmt: str, scaled: bool):
    def h(w, ins):  # noqa: ANN001
        types = ("f32", "f32", "f32") if scaled else ("f32", "f32")
        vals, p = srcs(w, ins, types)
        x0, x1 = f32(vals[0]), f32(vals[1])
        if scaled:  # divide by the power of two S2's exponent encodes
            e = ((vals[2] >> U32(23)) & U32(0xFF)).astype(np.int64) - 127
            x0 = np.ldexp(x0, -e).astype(np.float32)
            x1 = np.ldexp(x1, -e).astype(np.float32)
        sat = saturating(w, ins)
        lo = encode_fp8(x0, fmt, sat).astype(U32)
        hi = encode_fp8(x1, fmt, sat).astype(U32)
        write_half(w, ins, lo | (hi << U32(8)), p, _dst_hi(ins, len(types)))

    return h


op("v_cvt_pk_fp8_f32")(_pk_to_fp8("fp8", False))
op("v_cvt_pk_bf8_f32")(_pk_to_fp8("bf8", False))
op("v_cvt_scalef32_pk_fp8_f32")(_pk_to_fp8("fp8", True))
op("v_cvt_scalef32_pk_bf8_f32")(_pk_to_fp8("bf8", True))

_SEL = {"BYTE_0": (0, 8), "BYTE_1": (8, 8), "BYTE_2": (16, 8), "BYTE_3": (24, 8), "WORD_0": (0, 16),
        "WORD_1": (16, 16), "DWORD": (0, 32)}


def _from_fp8_pk(fmt: str):
    def h(w, ins):  # noqa: ANN001
        v, p = w.vread(ins.operands[1], ins)
        word_hi = ins.modifiers.get("src0_sel") == "WORD_1" or bool(ins.modifiers.get("op_sel", (0,))[0])
        half = (v[0] >> U32(16)) if word_hi else v[0]
        b0 = (half & U32(0xFF)).astype(np.uint8)
        b1 = ((half >> U32(8)) & U32(0xFF)).astype(np.uint8)
        r = np.stack([bits(decode_fp8(b0, fmt).astype(np.float32)), bits(decode_fp8(b1, fmt).astype(np.float32))])
        fp = full_poison(p)
        w.vwrite(ins.operands[0], r, np.stack([fp, fp]))

    return h


def _from_fp8(fmt: str):
    def h(w, ins):  # noqa: ANN001
        v, p = w.vread(ins.operands[1], ins)
        sel = ins.modifiers.get("src0_sel")
        if sel is not None:
            shift = _SEL[sel][0]
        else:
            os_ = ins.modifiers.get("op_sel", (0, 0))
            shift = 8 * ((os_[0] if len(os_) > 0 else 0) | ((os_[1] if len(os_) > 1 else 0) << 1))
        b = ((v[0] >> U32(shift)) & U32(0xFF)).astype(np.uint8)
        write(w, ins, bits(decode_fp8(b, fmt).astype(np.float32)), p)

    return h


for _fmt in ("fp8", "bf8"):
    op(f"v_cvt_pk_f32_{_fmt}", f"v_cvt_pk_f32_{_fmt}_sdwa")(_from_fp8_pk(_fmt))
    op(f"v_cvt_f32_{_fmt}", f"v_cvt_f32_{_fmt}_sdwa")(_from_fp8(_fmt))


# ------------------------------------------------------------------ SDWA for plain ALU ops
def _select(v: np.ndarray, sel: str, sext: bool) -> np.ndarray:
    shift, width = _SEL[sel]
    x = (v >> U32(shift)) & U32((1 << width) - 1) if width < 32 else v
    if sext and width < 32:
        sign = U32(1 << (width - 1))
        x = np.where(x & sign, x | ~U32((1 << width) - 1), x)
    return x.astype(U32)


def sdwa(w, ins, base) -> None:  # noqa: ANN001
    """Run ``base`` on SDWA-selected sources, then place the result by dst_sel/dst_unused."""
    m = ins.modifiers
    d = ins.operands[0]
    srcs_ = ins.operands[1:]
    selected = []
    poison = np.zeros(LANES, dtype=np.uint8)
    for k, o in enumerate(srcs_[:2]):
        v, p = w.vread(o, ins)
        selected.append(_select(v[0], m.get(f"src{k}_sel", "DWORD"), False))
        poison |= p
    r = base(*selected)
    shift, width = _SEL[m.get("dst_sel", "DWORD")]
    if width < 32:
        field = (r & U32((1 << width) - 1)) << U32(shift)
        keep = ~U32(((1 << width) - 1) << shift)
        unused = m.get("dst_unused", "UNUSED_PAD")
        if unused == "UNUSED_PRESERVE":
            r = (w.v[d.index] & keep) | field
        elif unused == "UNUSED_SEXT":
            r = _select(field, m.get("dst_sel"), True)
        else:
            r = field
    w.vwrite(d, r.astype(U32), full_poison(poison))




def _sdwa_handler(name: str):
    types, fn, is_float = PURE[name]

    def h(w, ins):  # noqa: ANN001
        def base(*xs):  # noqa: ANN002
            args = [f32(x) if t == "f32" else x for x, t in zip(xs, types)]
            with np.errstate(all="ignore"):
                r = fn(*args)
            return bits(r) if is_float else r.astype(U32)

        sdwa(w, ins, base)

    return h


def _from_fp8_pk_scaled(fmt: str):
    """v_cvt_scalef32_pk_f32_fp8/bf8: two fp8 of the op_sel-chosen half, times 2^(exponent(S1) - 127)."""

    def h(w, ins):  # noqa: ANN001
        (v, s), p = srcs(w, ins, ("b32", "f32"))
        hi = bool(ins.modifiers.get("op_sel", (0,))[0])
        half = (v >> U32(16)) if hi else v
        e = ((s >> U32(23)) & U32(0xFF)).astype(np.int64) - 127
        out = []
        for shift in (0, 8):
            b = ((half >> U32(shift)) & U32(0xFF)).astype(np.uint8)
            out.append(bits(np.ldexp(decode_fp8(b, fmt), e).astype(np.float32)))
        fp = full_poison(p)
        w.vwrite(ins.operands[0], np.stack(out), np.stack([fp, fp]))

    return h


op("v_cvt_scalef32_pk_f32_fp8")(_from_fp8_pk_scaled("fp8"))
op("v_cvt_scalef32_pk_f32_bf8")(_from_fp8_pk_scaled("bf8"))

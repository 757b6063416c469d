"""Scalar ALU: SOP1, SOP2, SOPK, SOPC (CDNA4 ISA chapter "Scalar ALU Operations").

Values are Python ints (32 or 64 bits, unsigned); SCC rules per opcode follow the ISA
pseudocode (carry/borrow for unsigned add/sub, signed overflow for *_i32 add/sub,
result != 0 for bitwise ops and shifts, ...).
"""
from __future__ import annotations

from verifiers.gfx950.emulator.operands import EXEC, Const, Reg
from verifiers.gfx950.emulator.ops import batched as B
from verifiers.gfx950.emulator.ops.registry import op
from verifiers.gfx950.emulator.state import const_bits

M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF


# ------------------------------------------------------------------ batched forms (ops.batched)
# Still a loop over the waves (each wave's SGPRs are its own Python list), without the
# per-wave operand dispatch: sources resolved once, and ``quiet`` has already excluded the
# in-flight-load hazards the per-wave reads and writes check.
def _source(o, wide: bool):  # noqa: ANN001, ANN202
    """(SGPR index, None) or (None, constant bits) of a scalar source; None for another form."""
    if isinstance(o, Reg) and o.file == "s":
        return o.index, None
    if isinstance(o, Const):
        return None, const_bits(o, "b64" if wide else "b32")
    return None


def _read(w, src, wide: bool):  # noqa: ANN001, ANN202
    """(value, poisoned) of a resolved source in wave ``w``, as ``sread`` / ``spoison``."""
    i, c = src
    if i is None:
        return c, False
    s, sp = w.s, w.sp
    if wide:
        return s[i] | (s[i + 1] << 32), bool(sp[i]) or bool(sp[i + 1])
    return s[i], bool(sp[i])


def _dst(ins):  # noqa: ANN001, ANN202
    """The destination SGPR(s) when ``swrite`` would neither refresh EXEC nor find a hazard."""
    d = ins.operands[0]
    return d if isinstance(d, Reg) and d.file == "s" and d.index < EXEC - 1 else None


def _write(w, d, value: int, poison: bool, two: bool) -> None:  # noqa: ANN001 - ``swrite`` of a checked ``_dst``
    p = 0xF if poison else 0
    w.s[d] = value & M32
    w.sp[d] = p
    if two:
        w.s[d + 1] = (value >> 32) & M32
        w.sp[d + 1] = p


def _s32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x & 0x80000000 else x


def _s64(x: int) -> int:
    x &= M64
    return x - (1 << 64) if x >> 63 else x


def _args(w, ins, n: int, t: str = "b32"):  # noqa: ANN001
    ops_ = ins.operands[1 : 1 + n]
    vals = [w.sread(o, ins, t) for o in ops_]
    poison = any(w.spoison(o, t in ("b64", "i64", "u64")) for o in ops_)
    return vals, poison


def _sop2(name: str, fn, wide: bool = False, scc_in: bool = False):  # noqa: ANN001
    """fn(a, b[, scc]) -> (result, scc or None)."""
    t = "b64" if wide else "b32"

    def handler(w, ins):  # noqa: ANN001
        (a, b), poison = _args(w, ins, 2, t)
        res, scc = fn(a, b, w.scc) if scc_in else fn(a, b)
        poison = poison or (scc_in and w.scc_poison)
        w.swrite(ins.operands[0], res & (M64 if wide else M32), poison, wide=wide)
        if scc is not None:
            w.scc = int(bool(scc))
            w.scc_poison = poison

    def batched(waves, ins) -> bool:  # noqa: ANN001
        d, sa, sb = _dst(ins), _source(ins.operands[1], wide), _source(ins.operands[2], wide)
        if d is None or sa is None or sb is None or not B.quiet(waves, ins):
            return False
        two, mask = wide or d.count == 2, M64 if wide else M32
        for w in waves:
            (a, pa), (b, pb) = _read(w, sa, wide), _read(w, sb, wide)
            res, scc = fn(a, b, w.scc) if scc_in else fn(a, b)
            poison = pa or pb or (scc_in and w.scc_poison)
            _write(w, d.index, res & mask, poison, two)
            if scc is not None:
                w.scc = int(bool(scc))
                w.scc_poison = poison
        return True

    op(name)(handler)
    B.batched(name, handler, batched)


def _add_u32(a, b):  # noqa: ANN001
    r = a + b
    return r, r >> 32


def _sub_u32(a, b):  # noqa: ANN001
    return a - b, b > a


def _addc_u32(a, b, c):  # noqa: ANN001
    r = a + b + c
    return r, r >> 32


def _subb_u32(a, b, c):  # noqa: ANN001
    return a - b - c, b + c > a


def _add_i32(a, b):  # noqa: ANN001
    r = _s32(a) + _s32(b)
    return r, not (-(1 << 31) <= r < (1 << 31))


def _sub_i32(a, b):  # noqa: ANN001
    r = _s32(a) - _s32(b)
    return r, not (-(1 << 31) <= r < (1 << 31))


_sop2("s_add_u32", _add_u32)
_sop2("s_sub_u32", _sub_u32)
_sop2("s_addc_u32", _addc_u32, scc_in=True)
_sop2("s_subb_u32", _subb_u32, scc_in=True)
_sop2("s_add_i32", _add_i32)
_sop2("s_sub_i32", _sub_i32)
_sop2("s_mul_i32", lambda a, b: (_s32(a) * _s32(b), None))
_sop2("s_mul_hi_u32", lambda a, b: ((a * b) >> 32, None))
_sop2("s_mul_hi_i32", lambda a, b: ((_s32(a) * _s32(b)) >> 32, None))
_sop2("s_min_i32", lambda a, b: (a if _s32(a) < _s32(b) else b, _s32(a) < _s32(b)))
_sop2("s_min_u32", lambda a, b: (min(a, b), a < b))
_sop2("s_max_i32", lambda a, b: (a if _s32(a) > _s32(b) else b, _s32(a) > _s32(b)))
_sop2("s_max_u32", lambda a, b: (max(a, b), a > b))
_sop2("s_absdiff_i32", lambda a, b: (abs(_s32(a) - _s32(b)) & M32, abs(_s32(a) - _s32(b)) & M32 != 0))
for _w, _m in ((False, M32), (True, M64)):
    _sfx = "b64" if _w else "b32"
    _sop2(f"s_and_{_sfx}", lambda a, b: (a & b, a & b), _w)
    _sop2(f"s_or_{_sfx}", lambda a, b: (a | b, a | b), _w)
    _sop2(f"s_xor_{_sfx}", lambda a, b: (a ^ b, a ^ b), _w)
    _sop2(f"s_andn2_{_sfx}", lambda a, b, m=_m: (a & ~b & m, a & ~b & m), _w)
    _sop2(f"s_orn2_{_sfx}", lambda a, b, m=_m: ((a | ~b) & m, (a | ~b) & m), _w)
    _sop2(f"s_nand_{_sfx}", lambda a, b, m=_m: (~(a & b) & m, ~(a & b) & m), _w)
    _sop2(f"s_nor_{_sfx}", lambda a, b, m=_m: (~(a | b) & m, ~(a | b) & m), _w)
    _sop2(f"s_xnor_{_sfx}", lambda a, b, m=_m: (~(a ^ b) & m, ~(a ^ b) & m), _w)
_sop2("s_lshl_b32", lambda a, b: ((a << (b & 31)) & M32, (a << (b & 31)) & M32))
_sop2("s_lshr_b32", lambda a, b: (a >> (b & 31), a >> (b & 31)))
_sop2("s_ashr_i32", lambda a, b: (_s32(a) >> (b & 31), _s32(a) >> (b & 31)))


def _shift64(kind: str):
    def h(w, ins):  # noqa: ANN001
        a = w.sread(ins.operands[1], ins, "b64")
        b = w.sread(ins.operands[2], ins, "b32") & 63
        poison = w.spoison(ins.operands[1], True) or w.spoison(ins.operands[2])
        r = {"lshl": (a << b) & M64, "lshr": a >> b, "ashr": (_s64(a) >> b) & M64}[kind]
        w.swrite(ins.operands[0], r, poison, wide=True)
        w.scc, w.scc_poison = int(r != 0), poison

    op(f"s_{kind}_b64" if kind != "ashr" else "s_ashr_i64")(h)


for _k in ("lshl", "lshr", "ashr"):
    _shift64(_k)
for _n in (1, 2, 3, 4):
    _sop2(f"s_lshl{_n}_add_u32", lambda a, b, n=_n: ((a << n) + b, ((a << n) + b) >> 32))


def _bfe(signed: bool, wide: bool):
    def h(w, ins):  # noqa: ANN001
        t = "b64" if wide else "b32"
        a = w.sread(ins.operands[1], ins, t)
        b = w.sread(ins.operands[2], ins, "b32")
        poison = w.spoison(ins.operands[1], wide) or w.spoison(ins.operands[2])
        bits = 64 if wide else 32
        off, width = b & (bits - 1), (b >> 16) & 0x7F
        r = (a >> off) & ((1 << width) - 1) if width else 0
        if signed and width and r >> (width - 1):
            r -= 1 << width
        r &= (1 << bits) - 1
        w.swrite(ins.operands[0], r, poison, wide=wide)
        w.scc, w.scc_poison = int(r != 0), poison

    return h


op("s_bfe_u32")(_bfe(False, False))
op("s_bfe_i32")(_bfe(True, False))
op("s_bfe_u64")(_bfe(False, True))
op("s_bfe_i64")(_bfe(True, True))
_sop2("s_bfm_b32", lambda a, b: ((((1 << (a & 31)) - 1) << (b & 31)) & M32, None))
_sop2("s_pack_ll_b32_b16", lambda a, b: ((a & 0xFFFF) | ((b & 0xFFFF) << 16), None))
_sop2("s_pack_lh_b32_b16", lambda a, b: ((a & 0xFFFF) | (b & 0xFFFF0000), None))
_sop2("s_pack_hh_b32_b16", lambda a, b: ((a >> 16) | (b & 0xFFFF0000), None))


@op("s_cselect_b32", "s_cselect_b64")
def _cselect(w, ins):  # noqa: ANN001
    wide = ins.mnemonic.endswith("b64")
    t = "b64" if wide else "b32"
    a, b = (w.sread(o, ins, t) for o in ins.operands[1:3])
    pick = ins.operands[1] if w.scc else ins.operands[2]
    w.swrite(ins.operands[0], a if w.scc else b, w.spoison(pick, wide) or w.scc_poison, wide=wide)


def _cselect_batched(waves, ins) -> bool:  # noqa: ANN001
    wide = ins.mnemonic.endswith("b64")
    d, sa, sb = _dst(ins), _source(ins.operands[1], wide), _source(ins.operands[2], wide)
    if d is None or sa is None or sb is None or not B.quiet(waves, ins):
        return False
    two = wide or d.count == 2
    for w in waves:
        v, p = _read(w, sa if w.scc else sb, wide)
        _write(w, d.index, v, p or w.scc_poison, two)
    return True


B.batched("s_cselect_b32", _cselect, _cselect_batched)
B.batched("s_cselect_b64", _cselect, _cselect_batched)


# ------------------------------------------------------------------ SOP1
def _sop1(name: str, fn, wide: bool = False, src_wide: bool | None = None, scc: bool = False):  # noqa: ANN001
    sw = wide if src_wide is None else src_wide

    def h(w, ins):  # noqa: ANN001
        a = w.sread(ins.operands[1], ins, "b64" if sw else "b32")
        poison = w.spoison(ins.operands[1], sw)
        r = fn(a) & (M64 if wide else M32)
        w.swrite(ins.operands[0], r, poison, wide=wide)
        if scc:
            w.scc, w.scc_poison = int(r != 0), poison

    def batched(waves, ins) -> bool:  # noqa: ANN001
        d, sa = _dst(ins), _source(ins.operands[1], sw)
        if d is None or sa is None or not B.quiet(waves, ins):
            return False
        two, mask = wide or d.count == 2, M64 if wide else M32
        for w in waves:
            a, poison = _read(w, sa, sw)
            r = fn(a) & mask
            _write(w, d.index, r, poison, two)
            if scc:
                w.scc, w.scc_poison = int(r != 0), poison
        return True

    op(name)(h)
    B.batched(name, h, batched)


_sop1("s_mov_b32", lambda a: a)
_sop1("s_mov_b64", lambda a: a, True)
_sop1("s_not_b32", lambda a: ~a, scc=True)
_sop1("s_not_b64", lambda a: ~a, True, scc=True)
_sop1("s_brev_b32", lambda a: int(f"{a:032b}"[::-1], 2))
_sop1("s_abs_i32", lambda a: abs(_s32(a)), scc=True)
_sop1("s_sext_i32_i8", lambda a: (a & 0xFF) - (0x100 if a & 0x80 else 0))
_sop1("s_sext_i32_i16", lambda a: (a & 0xFFFF) - (0x10000 if a & 0x8000 else 0))
_sop1("s_bcnt1_i32_b32", lambda a: bin(a & M32).count("1"), scc=True)
_sop1("s_bcnt1_i32_b64", lambda a: bin(a).count("1"), False, True, scc=True)
_sop1("s_ff1_i32_b32", lambda a: ((a & -a).bit_length() - 1) if a else M32)
_sop1("s_ff1_i32_b64", lambda a: ((a & -a).bit_length() - 1) if a else M32, False, True)
_sop1("s_flbit_i32_b32", lambda a: (32 - a.bit_length()) if a else M32)
_sop1("s_flbit_i32_b64", lambda a: (64 - a.bit_length()) if a else M32, False, True)


@op("s_movk_i32")
def _movk(w, ins):  # noqa: ANN001
    w.swrite(ins.operands[0], _simm16(ins) & M32)


def _movk_batched(waves, ins) -> bool:  # noqa: ANN001
    d = _dst(ins)
    if d is None or not B.quiet(waves, ins):
        return False
    for w in waves:
        _write(w, d.index, _simm16(ins) & M32, False, d.count == 2)
    return True


B.batched("s_movk_i32", _movk, _movk_batched)


def _simm16(ins) -> int:  # noqa: ANN001
    return ins.simm16


def _sopk(name: str, fn, scc_kind: str | None = None):  # noqa: ANN001
    def h(w, ins):  # noqa: ANN001
        d = ins.operands[0]
        a = w.sread(d, ins)
        poison = w.spoison(d)
        r, scc = fn(a, _simm16(ins))
        w.swrite(d, r & M32, poison)
        if scc is not None:
            w.scc, w.scc_poison = int(bool(scc)), poison

    def batched(waves, ins) -> bool:  # noqa: ANN001
        d = _dst(ins)
        if d is None or not B.quiet(waves, ins):
            return False
        k, two = _simm16(ins), d.count == 2
        for w in waves:
            a, poison = _read(w, (d.index, None), False)
            r, scc = fn(a, k)
            _write(w, d.index, r & M32, poison, two)
            if scc is not None:
                w.scc, w.scc_poison = int(bool(scc)), poison
        return True

    op(name)(h)
    B.batched(name, h, batched)


_sopk("s_addk_i32", lambda a, k: _add_i32(a, k & M32))
_sopk("s_mulk_i32", lambda a, k: (_s32(a) * k, None))


@op("s_cmovk_i32")
def _cmovk(w, ins):  # noqa: ANN001
    if w.scc:
        w.swrite(ins.operands[0], _simm16(ins) & M32, w.scc_poison)


@op("s_cmov_b32", "s_cmov_b64")
def _cmov(w, ins):  # noqa: ANN001
    wide = ins.mnemonic.endswith("b64")
    if w.scc:
        w.swrite(ins.operands[0], w.sread(ins.operands[1], ins, "b64" if wide else "b32"),
                 w.spoison(ins.operands[1], wide) or w.scc_poison, wide=wide)


# ------------------------------------------------------------------ SOPC / SOPK compares
_CMP = {
    "eq": lambda a, b: a == b, "lg": lambda a, b: a != b, "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
}


def _cmp(name: str, rel: str, signed: bool, wide: bool, k: bool = False):
    def h(w, ins):  # noqa: ANN001
        t = "b64" if wide else "b32"
        a = w.sread(ins.operands[0], ins, t)
        poison = w.spoison(ins.operands[0], wide)
        if k:
            b = _simm16(ins) if signed else _simm16(ins) & 0xFFFF
        else:
            b = w.sread(ins.operands[1], ins, t)
            poison = poison or w.spoison(ins.operands[1], wide)
        if signed:
            a = _s64(a) if wide else _s32(a)
            if not k:
                b = _s64(b) if wide else _s32(b)
        w.scc, w.scc_poison = int(_CMP[rel](a, b)), poison

    def batched(waves, ins) -> bool:  # noqa: ANN001
        sa = _source(ins.operands[0], wide)
        sb = (None, _simm16(ins) if signed else _simm16(ins) & 0xFFFF) if k else _source(ins.operands[1], wide)
        if sa is None or sb is None or not B.quiet(waves, ins):
            return False
        test, conv = _CMP[rel], (_s64 if wide else _s32) if signed else None
        for w in waves:
            (a, pa), (b, pb) = _read(w, sa, wide), _read(w, sb, wide)
            if conv is not None:
                a = conv(a)
                if not k:
                    b = conv(b)
            w.scc, w.scc_poison = int(test(a, b)), pa or pb
        return True

    op(name)(h)
    B.batched(name, h, batched)


for _rel in _CMP:
    _cmp(f"s_cmp_{_rel}_i32", _rel, True, False)
    _cmp(f"s_cmp_{_rel}_u32", _rel, False, False)
    _cmp(f"s_cmpk_{_rel}_i32", _rel, True, False, k=True)
    _cmp(f"s_cmpk_{_rel}_u32", _rel, False, False, k=True)
_cmp("s_cmp_eq_u64", "eq", False, True)
_cmp("s_cmp_lg_u64", "lg", False, True)


@op("s_bitcmp0_b32", "s_bitcmp1_b32")
def _bitcmp(w, ins):  # noqa: ANN001
    a = w.sread(ins.operands[0], ins)
    b = w.sread(ins.operands[1], ins) & 31
    bit = (a >> b) & 1
    w.scc = int(bit == (1 if ins.mnemonic.startswith("s_bitcmp1") else 0))
    w.scc_poison = w.spoison(ins.operands[0])


# ------------------------------------------------------------------ exec manipulation
_SAVEEXEC = {
    "and": lambda s, e: s & e, "or": lambda s, e: s | e, "xor": lambda s, e: s ^ e,
    "andn2": lambda s, e: s & ~e & M64, "orn2": lambda s, e: (s | ~e) & M64,
    "nand": lambda s, e: ~(s & e) & M64, "nor": lambda s, e: ~(s | e) & M64, "xnor": lambda s, e: ~(s ^ e) & M64,
    "andn1": lambda s, e: ~s & e & M64, "orn1": lambda s, e: (~s | e) & M64,
    "andn1_wrexec": None, "andn2_wrexec": None,
}


def _saveexec(kind: str):
    fn = _SAVEEXEC[kind]

    def h(w, ins):  # noqa: ANN001
        src = w.sread(ins.operands[1], ins, "b64")
        poison = w.spoison(ins.operands[1], True)
        old = w.exec_bits
        new = fn(src, old)
        w.swrite(ins.operands[0], old, False, wide=True)
        w.set_exec(new)
        if poison:
            w.ctx.hazards.add("poison_branch", w, ins, "exec mask computed from an uninitialised value")
        w.scc, w.scc_poison = int(new != 0), poison

    op(f"s_{kind}_saveexec_b64")(h)


for _k, _f in _SAVEEXEC.items():
    if _f is not None:
        _saveexec(_k)


@op("s_getpc_b64")
def _getpc(w, ins):  # noqa: ANN001
    w.swrite(ins.operands[0], ins.address + ins.size, False, wide=True)


@op("s_setpc_b64")
def _setpc(w, ins):  # noqa: ANN001
    w.pc = w.ctx.program.index_of(w.sread(ins.operands[0], ins, "b64"), ins)


@op("s_swappc_b64")
def _swappc(w, ins):  # noqa: ANN001
    target = w.sread(ins.operands[1], ins, "b64")
    w.swrite(ins.operands[0], ins.address + ins.size, False, wide=True)
    w.pc = w.ctx.program.index_of(target, ins)


def _bitset(value: int):
    def h(w, ins):  # noqa: ANN001  D.u32[S0.u32[4:0]] = value (read-modify-write of D)
        dst = ins.operands[0]
        b = w.sread(ins.operands[1], ins)
        old = w.sread(dst, ins)
        new = (old | (1 << (b & 31))) if value else (old & ~(1 << (b & 31)) & M32)
        w.swrite(dst, new, w.spoison(dst) or w.spoison(ins.operands[1]))

    return h


op("s_bitset1_b32")(_bitset(1))
op("s_bitset0_b32")(_bitset(0))

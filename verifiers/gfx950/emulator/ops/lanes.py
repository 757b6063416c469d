"""Cross-lane data movement: DPP (data-parallel primitives) on VOP1/VOP2 ALU ops.

DPP controls (gfx9 encoding, second dword): dpp_ctrl [16:8], bound_ctrl [19],
src0 neg/abs [20]/[21], src1 neg/abs [22]/[23], bank_mask [27:24], row_mask [31:28].
Source lanes outside their row (or wave) are invalid: with bound_ctrl the source reads
0, without it the destination lane is left unwritten. Rows (16 lanes) and banks (4 lanes
within a row) masked off are not written.
"""
from __future__ import annotations

import numpy as np

from verifiers.gfx950.emulator.ops.common import PURE, bits, f32, full_poison
from verifiers.gfx950.emulator.ops.registry import op
from verifiers.gfx950.emulator.state import LANES

U32 = np.uint32
LANE = np.arange(LANES)
ROW_LANE = LANE % 16


def dpp_source(ctrl: int) -> tuple[np.ndarray, np.ndarray]:
    """(source lane [64], valid [64]) for a DPP control value."""
    src = LANE.copy()
    valid = np.ones(LANES, dtype=bool)
    if ctrl <= 0xFF:  # quad_perm
        sel = np.array([(ctrl >> (2 * i)) & 3 for i in range(4)])
        src = (LANE & ~3) | sel[LANE & 3]
    elif 0x101 <= ctrl <= 0x10F:  # row_shl
        n = ctrl & 0xF
        src, valid = LANE + n, ROW_LANE + n < 16
    elif 0x111 <= ctrl <= 0x11F:  # row_shr
        n = ctrl & 0xF
        src, valid = LANE - n, ROW_LANE - n >= 0
    elif 0x121 <= ctrl <= 0x12F:  # row_ror
        n = ctrl & 0xF
        src = (LANE & ~15) | ((ROW_LANE + n) % 16)
    elif ctrl == 0x130:  # wave_shl
        src, valid = LANE + 1, LANE + 1 < LANES
    elif ctrl == 0x134:  # wave_rol
        src = (LANE + 1) % LANES
    elif ctrl == 0x138:  # wave_shr
        src, valid = LANE - 1, LANE >= 1
    elif ctrl == 0x13C:  # wave_ror
        src = (LANE - 1) % LANES
    elif ctrl == 0x140:  # row_mirror
        src = (LANE & ~15) | (15 - ROW_LANE)
    elif ctrl == 0x141:  # row_half_mirror
        src = (LANE & ~7) | (7 - (LANE & 7))
    elif ctrl == 0x142:  # row_bcast:15: row r >= 1 reads lane 15 of row r-1
        src, valid = (LANE & ~15) - 1, LANE >= 16
    elif ctrl == 0x143:  # row_bcast:31: rows 2, 3 read lane 31
        src, valid = np.full(LANES, 31), LANE >= 32
    else:
        raise ValueError(f"DPP control 0x{ctrl:x}")
    return np.clip(src, 0, LANES - 1), valid


def dpp_handler(name: str):
    types, fn, is_float = PURE[name]

    def h(w, ins):  # noqa: ANN001
        word = ins.words[1]
        ctrl = (word >> 8) & 0x1FF
        bound_ctrl = bool(word >> 19 & 1)
        bank_mask, row_mask = (word >> 24) & 0xF, (word >> 28) & 0xF
        try:
            src_lane, valid = dpp_source(ctrl)
        except ValueError as exc:
            raise w.ctx.unimplemented(ins, str(exc)) from None
        vals, pois = [], []
        for k, t in enumerate(types):
            v, p = w.vread(ins.operands[1 + k], ins, t)
            vals.append(v[0])
            pois.append(p)
        s0 = vals[0][src_lane]
        p0 = pois[0][src_lane]
        # inactive source lanes read 0 too (the ISA: disabled lanes are invalid sources)
        valid = valid & w.exec[src_lane]
        if bound_ctrl:
            s0 = np.where(valid, s0, U32(0))
            p0 = np.where(valid, p0, np.uint8(0))
        if word >> 21 & 1 and is_float:
            s0 = s0 & U32(0x7FFFFFFF)
        if word >> 20 & 1 and is_float:
            s0 = s0 ^ U32(0x80000000)
        vals[0] = s0
        pois[0] = p0
        args = [f32(x) if t == "f32" else x for x, t in zip(vals, types)]
        with np.errstate(all="ignore"):
            r = fn(*args)
        r = bits(r) if is_float else r.astype(U32)
        p = pois[0]
        for q in pois[1:]:
            p = p | q
        rows_on = ((row_mask >> (LANE // 16)) & 1).astype(bool)
        banks_on = ((bank_mask >> ((LANE // 4) % 4)) & 1).astype(bool)
        lanes = w.exec & rows_on & banks_on & (valid | bound_ctrl)
        w.vwrite(ins.operands[0], r, full_poison(p), mask=lanes)

    return h


# ------------------------------------------------------------------ gfx950 lane swaps
def _swap_lanes(row: int) -> np.ndarray:
    """Lanes of src0 whose values trade places with vdst lanes ``l + row``: rows 0 and 2 of
    src0 with rows 1 and 3 of vdst (16-lane rows), or the low half with the high half (32)."""
    return LANE[(LANE // row) % 2 == 0]


def _permlane_swap(row: int):
    lo = _swap_lanes(row)
    hi = lo + row

    def h(w, ins):  # noqa: ANN001
        # CDNA4 pseudocode: for each such lane l, swap VGPR[l][src0] with VGPR[l + row][vdst]
        if not w.exec_all:
            raise w.ctx.unimplemented(ins, "lane swap with inactive lanes (bound_ctrl / fetch-inactive rules)")
        dst, src = ins.operands[0], ins.operands[1]
        dv, dp = w.vread_parts(dst, ins, "b32", 1)
        sv, sp = w.vread_parts(src, ins, "b32", 1)
        new_d, new_dp = dv[0].copy(), dp[0].copy()
        new_s, new_sp = sv[0].copy(), sp[0].copy()
        new_s[lo], new_d[hi] = dv[0][hi], sv[0][lo]
        new_sp[lo], new_dp[hi] = dp[0][hi], sp[0][lo]
        w.vwrite(src, new_s, new_sp)
        w.vwrite(dst, new_d, new_dp)

    return h


op("v_permlane16_swap_b32")(_permlane_swap(16))
op("v_permlane32_swap_b32")(_permlane_swap(32))

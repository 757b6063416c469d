"""gfx950 LDS transpose reads: ``ds_read_b64_tr_b8`` and ``ds_read_b64_tr_b16``.

Each lane reads 8 bytes at its own address (vaddr + offset), like ``ds_read_b64``; then
each 16-lane group exchanges elements. With ``E`` elements per lane (8 for b8, 4 for b16)
and ``g = 16 / E``, the group's reads form an ``E x 16`` element matrix whose row ``r`` is
what lanes ``g*r .. g*r + g - 1`` read, in lane order; lane ``L`` of the group receives
column ``L``: its element ``j`` is element ``L % E`` of lane ``g*j + L // E``'s read. That
is the MFMA operand layout when LDS holds the tile K-major (a read is a run of N or M at one
K): a lane ends up with ``E`` consecutive K of one column. Confirmed by Triton's gfx950 code
(``validation/``: the fp8 GEMM with a [K, N] B operand, the fp8 and bf16 chained dots); the
natural alternatives (8x8 transposes within lanes 0-7 / 8-15, or within even / odd lanes)
give O(1) errors there (``tests/test_emulator_coverage.py``).

The ISA requires EXEC to be all ones (the exchange reads every lane); a partial EXEC
stops the run. ``ds_read_b64_tr_b4`` and ``ds_read_b96_tr_b6`` (fp4 / fp6 operands, which
the MFMA here does not implement either) are not implemented.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from verifiers.gfx950.emulator.ops.ds import _addr, _issue, _lds_read, _to_regs
from verifiers.gfx950.emulator.ops.registry import op
from verifiers.gfx950.emulator.state import LANES

_ELEM_BYTES = {"ds_read_b64_tr_b8": 1, "ds_read_b64_tr_b16": 2}


@lru_cache(maxsize=None)
def transpose_source(elem_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """(source lane [64, E], source element [64, E]) of each lane's result element."""
    e = 8 // elem_bytes
    g = 16 // e  # lanes per 16-element row
    lane = np.arange(LANES)[:, None]
    j = np.arange(e)[None, :]
    src_lane = (lane // 16) * 16 + g * j + (lane % 16) // e
    return np.broadcast_to(src_lane, (LANES, e)).copy(), np.broadcast_to(lane % e, (LANES, e)).copy()


def _read_tr(w, ins):  # noqa: ANN001
    if not w.exec_all:
        raise w.ctx.unimplemented(ins, "transpose read with inactive lanes (the ISA requires EXEC all ones)")
    eb = _ELEM_BYTES[ins.mnemonic]
    addrs = _addr(w, ins) + int(ins.modifiers.get("offset", 0))
    raw, pois = _lds_read(w, ins, addrs, 8)  # [64, 8] bytes as each lane read them
    src_lane, src_elem = transpose_source(eb)
    cols = src_elem[:, :, None] * eb + np.arange(eb)  # [64, E, eb] byte within the source read
    rows = np.broadcast_to(src_lane[:, :, None], cols.shape)
    out = raw[rows, cols].reshape(LANES, 8)
    pout = pois[rows, cols].reshape(LANES, 8)
    vals, pbits = _to_regs(out, pout, "b64")
    _issue(w, ins, ins.operands[0].index, vals, pbits)


op("ds_read_b64_tr_b8", "ds_read_b64_tr_b16")(_read_tr)

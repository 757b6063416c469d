"""A CPU model of what the FlyDSL kernel's lanes load, multiply and store.

Nothing here runs FlyDSL. It replays the kernel's own index functions
(``flydsl_gemm.a_frag_offsets`` ...) over every block, wave, lane and 128-K step against
the real input buffers, with buffer-resource semantics (a load past the end returns
zeros, a store past the end is dropped), and models the scaled MFMA's register ABI as
documented for gfx950 ``v_mfma_scale_f32_16x16x128_f8f6f4`` with fp8 operands:

* operand: lane ``l`` carries row ``l % 16``; its bytes 0..15 are K[16 g, 16 g + 16)
  and bytes 16..31 are K[64 + 16 g, 64 + 16 g + 16), with ``g = l // 16``;
* scale: lane ``l``'s 32-bit scale operand, byte ``opsel``, is the e8m0 scale of row
  ``l % 16`` for the 32-wide K block ``l // 16`` of the instruction;
* result: lane ``l`` holds D[4 g + i, l % 16], i = 0..3.

(Sources for this ABI: the register maps in Composable Kernel's gfx950 mx-MFMA test,
which load fp8 rows in two 16-element chunks 64 apart and the scale of row ``l % 16``,
block ``l // 16`` per lane; FlyDSL's own ``mxfp4_preshuffle`` kernel, which packs its fp8
operands "two halves, 64 K apart" and gives lane ``l`` scale word ``l``.)

If the kernel's addressing, the shuffled layouts or the swap of A and B disagree, the
model's C differs from the oracle (``tests/test_mxfp8_kernel_map.py``). What the model
cannot check is FlyDSL's lowering itself; that needs the MI355X run in ``bench/``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import flydsl_gemm as fg

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import torch


def _bytes(t: "torch.Tensor") -> "np.ndarray":
    import torch

    return t.contiguous().view(torch.uint8).reshape(-1).cpu().numpy()


def _load(buf: "np.ndarray", word_offsets: "np.ndarray", nbytes: int) -> "np.ndarray":
    """Per-lane ``nbytes`` from a buffer resource at word offsets; OOB lanes read zeros."""
    import numpy as np

    start = np.asarray(word_offsets, dtype=np.int64) * 4
    inside = start + nbytes <= buf.size
    partial = (start < buf.size) & ~inside
    if partial.any():
        raise AssertionError("a lane straddles the end of a buffer; the model assumes whole-in or whole-out")
    idx = np.clip(start, 0, max(buf.size - nbytes, 0))[:, None] + np.arange(nbytes)
    out = buf[idx]
    out[~inside] = 0
    return out


def _fp8(b: "np.ndarray") -> "np.ndarray":
    import numpy as np
    import torch

    return torch.from_numpy(np.ascontiguousarray(b)).view(torch.float8_e4m3fn).to(torch.float64).numpy()


def _e8m0(b: "np.ndarray") -> "np.ndarray":
    import numpy as np

    return np.ldexp(1.0, b.astype(np.int64) - 127)


def _operand(frag: "np.ndarray", scale_dwords: "np.ndarray", opsel: int) -> "np.ndarray":
    """[16, 128] float64 dequantised operand of one MFMA from 64 lanes' bytes + scales."""
    import numpy as np

    lane = np.arange(64)
    g, r = lane // 16, lane % 16
    vals = _fp8(frag)  # [64, 32]
    x = np.zeros((16, 128))
    for half in range(2):
        cols = 64 * half + 16 * g[:, None] + np.arange(16)
        x[r[:, None], cols] = vals[:, 16 * half : 16 * half + 16]
    s = np.zeros((16, 4))
    s[r, g] = _e8m0(scale_dwords[:, opsel])
    return x * np.repeat(s, 32, axis=1)


def run(inputs: "dict[str, torch.Tensor]", cfg: "fg.KernelConfig | None" = None) -> "torch.Tensor":
    """The C (bf16 [M, N]) the kernel would write, lane by lane."""
    import numpy as np
    import torch

    m, k = inputs["a"].shape
    n = inputs["b_shuffled"].shape[0]
    cfg = cfg or fg.pick_config(m, n)
    fg.check_shape(m, n, k, cfg)
    a, b = _bytes(inputs["a"]), _bytes(inputs["b_shuffled"])
    sa, sb = _bytes(inputs["a_scale_shuffled"]), _bytes(inputs["b_scale_shuffled"])
    c = np.full(m * n, np.nan, dtype=np.float32)  # poisoned: every element must be written
    lane = np.arange(64)
    g, r = lane // 16, lane % 16
    tiles = fg.WAVE_TILE // 16
    grid = -(-m // cfg.block_m) * (n // cfg.block_n)
    for bid in range(grid):
        for wave in range(fg.WAVES):
            m_base, n_base = fg.wave_origin(bid, wave, n, cfg)
            acc = np.zeros((tiles, tiles, 16, 16))
            for step in range(k // fg.MFMA_K):
                bf = [np.concatenate([_load(b, o, 16) for o in fg.b_frag_offsets(n_base // 16 + j, step, lane, k)], 1)
                      for j in range(tiles)]
                af = [np.concatenate([_load(a, o, 16) for o in fg.a_frag_offsets(m_base + 16 * t + r, step, g, k)], 1)
                      for t in range(tiles)]
                s_b = _load(sb, fg.scale_offset(step, g, r, n_base, n), 4)
                s_a = _load(sa, fg.scale_offset(step, g, r, m_base, m), 4)
                for j in range(tiles):
                    x = _operand(bf[j], s_b, opsel=j)  # MFMA A slot: B tile j
                    for t in range(tiles):
                        y = _operand(af[t], s_a, opsel=t)  # MFMA B slot: A tile t
                        acc[j, t] += x @ y.T  # D[n_local, m_local]
            for j in range(tiles):
                for t in range(tiles):
                    words = fg.c_store_word(j, t, g, r, m_base, n_base, n)  # one 8-byte store per lane
                    vals = acc[j, t][4 * g[:, None] + np.arange(4), r[:, None]]  # [64, 4]
                    for lane_id in range(64):
                        start = 2 * int(words[lane_id])
                        if (start + 4) * 2 <= m * n * 2:  # stores past the buffer are dropped
                            c[start : start + 4] = vals[lane_id]
    return torch.from_numpy(c).view(m, n).to(torch.bfloat16)

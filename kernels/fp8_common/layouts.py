"""Host-side operand layouts shared by the fp8 GEMM reference kernels.

Everything here is a pure re-indexing (a ``view`` / ``permute`` / ``contiguous``):
no value changes, so every shuffle has an exact inverse. torch is imported lazily.

Weight preshuffle (``preshuffle_b``)
------------------------------------
The CK / aiter "bpreshuffle" layout, i.e. what ``shuffle_weight(w, layout=(16, 16))``
produces. For a weight ``w[N, K]`` with 1-byte elements (fp8 or uint8) and
``layout=(IN, IK) = (16, 16)``:

* ``BN = IN = 16`` rows of N per tile, ``BK = 2 * IK = 32`` elements of K per tile,
  ``KP = 16 // element_size = 16`` elements per 16-byte packet.
* The tensor is cut into ``[BN, BK]`` tiles, stored tile-row major
  (all K tiles of N-rows 0..15 first, then rows 16..31, ...). Inside a tile the
  ``BK / KP = 2`` packets of a row are split apart: first the first 16 bytes of all
  16 rows, then the second 16 bytes of all 16 rows.

Element ``w[n, k]`` lands at flat position::

    n0, n1 = divmod(n, BN)            # tile row, row inside tile
    k0, kr = divmod(k, BK)            # tile column, column inside tile
    kh, k1 = divmod(kr, KP)           # packet, byte inside packet
    flat = (((n0 * (K // BK) + k0) * (BK // KP) + kh) * BN + n1) * KP + k1

and the result keeps the shape ``[N, K]`` (it is a permuted copy viewed as the
original shape), like CK's. So one 16x32-byte tile is 512 contiguous bytes; a
16-row x 128-K slab (one MFMA K step of one 16-column B tile) is 2 KiB contiguous,
and the MFMA lane ``l`` (column ``l % 16``, K block ``l // 16``) finds its 32 bytes
as two 16-byte packets at ``(l // 16) * 512 + n1 * 16`` and ``+ 256``.

mxfp8 scale shuffles (``shuffle_mxfp8_a_scale`` / ``shuffle_mxfp8_b_scale``)
--------------------------------------------------------------------------
Input: the quantiser's e8m0 exponent bytes, row major ``[R, K/32]`` (R = M for A,
R = N for B), one byte per (row, 32-wide K block). Output: the same bytes, K-block
major and with the four 16-row tiles of each 64-row group interleaved per dword::

    r0, rr = divmod(r, 64)            # 64-row group
    t,  r1 = divmod(rr, 16)           # 16-row tile inside the group, row inside tile
    out_flat = ((kb * (R // 64) + r0) * 16 + r1) * 4 + t

returned as a ``[K/32, R]`` uint8 tensor (row ``kb`` holds all R scales of K block
``kb``). Why: a scaled MFMA's sixteen lanes of one K-block group read sixteen
consecutive rows of one K block, which is one contiguous run here (instead of sixteen
strided bytes in ``[R, K/32]``); and a lane's four 16-row tiles share its K block and
differ by 16 rows, so their four scale bytes are one dword from which the MFMA's
``opsel`` picks the byte with no VALU work. This follows the layout described in the
mxfp8 8-wave pull request (``shuffle_mxfp8_a_scale``); it is this project's own
definition, checked against the kernel that consumes it, not claimed byte-identical
to any upstream buffer. R must be a multiple of 64.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: rows of a 64-row scale group: four 16-row MFMA tiles packed into one dword
SCALE_GROUP_ROWS = 64
SCALE_TILE_ROWS = 16
MX_BLOCK = 32  # elements of K per ue8m0 scale


def _fp8_like_dtypes() -> tuple:
    import torch

    names = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu")
    return (torch.uint8, torch.int8) + tuple(getattr(torch, n) for n in names if hasattr(torch, n))


def _check_2d(x: "torch.Tensor", what: str) -> None:
    import torch

    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{what}: expected a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"{what}: expected a 2-D tensor, got shape {tuple(x.shape)}")


def _tile_dims(w: "torch.Tensor", layout: tuple[int, int], what: str) -> tuple[int, int, int]:
    if (
        not isinstance(layout, tuple)
        or len(layout) != 2
        or not all(isinstance(v, int) and v > 0 for v in layout)
    ):
        raise ValueError(f"{what}: layout must be a pair of positive ints (IN, IK), got {layout!r}")
    _check_2d(w, what)
    esize = w.element_size()
    if 16 % esize:
        raise ValueError(f"{what}: element size {esize} bytes does not divide a 16-byte packet")
    bn, bk, kp = layout[0], 2 * layout[1], 16 // esize
    if bk % kp:
        raise ValueError(f"{what}: layout {layout} gives BK={bk}, not a multiple of the {kp}-element packet")
    n, k = w.shape
    if n % bn or k % bk:
        raise ValueError(
            f"{what}: shape [N={n}, K={k}] must have N a multiple of {bn} and K a multiple of "
            f"{bk} for layout {layout} (pad the weight before shuffling)"
        )
    return bn, bk, kp


def preshuffle_b(w: "torch.Tensor", layout: tuple[int, int] = (16, 16)) -> "torch.Tensor":
    """CK/aiter 16x16 weight preshuffle of ``w[N, K]`` (see the module docstring).

    Accepts any dtype whose element size divides 16 bytes (fp8 or uint8 for the fp8
    kernels); returns a new contiguous tensor of the same shape and dtype.
    """
    bn, bk, kp = _tile_dims(w, layout, "preshuffle_b")
    n, k = w.shape
    tiles = w.contiguous().view(n // bn, bn, k // bk, bk // kp, kp)
    # (n0, n1, k0, kh, k1) -> (n0, k0, kh, n1, k1)
    return tiles.permute(0, 2, 3, 1, 4).contiguous().view(n, k)


def unshuffle_b(ws: "torch.Tensor", layout: tuple[int, int] = (16, 16)) -> "torch.Tensor":
    """Inverse of :func:`preshuffle_b`: ``unshuffle_b(preshuffle_b(w)) == w`` bitwise."""
    bn, bk, kp = _tile_dims(ws, layout, "unshuffle_b")
    n, k = ws.shape
    tiles = ws.contiguous().view(n // bn, k // bk, bk // kp, bn, kp)
    # (n0, k0, kh, n1, k1) -> (n0, n1, k0, kh, k1)
    return tiles.permute(0, 3, 1, 2, 4).contiguous().view(n, k)


def _check_scale(x: "torch.Tensor", what: str, rows: str) -> tuple[int, int]:
    _check_2d(x, what)
    if x.dtype not in _fp8_like_dtypes() or x.element_size() != 1:
        raise TypeError(f"{what}: expected 1-byte e8m0 exponents (uint8), got dtype {x.dtype}")
    r, kb = x.shape
    if r % SCALE_GROUP_ROWS:
        raise ValueError(
            f"{what}: {rows}={r} must be a multiple of {SCALE_GROUP_ROWS} (four 16-row tiles "
            f"per packed dword); pad the operand before quantising, the packed layout cannot be "
            f"repaired by a reshape"
        )
    if kb == 0:
        raise ValueError(f"{what}: K/32 must be positive, got shape {tuple(x.shape)}")
    return r, kb


def _shuffle_scale(x: "torch.Tensor", what: str, rows: str) -> "torch.Tensor":
    import torch

    r, kb = _check_scale(x, what, rows)
    g = x.contiguous().view(torch.uint8).view(r // 64, 4, 16, kb)  # (r0, t, r1, kb)
    return g.permute(3, 0, 2, 1).contiguous().view(kb, r)  # (kb, r0, r1, t)


def _unshuffle_scale(xs: "torch.Tensor", what: str, rows: str) -> "torch.Tensor":
    import torch

    _check_2d(xs, what)
    kb, r = xs.shape
    # validate as the [R, K/32] tensor it came from
    _check_scale(xs.new_empty((r, kb)), what, rows)
    g = xs.contiguous().view(torch.uint8).view(kb, r // 64, 16, 4)  # (kb, r0, r1, t)
    return g.permute(1, 3, 2, 0).contiguous().view(r, kb)  # (r0, t, r1, kb)


def shuffle_mxfp8_a_scale(x_exps: "torch.Tensor") -> "torch.Tensor":
    """A scales ``[M, K/32]`` e8m0 bytes -> ``[K/32, M]`` uint8, K-block major, dword-packed."""
    return _shuffle_scale(x_exps, "shuffle_mxfp8_a_scale", "M")


def unshuffle_mxfp8_a_scale(a_sc: "torch.Tensor") -> "torch.Tensor":
    """Inverse of :func:`shuffle_mxfp8_a_scale`: ``[K/32, M]`` -> ``[M, K/32]`` uint8."""
    return _unshuffle_scale(a_sc, "unshuffle_mxfp8_a_scale", "M")


def shuffle_mxfp8_b_scale(w_exps: "torch.Tensor") -> "torch.Tensor":
    """B scales ``[N, K/32]`` e8m0 bytes -> ``[K/32, N]`` uint8, same packing as A's."""
    return _shuffle_scale(w_exps, "shuffle_mxfp8_b_scale", "N")


def unshuffle_mxfp8_b_scale(b_sc: "torch.Tensor") -> "torch.Tensor":
    """Inverse of :func:`shuffle_mxfp8_b_scale`: ``[K/32, N]`` -> ``[N, K/32]`` uint8."""
    return _unshuffle_scale(b_sc, "unshuffle_mxfp8_b_scale", "N")

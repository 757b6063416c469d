"""fp8_common.layouts: every shuffle against a plain index-by-index reference."""
from __future__ import annotations

import pytest
import torch

from skill_kernels.fp8_common import layouts as L


def _bytes(shape: tuple[int, int], seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)


def _ref_preshuffle(w: torch.Tensor, bn: int = 16, bk: int = 32, kp: int = 16) -> torch.Tensor:
    """Loop reference written straight from the documented index formula."""
    n_rows, k_cols = w.shape
    flat = torch.empty(n_rows * k_cols, dtype=w.dtype)
    for n in range(n_rows):
        n0, n1 = divmod(n, bn)
        for k in range(k_cols):
            k0, kr = divmod(k, bk)
            kh, k1 = divmod(kr, kp)
            dst = (((n0 * (k_cols // bk) + k0) * (bk // kp) + kh) * bn + n1) * kp + k1
            flat[dst] = w[n, k]
    return flat.view(n_rows, k_cols)


def _ref_scale_shuffle(x: torch.Tensor) -> torch.Tensor:
    rows, kblocks = x.shape
    flat = torch.empty(rows * kblocks, dtype=torch.uint8)
    for r in range(rows):
        r0, rr = divmod(r, 64)
        t, r1 = divmod(rr, 16)
        for kb in range(kblocks):
            flat[((kb * (rows // 64) + r0) * 16 + r1) * 4 + t] = x[r, kb]
    return flat.view(kblocks, rows)


@pytest.mark.parametrize("shape", [(16, 32), (32, 64), (48, 256)])
def test_preshuffle_b_matches_index_reference(shape):
    w = _bytes(shape, seed=shape[0])
    assert torch.equal(L.preshuffle_b(w), _ref_preshuffle(w))


def test_preshuffle_b_known_positions():
    # w[n, k] = (n * 64 + k) mod 256 on a [32, 64] weight
    w = (torch.arange(32 * 64) % 256).to(torch.uint8).view(32, 64)
    ws = L.preshuffle_b(w).flatten()
    assert ws[16].item() == 64  # packet 0 of row 1 follows packet 0 of row 0
    assert ws[256 + 16].item() == 64 + 16  # packet 1 of row 1: element (1, 16)
    assert ws[512].item() == 32  # second K tile of rows 0..15 starts at element (0, 32)
    assert ws[1024].item() == (16 * 64) % 256  # rows 16..31 start after both K tiles


def test_preshuffle_b_round_trip_fp8_dtype():
    w = (torch.randn(64, 128) * 4).to(torch.float8_e4m3fn)
    ws = L.preshuffle_b(w)
    assert ws.dtype == w.dtype and ws.shape == w.shape
    assert torch.equal(L.unshuffle_b(ws).view(torch.uint8), w.view(torch.uint8))
    assert not torch.equal(ws.view(torch.uint8), w.view(torch.uint8))


@pytest.mark.parametrize("shape", [(8, 32), (16, 48), (16, 0 + 16)])
def test_preshuffle_b_rejects_bad_shapes(shape):
    with pytest.raises(ValueError, match="multiple of"):
        L.preshuffle_b(_bytes(shape))


def test_preshuffle_b_rejects_non_2d_and_bad_layout():
    with pytest.raises(ValueError, match="2-D"):
        L.preshuffle_b(torch.zeros(2, 16, 32, dtype=torch.uint8))
    with pytest.raises(ValueError, match="layout"):
        L.preshuffle_b(_bytes((16, 32)), layout=(16,))


@pytest.mark.parametrize("shuffle,unshuffle", [
    (L.shuffle_mxfp8_a_scale, L.unshuffle_mxfp8_a_scale),
    (L.shuffle_mxfp8_b_scale, L.unshuffle_mxfp8_b_scale),
])
@pytest.mark.parametrize("shape", [(64, 1), (64, 8), (192, 5)])
def test_scale_shuffle_matches_index_reference(shuffle, unshuffle, shape):
    x = _bytes(shape, seed=sum(shape))
    xs = shuffle(x)
    assert xs.shape == (shape[1], shape[0]) and xs.dtype == torch.uint8
    assert torch.equal(xs, _ref_scale_shuffle(x))
    assert torch.equal(unshuffle(xs), x)


def test_scale_shuffle_dword_packing():
    # rows 0, 16, 32, 48 of K block 2 are the four bytes of dword 0 of row 2
    x = torch.zeros(64, 4, dtype=torch.uint8)
    for t in range(4):
        x[16 * t, 2] = 100 + t
    xs = L.shuffle_mxfp8_a_scale(x)
    assert xs[2, :4].tolist() == [100, 101, 102, 103]


def test_scale_shuffle_accepts_e8m0_dtype():
    if not hasattr(torch, "float8_e8m0fnu"):
        pytest.skip("torch without float8_e8m0fnu")
    x = _bytes((64, 4))
    assert torch.equal(L.shuffle_mxfp8_a_scale(x.view(torch.float8_e8m0fnu)), L.shuffle_mxfp8_a_scale(x))


def test_scale_shuffle_errors():
    with pytest.raises(ValueError, match="M=96 must be a multiple of 64"):
        L.shuffle_mxfp8_a_scale(_bytes((96, 4)))
    with pytest.raises(ValueError, match="N=32 must be a multiple of 64"):
        L.shuffle_mxfp8_b_scale(_bytes((32, 4)))
    with pytest.raises(TypeError, match="e8m0"):
        L.shuffle_mxfp8_a_scale(torch.zeros(64, 4))
    with pytest.raises(ValueError, match="2-D"):
        L.shuffle_mxfp8_a_scale(torch.zeros(64, dtype=torch.uint8))
    with pytest.raises(ValueError, match="M=32"):
        L.unshuffle_mxfp8_a_scale(_bytes((4, 32)))

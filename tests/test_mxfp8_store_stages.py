"""The mxfp8 8-wave kernel's swap-ab store stages (``flydsl_8wave.widen_rows``, the very
function the kernel traces) replayed on a CPU model of one wave: 64 lanes,
``v_permlane16_swap_b32`` (odd 16-lane rows of the first operand <-> even rows of the
second), ``ds_bpermute_b32`` (lane i reads lane addr_i / 4) and a per-lane select. Every lane
must end with contiguous columns of its own row: 64 bytes (block_n 256) or 16-byte chunks
(block_n 128), each (row, column) of the wave's tile exactly once. Plus the PR's dispatch
rule ``pick_block_n`` against its table. No FlyDSL, no GPU."""
from __future__ import annotations

import numpy as np
import pytest

from skill_kernels.flydsl_mxfp8_8wave_gemm.flydsl_8wave import pick_block_n, widen_rows

LANES = 64


class LaneOps:
    """One wave's cross-lane primitives on [64] arrays."""

    @staticmethod
    def swap(first, second):
        a, b = first.copy(), second.copy()
        for odd, even in ((slice(16, 32), slice(0, 16)), (slice(48, 64), slice(32, 48))):
            a[odd], b[even] = second[even], first[odd]
        return a, b

    @staticmethod
    def bpermute(addr, value):
        return value[np.asarray(addr) // 4]

    @staticmethod
    def select(cond, a, b):
        return np.where(cond, a, b)


def _swap_ab_words(tiles: int):
    """Lane (g, r) after the swapped MFMA: row r, columns 16 j + 4 g .. + 3 of tile j, two
    words of two bf16 each; a word is encoded as ``1000 * row + first column``."""
    lane = np.arange(LANES)
    g, r = lane // 16, lane % 16
    words = [[1000 * r + 16 * j + 4 * g, 1000 * r + 16 * j + 4 * g + 2] for j in range(tiles)]
    return words, g, r


@pytest.mark.parametrize(("tiles", "chunk_count"), [(8, 4), (4, 2)])
def test_store_stages_give_each_lane_contiguous_columns_of_its_row(tiles, chunk_count):
    words, g, r = _swap_ab_words(tiles)
    chunks = widen_rows(words, g, r, LaneOps)
    assert len(chunks) == chunk_count
    seen = np.zeros((16, 16 * tiles), dtype=int)
    for col, ws in chunks:
        col = np.broadcast_to(np.asarray(col), (LANES,))
        for w, word in enumerate(ws):
            # 4 words = 8 contiguous columns of the lane's own row, starting at `col`
            assert np.array_equal(word, 1000 * r + col + 2 * w), (tiles, w)
            for lane in range(LANES):
                seen[r[lane], col[lane] + 2 * w: col[lane] + 2 * w + 2] += 1
    assert (seen == 1).all()  # the wave's rows x columns, each exactly once
    if tiles == 8:  # 64 contiguous bytes per lane: chunk s at 32 g + 8 s
        starts = [np.broadcast_to(np.asarray(c), (LANES,)) for c, _ in chunks]
        assert all(np.array_equal(starts[s], 32 * g + 8 * s) for s in range(4))


def test_a_wrong_swap_direction_is_caught():
    """The model is not blind: swapping the even rows of the first operand instead breaks it."""

    class Wrong(LaneOps):
        @staticmethod
        def swap(first, second):
            b, a = LaneOps.swap(second, first)
            return a, b

    words, g, r = _swap_ab_words(8)
    col, ws = widen_rows(words, g, r, Wrong)[0]
    assert not np.array_equal(ws[0], 1000 * r + np.asarray(col))


# the PR's table: (N, M) -> the tile its timing picked
PR_TILES = {(5120, 1024): 128, (5120, 1280): 128, (5120, 1536): 128, (5120, 1792): 256, (5120, 2048): 256,
            (5120, 4096): 256, (5120, 16384): 256, (8192, 1024): 128, (8192, 1280): 256, (8192, 1536): 256,
            (8192, 1792): 256, (8192, 2048): 256, (8192, 4096): 256, (8192, 16384): 256}


def test_pick_block_n_follows_the_wide_grid_and_the_prs_table():
    for (n, m), tile in PR_TILES.items():
        assert pick_block_n(m, n) == tile, (m, n)
    assert pick_block_n(16384, 384) == 128  # N not a multiple of 256: only the narrow tile fits


def test_the_widened_store_kernel_is_emulated_at_two_shapes_per_tile_with_tails():
    """Both tiles of the recipe run with the permlane16_swap (+ ds_bpermute) stores on the
    emulator (tests/test_emulator_flydsl.py, tests/test_emulator_verifier.py), each at two
    shapes with an M tail; the recipe arm's kernels are what pick_block_n picks at their dims.
    The emulator implements both exchange opcodes the kernel needs."""
    from skill_kernels.flydsl_mxfp8_8wave_gemm import gfx950_targets as t
    from verifiers.gfx950.emulator.ops import handler_for

    assert handler_for("v_permlane16_swap_b32_e32") is not None and handler_for("ds_bpermute_b32") is not None
    by_arm: dict[str, list] = {}
    for a in t.EMULATED_ARMS:
        if a.arm.startswith("flydsl_8wave"):
            by_arm.setdefault(a.arm, []).append(a)
    for arm in ("flydsl_8wave", "flydsl_8wave_bn256"):
        declared = by_arm[arm]
        assert len(declared) >= 2 and any(a.dims["M"] % 256 for a in declared), arm
        for a in declared:
            cfg = a.kernels["gemm"].config
            assert cfg["stores"] == "permlane" and a.expect_parity, a.name
            want = pick_block_n(a.dims["M"], a.dims["N"]) if arm == "flydsl_8wave" else 256
            assert cfg["block_n"] == want and cfg["dispatch"] == (arm == "flydsl_8wave"), a.name

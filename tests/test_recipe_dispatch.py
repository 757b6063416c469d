"""Every recipe row's kernel is the one the code dispatches to, and the one the emulator runs.

For the block-scale card (``recipe.config_for``) and the mxfp8 card (``flydsl_8wave.pick_block_n``):
each validated shape of each shape class (the catalog's own ``select_shape_class`` on MI355X's
256 CUs picks that class) is sent to its row's kernel; and each row's kernel is declared on the
gfx950 emulator (``EMULATED_ARMS``) under the arm the card's recipe runs, at two or more shapes of
which at least one has a tail. The emulated runs themselves are in tests/test_emulator_flydsl.py
(every declared arm) and tests/test_emulator_verifier.py (through the verifier). No FlyDSL.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from skill_kernels.flydsl_fp8_blockscale_gemm import gfx950_targets as bs_targets
from skill_kernels.flydsl_fp8_blockscale_gemm.flydsl_8wave import BLOCK_M as BS_BLOCK_M_8W
from skill_kernels.flydsl_fp8_blockscale_gemm.flydsl_8wave import CARD_CONFIG_8WAVE, EightWaveConfig
from skill_kernels.flydsl_fp8_blockscale_gemm.flydsl_gemm import BlockscaleConfig
from skill_kernels.flydsl_fp8_blockscale_gemm.recipe import config_for
from skill_kernels.flydsl_mxfp8_8wave_gemm import gfx950_targets as mx_targets
from skill_kernels.flydsl_mxfp8_8wave_gemm.flydsl_8wave import BLOCK_M as MX_BLOCK_M
from skill_kernels.flydsl_mxfp8_8wave_gemm.flydsl_8wave import pick_block_n
from skill_server.cards.catalog import Catalog
from skill_server.cards.shapes import select_shape_class

SKILLS = Path(__file__).parent.parent / "skills"
MI355X_CUS = 256


@pytest.fixture(scope="module")
def catalog():
    return Catalog.load(SKILLS)


def _rows(catalog, card_id):
    classes = catalog.get(card_id).card.shape_classes
    for cls in classes:
        for v in cls.validated_shapes:
            sel = select_shape_class(classes, v.M, v.N, v.K, MI355X_CUS)
            assert sel is not None and sel.class_id == cls.id, (card_id, cls.id, (v.M, v.N, v.K))
            yield cls, (v.M, v.N, v.K)


def test_blockscale_config_for_sends_each_shape_class_to_its_rows_core(catalog):
    seen = set()
    for cls, (m, n, k) in _rows(catalog, "flydsl_fp8_blockscale_gemm"):
        cfg = config_for(m, n, k)
        if cls.recipe.core.startswith("8-wave"):
            assert cfg == CARD_CONFIG_8WAVE and cls.recipe.config["schedule"] == cfg.schedule, (cls.id, m, n, k)
        else:
            assert isinstance(cfg, BlockscaleConfig) and cfg.tile_n == cls.recipe.config["tile_n"], (cls.id, m, n, k)
            assert cfg.tile_m == cls.recipe.config["tile_m"] and cfg.waves_per_eu == cls.recipe.config["waves_per_eu"]
        seen.add(type(cfg))
    assert seen == {BlockscaleConfig, EightWaveConfig}  # both rows' cores are reached


def test_mxfp8_pick_block_n_sends_each_shape_class_to_its_rows_tile(catalog):
    seen = set()
    for cls, (m, n, _) in _rows(catalog, "flydsl_mxfp8_8wave_gemm"):
        assert pick_block_n(m, n) == cls.recipe.config["block_n"], (cls.id, m, n)
        assert cls.recipe.config["BLOCK_M"] == MX_BLOCK_M
        seen.add(pick_block_n(m, n))
    assert seen == {128, 256}


def _emulated(targets, arm: str) -> list:
    return [a for a in targets.EMULATED_ARMS if a.arm == arm and a.expect_parity]


def test_each_blockscale_rows_kernel_is_emulated_at_two_shapes_with_a_tail():
    """The 4-wave row under the recipe arm (what config_for picks at each dims: K < 4096 there),
    the 8-wave cluster row under its own arm (config_for reaches it only at K >= 4096)."""
    recipe = _emulated(bs_targets, "flydsl_recipe")
    for a in recipe:
        cfg = config_for(a.dims["M"], a.dims["N"], a.dims["K"])
        assert isinstance(cfg, BlockscaleConfig), a.name
        assert a.kernels["gemm"].config["tile_n"] == cfg.tile_n and a.kernels["gemm"].config["xcd_swizzle"] == cfg.xcd_swizzle
    assert len(recipe) >= 2 and any(a.dims["M"] % 64 for a in recipe)
    cluster = _emulated(bs_targets, "flydsl_8wave_cluster")
    assert all(a.kernels["gemm"].config["schedule"] == "cluster" for a in cluster)
    assert len(cluster) >= 2 and any(a.dims["M"] % BS_BLOCK_M_8W for a in cluster)
    assert any(a.dims["K"] >= 1024 for a in cluster)  # the deeper K loop (192x512x1024)


def test_each_mxfp8_rows_kernel_is_emulated_at_two_shapes_with_a_tail():
    """Emulation-sized grids are all launch-starved (pick_block_n -> 128), so the wide-grid row's
    tile runs under flydsl_8wave_bn256; the recipe arm's kernels are what pick_block_n picks."""
    for arm, block_n in (("flydsl_8wave", 128), ("flydsl_8wave_bn256", 256)):
        declared = _emulated(mx_targets, arm)
        assert len(declared) >= 2 and any(a.dims["M"] % MX_BLOCK_M for a in declared), arm
        for a in declared:
            assert a.kernels["gemm"].config["block_n"] == block_n and a.kernels["gemm"].config["stores"] == "permlane"
            if arm == "flydsl_8wave":
                assert pick_block_n(a.dims["M"], a.dims["N"]) == block_n, a.name


@pytest.mark.flydsl
def test_the_emulated_recipe_arm_refuses_a_shape_where_pick_block_n_picks_another_tile():
    """The recipe arm's emulated kernel stands for ``flydsl_8wave.build``: at a shape where the
    dispatch picks block_n=256 (129 wide tiles) its block_n=128 kernel must not run in its name."""
    from tests.emulator_support import require_flydsl_toolchain, require_llvm

    require_llvm()
    require_flydsl_toolchain()
    from skill_kernels.flydsl_mxfp8_8wave_gemm import flydsl_8wave
    from verifiers.gfx950.emulator.flydsl_arm import emulated_kernels
    from verifiers.problem import load_problem

    problem = load_problem("flydsl_mxfp8_8wave_gemm")
    kernels = emulated_kernels("flydsl_mxfp8_8wave_gemm", "w8_recipe_small")
    dims = {"M": 129 * 256, "N": 256, "K": 256}  # built, never launched
    assert pick_block_n(dims["M"], dims["N"]) == 256
    with pytest.raises(ValueError, match=r"compiled with block_n=128, but pick_block_n\(33024, 256\) = 256"):
        flydsl_8wave.build_emulated(problem.make_inputs(dims, 0, "cpu"), problem.make_outputs(dims, "cpu"), kernels)
    small = {"M": 128, "N": 128, "K": 256}
    flydsl_8wave.build_emulated(problem.make_inputs(small, 0, "cpu"), problem.make_outputs(small, "cpu"), kernels)

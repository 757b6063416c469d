"""Dtypes read from kernel names by the libraries' naming conventions (issue 24, item 10):
the position says which dtype belongs to the operands and which to the output, so CK's
``..._f8_f8_bf16`` is an fp8 GEMM writing bf16, never a bf16 GEMM. Names are the ones real
profiles print (hipBLASLt/Tensile, cuBLASLt nvjet and xmma, CUTLASS 2.x/3.x, CK instance
names and device symbols, FBGEMM, aiter asm, torch's ATen kernels)."""
from __future__ import annotations

from pathlib import Path

import pytest
from mcp_support import build, text, with_client

from skill_server.cards.catalog import Catalog
from skill_server.cards.vocabulary import vocabulary
from skill_server.matching.hotspot import Hotspot
from skill_server.matching.matcher import match_hotspot

REPO = Path(__file__).resolve().parents[1]
BS = "flydsl_fp8_blockscale_gemm"
# a CK device symbol as rocprofv3 prints it (tests/fixtures/profiles/rocprofv3_kernel_trace.csv)
CK_SYMBOL = next(
    cell for line in (REPO / "tests/fixtures/profiles/rocprofv3_kernel_trace.csv").read_text().splitlines()
    for cell in line.split('"') if cell.startswith("void ck::kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale"))

E4M3, E5M2, FNUZ = "fp8_e4m3", "fp8_e5m2", "fp8_e4m3_fnuz"
# name -> (operand dtypes A then B, duplicates dropped; output dtype or None)
REAL_NAMES = {
    # CK instance names: _<A>_<B>_<out>_<layouts>
    "device_gemm_ab_scale_xdl_f8_f8_bf16_mk_nk_mn_128_128_128_comp_default_instances": ((E4M3,), "bf16"),
    "device_gemm_multiply_multiply_xdl_f8_f8_bf16_mk_nk_mn_comp_default_instances": ((E4M3,), "bf16"),
    "device_gemm_xdl_universal_bf16_i4_bf16_mk_nk_mn_mem_v2_default_instances": (("bf16", "int4"), "bf16"),
    "device_gemm_xdl_universal_f16_f8_f16_mk_kn_mn_comp_default_instances": (("fp16", E4M3), "fp16"),
    # CK device symbol: template arguments <layouts..., ADataType, AScale, BDataType, ...>
    CK_SYMBOL: ((E4M3,), None),
    # ck_tile symbols: <..., ...PipelineProblem<ADataType, BDataType, AccDataType, ...>
    ("void ck_tile::kentry<1, ck_tile::GemmKernel<ck_tile::GemmTile1DPartitioner<ck_tile::TileGemmShape<"
     "ck_tile::sequence<256, 256, 128> > >, ck_tile::GemmPipelineAgBgCrCompV3<ck_tile::UniversalGemmPipelineProblem<"
     "ck_tile::fp8_t, ck_tile::fp8_t, float, ck_tile::TileGemmShape<ck_tile::sequence<256, 256, 128> > > > > >"
     "(ck_tile::GemmKernelArgs)"): ((E4M3,), None),
    ("void ck_tile::kentry<2, ck_tile::MoeFlatmmKernel<ck_tile::GemmSpatiallyLocalTilePartitioner<int>, "
     "ck_tile::F16xMXF4FlatmmPipelineAGmemBGmemCRegV1<ck_tile::F16xMXF4FlatmmPipelineProblem<std::bfloat16_t, "
     "ck_tile::pk_float4_e2m1_t, float, ck_tile::TileGemmShape<int> > > > >(int)"): (("bf16", "fp4_e2m1"), None),
    # torch ATen's rowwise grouped mm, FBGEMM's glued <A><B><out>
    "_f8_f8_bf16_rowwise_grouped_mm_cuda": ((E4M3,), "bf16"),
    "f8f8bf16_blockwise_impl": ((E4M3,), "bf16"),
    "fbgemm_gpu::bf16i4bf16_rowwise": (("bf16", "int4"), "bf16"),
    # hipBLASLt / Tensile: Cijk_<A>_<B>_<type><dest><compute>
    "Cijk_Alik_Bljk_F8BS_BH_Bias_HA_S_SAB_SAV_UserArgs_MT256x256x128_MI16x16x1": ((E4M3,), "bf16"),
    "Custom_Cijk_Alik_Bljk_F8B8BS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x128": ((E4M3, E5M2), "bf16"),
    "Cijk_Alik_Bljk_F8NBS_BH_UserArgs_MT128x128x64_MI16x16x1": ((FNUZ,), "bf16"),
    "Cijk_Alik_Bljk_F8F8S_BH_UserArgs_MT256x256x256_MI16x16x1_SN_LDSB0": ((E4M3,), E4M3),
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x16x128_MI16x16x1": (("bf16",), "bf16"),
    "Cijk_Alik_Bljk_BSS_BH_Bias_S_HA_S_SAV_UserArgs_MT16x16x1024_MI16x16x1_SN_LDSB1": (("bf16",), "fp32"),
    "Cijk_Ailk_Bjlk_SB_MT64x64x8_SN_1LDSB0_APM1": (("fp32",), None),
    "gemm_blockscale_e4m3_e4m3_bf16_256x128x128": ((E4M3,), "bf16"),
    # cuBLASLt nvjet (<A><B><C><compute><D> or <AB><compute><D>) and xmma (<A><C>_<B><compute>)
    "nvjet_sm90_qqtst_128x128_128x6_1x2_h_bz_ovscale_TNT": ((E4M3,), "bf16"),
    "nvjet_sm90_tst_256x160_64x4_1x2_h_bz_coopA_NNT": (("bf16",), "bf16"),
    "nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_NTN": (("fp16",), "fp16"),
    "sm89_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x64_stage3_warpsize2x2x1_tensor16x8x32": ((E4M3,), "bf16"),
    "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel":
        (("bf16",), "bf16"),
    # CUTLASS 3.x gemm_<A>_<B>_<acc>_<C>_<D>; 2.x <C>_<core>gemm_<A>
    "cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_void_f16_128x128x64_1x1x1_0_tnn_align16": ((E4M3,), "fp16"),
    "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_void_bf16_128x256x64_2x1x1_0_tnt_align8_warpspecialized": (("bf16",), "bf16"),
    "cutlass_80_tensorop_bf16_s16816gemm_bf16_128x128_32x3_tn_align8": (("bf16",), "bf16"),
    "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x64_32x4_nn_align8": (("bf16",), "bf16"),
    "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nn": (("bf16",), "bf16"),
    # aiter's CK 2-stage MoE instances (..._<A>_<B>_<out>) and FlyDSL's a<A>_w<B>_<out>
    "moe_ck2stages_gemm1_64x32x32x128_1x1_MulABScaleShuffled_v3_Nswizzle0_Quant3_MulRoutedWeight0_silu_FP4X2_FP4X2_B16":
        (("fp4_e2m1",), "bf16"),
    "moe_ck2stages_gemm2_256x32x128x128_1x4_MulABScaleExpertWeight_v3_Nswizzle0_Quant2_MulRoutedWeight1_F8_F8_B16":
        ((E4M3,), "bf16"),
    "flydsl_moe2_afp4_wfp4_bf16_t32x128x256_atomic": (("fp4_e2m1",), "bf16"),
    # aiter asm <operands>gemm_<out>; aiter CK instances and ops (a8w8: the one dtype word)
    "_ZN5aiter42fp8gemm_bf16_blockscale_BpreShuffle_64x128E": ((E4M3,), "bf16"),
    "a8w8_blockscale_bpreshuffle_1x128x128_256x64x256x128_16x16_16x16_8x32x1_8x32x1_1x32x1x8_8x8x1_1x2_intrawave_v1":
        ((E4M3,), None),
    "_w8a8_block_fp8_matmul": ((E4M3,), None),
}


@pytest.mark.parametrize("name", list(REAL_NAMES), ids=lambda n: n[:48])
def test_operand_and_output_dtypes_follow_each_librarys_naming_convention(name):
    found = vocabulary().dtypes_in(name)
    operands, output = REAL_NAMES[name]
    assert found is not None and (found.operands, found.output) == (operands, output), found


@pytest.mark.parametrize("name", ["fused_moe_kernel", "fp8_to_bf16_cast_kernel", "moe_gemm2_a8w4_mfma_moe2_cshuffle"])
def test_a_name_that_states_no_operand_dtype_stays_unknown(name):
    assert vocabulary().dtypes_in(name) is None


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.load(REPO / "skills")


def _dtype_reason(entry):
    return next(r for r in entry.reasons if r.criterion == "dtype")


@pytest.mark.parametrize("op_name", [
    "kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle_f8_f8_bf16_mk_nk_mn",  # CK's A_B_output spelling
    CK_SYMBOL,
])
def test_the_blockscale_card_applies_to_its_own_ck_kernel_whose_output_is_bf16(catalog, op_name):
    r = match_hotspot(Hotspot(op_name=op_name, gen="gfx950", scale_format="fp32_block"), catalog.index)
    assert [m.card_id for m in r.matches] == [BS], [(n.card_id, n.reasons[0].detail) for n in r.not_applicable]
    dtype = _dtype_reason(r.matches[0])
    assert dtype.status == "matched" and "operand dtype fp8_e4m3 (A and B)" in dtype.detail, dtype.detail


def test_the_ck_spelling_says_the_bf16_is_the_output(catalog):
    op = "kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle_f8_f8_bf16_mk_nk_mn"
    dtype = _dtype_reason(match_hotspot(Hotspot(op_name=op, gen="gfx950", scale_format="fp32_block"),
                                        catalog.index).matches[0])
    assert "'f8_f8_bf16'" in dtype.detail and "bf16 is the output dtype" in dtype.detail


@pytest.mark.parametrize("op_name,launch_op", [
    ("Cijk_Alik_Bljk_F8BS_BH_Bias_HA_S_SAB_SAV_UserArgs_MT256x256x128_MI16x16x1", "aten::_scaled_mm"),
    ("nvjet_sm90_qqtst_128x256_128x4_2x1_v_bz_Ablk128_Bvec128_TNT", "aten::_scaled_mm_v2"),
    ("cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_void_bf16_128x128x128_1x1x1_0_tnt_align16", "aten::_scaled_mm"),
])
def test_blas_kernels_under_scaled_mm_read_their_operands_not_their_output(catalog, op_name, launch_op):
    r = match_hotspot(Hotspot(op_name=op_name, launch_op=launch_op, gen="gfx950", scale_format="fp32_block"),
                      catalog.index)
    assert [m.card_id for m in r.matches] == [BS]
    assert _dtype_reason(r.matches[0]).status == "matched"


def test_mixed_operands_fail_on_the_operand_the_card_does_not_cover(catalog):
    op = "Custom_Cijk_Alik_Bljk_F8B8BS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x128_MI16x16x1"
    r = match_hotspot(Hotspot(op_name=op, launch_op="aten::_scaled_mm", gen="gfx950", scale_format="fp32_block"),
                      catalog.index)
    na = next(n for n in r.not_applicable if n.card_id == BS)
    dtype = _dtype_reason(na)
    assert dtype.status == "failed" and "fp8_e5m2 is not one of" in dtype.detail, dtype.detail


def test_a_given_dtype_still_decides_over_the_name(catalog):
    op = "kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle_f8_f8_bf16_mk_nk_mn"
    r = match_hotspot(Hotspot(op_name=op, gen="gfx950", scale_format="fp32_block", dtype="bf16"), catalog.index)
    assert BS in [n.card_id for n in r.not_applicable]


def test_match_skill_over_mcp_applies_the_card_to_the_ck_kernel():
    hotspot = {"op_name": "kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle_f8_f8_bf16_mk_nk_mn",
               "gen": "MI355X", "scale_format": "fp32_block"}
    result = with_client(build(), lambda c: c.call_tool("match_skill", {"hotspot": hotspot}))
    assert not result.is_error, text(result)
    assert [m["card_id"] for m in result.structured_content["matches"]] == [BS], text(result)


@pytest.mark.parametrize("unit", ["cutlass_", "cutlass3x_sm90_", "cutlass_tensorop_", "Cijk_Alik_Bljk_", "nvjet_",
                                  "xmma_gemm_", "ampere_bf16_s16816", "f8_", "afp8_", "fp8gemm_", "FP4X2_",
                                  "ck::Gridwise<ck::tensor_layout::gemm::RowMajor, "])
def test_reading_a_4kb_adversarial_name_stays_cheap(unit):
    """Each convention is bounded per start: no name of the 4 KB cap costs quadratic time (a lazy
    ``\\w*?`` after a repeated prefix took 225 ms here; the matcher's whole query costs ~4 ms)."""
    name, vocab = (unit * (4096 // len(unit) + 1))[:4096], vocabulary()
    best = min(_timed(vocab.dtypes_in, name) for _ in range(3))
    assert best < 0.05, f"{best * 1000:.1f} ms"


def _timed(fn, arg) -> float:
    import time

    t = time.perf_counter()
    fn(arg)
    return time.perf_counter() - t

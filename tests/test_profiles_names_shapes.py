"""Kernel-name shortening/demangling and GEMM shapes from recorded op inputs."""
from __future__ import annotations

import pytest

from trace_readers.gemm_ops import MAX_DIM, op_gemm
from trace_readers.kernel_names import MAX_SHORT_NAME, demangle, short_name
from trace_readers.records import OpCall


def gemm(op: str, dims, types=None, concrete=None, stage=None):
    return op_gemm(OpCall(op, dims, types, concrete), stage)


@pytest.mark.parametrize("raw, short", [
    ("void ck::kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle<ck::GridwiseGemm<ck::Tuple<>, 256>, true,"
     " (ck::TailNumber)2>(ck::GridwiseGemm<int>::Argument)", "ck::kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle"),
    ("_ZN5aiter43fp8gemm_bf16_blockscale_BpreShuffle_128x128E.kd", "aiter::fp8gemm_bf16_blockscale_BpreShuffle_128x128"),
    ("_ZN2ck7kernel2IiEEvv", "ck::kernel2"),  # templated mangled name: the qualified prefix
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*, float const*, int)",
     "at::native::(anonymous namespace)::cunn_SoftMaxForward"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
     "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)", "at::native::vectorized_elementwise_kernel"),
    ("subtract_kernel(float*, float const*, float const*, int, int)", "subtract_kernel"),
    ("_gemm_a8w8_blockscale_kernel", "_gemm_a8w8_blockscale_kernel"),  # Triton: unchanged
    ("moe_gemm2_a8w4_mfma_moe2_cshuffle_pf8_t128x256", "moe_gemm2_a8w4_mfma_moe2_cshuffle_pf8_t128x256"),
    ("Cijk_Alik_Bljk_HHS_BH_MT128x128x32", "Cijk_Alik_Bljk_HHS_BH_MT128x128x32"),
    ("void k<std::integral_constant<bool, (3>2)>, 8>(int)", "k"),  # '>' inside parentheses
    ("void k<(x>1)>(int", "void k<(x>1)>(int"),  # unbalanced: left alone rather than mangled further
    # older rocprof results.stats.csv appends a clone marker to every name
    ("void ck::kernel_gemm_xdl_cshuffle_v3<ck::Tuple<>, 256>(ck::Argument) [clone .kd]", "ck::kernel_gemm_xdl_cshuffle_v3"),
    ("void aiter::add_rmsnorm_quant_kernel<c10::BFloat16, 256>(float*) [clone .kd]", "aiter::add_rmsnorm_quant_kernel"),
    ("_ZN5aiter43fp8gemm_bf16_blockscale_BpreShuffle_128x128E [clone .kd]",
     "aiter::fp8gemm_bf16_blockscale_BpreShuffle_128x128"),
])
def test_short_name(raw: str, short: str) -> None:
    assert short_name(raw) == short


def test_short_name_is_bounded() -> None:
    out = short_name("k" * 500)
    assert len(out) == MAX_SHORT_NAME and out.endswith("...")


@pytest.mark.parametrize("raw, out", [
    ("_ZN5aiter43fp8gemm_bf16_blockscale_BpreShuffle_128x128E.kd", "aiter::fp8gemm_bf16_blockscale_BpreShuffle_128x128"),
    ("_Z13matmul_kernelPfS_", "matmul_kernel"),
    ("_Z3fooIiEvT_", "_Z3fooIiEvT_"),  # templates: left to the profiler's own demangler
    ("_ZN2ck3fooIiEEvv", "_ZN2ck3fooIiEEvv"),
    ("_Z99short", "_Z99short"),  # length past the end
    ("plain_name", "plain_name"),
])
def test_demangle(raw: str, out: str) -> None:
    assert demangle(raw) == out


@pytest.mark.parametrize("op, dims, shape", [
    ("aten::mm", [[64, 32], [32, 48]], (64, 48, 32)),
    ("aten::_scaled_mm", [[4096, 1536], [1536, 65536], [], [], [], [], []], (4096, 65536, 1536)),
    ("aten::_scaled_mm_v2", [[256, 1024], [1024, 512], [[256, 8]], [], [], [[4, 8]], [], []], (256, 512, 1024)),
    ("aten::addmm", [[16], [64, 32], [32, 16], [], []], (64, 16, 32)),
    ("aten::matmul", [[2, 32, 32], [32, 48]], (64, 48, 32)),
    ("aten::linear", [[4, 1024, 7168], [2048, 7168], [2048]], (4096, 2048, 7168)),
    ("aiter::gemm_a8w8_blockscale", [[4096, 7168], [2048, 7168], [4096, 56], [16, 56]], (4096, 2048, 7168)),
    ("aiter::gemm_a8w8_blockscale_ck", [[4096, 7168], [2048, 7168], [4096, 56], [16, 56], [4096, 2048]], (4096, 2048, 7168)),
    ("vllm::rocm_aiter_gemm_w8a8_blockscale", [[64, 7168], [2048, 7168], [64, 56], [16, 56], []], (64, 2048, 7168)),
    ("_C::cutlass_scaled_mm", [[64, 2048], [64, 7168], [7168, 2048], [64, 1], [1, 2048], []], (64, 2048, 7168)),
    ("aten::mm", [[64, 32], [31, 48]], None),  # K disagrees
    ("aten::matmul", [[2, 32, 32], [2, 32, 48]], None),  # batched right operand
    ("aten::bmm", [[2, 32, 32], [2, 32, 48]], None),
    ("aten::mm", [[64, 32]], None),
    ("aten::mm", [[64, 0], [0, 48]], None),
    ("aten::mm", [[64, True], [1, 48]], None),
    ("aten::mm", "[[64, 32], [32, 48]]", None),
    ("aten::mm", [[MAX_DIM + 1, 32], [32, 48]], None),  # beyond any real GEMM: no shape, no overflow later
    ("aten::matmul", [[65536, 65536, 32], [32, 48]], None),  # leading dims fold into an M beyond the cap
    ("aten::gemm_a8w8", [[64, 32], [48, 32]], None),  # the custom-op rule is for non-aten ops only
    ("aten::relu", [[64, 32]], None),
])
def test_gemm_shape(op: str, dims, shape) -> None:
    g = gemm(op, dims)
    assert ((g.M, g.N, g.K) if g else None) == shape


@pytest.mark.parametrize("op, dims, shape, groups", [
    # A [M_total, K] with offs, B [G, K, N] (a transposed [G, N, K] weight)
    ("aten::_scaled_grouped_mm", [[256, 1024], [4, 1024, 512], [256], [4, 512], [4]], (256, 512, 1024), 4),
    ("aten::_scaled_grouped_mm", [[4, 64, 1024], [4, 1024, 512], [4, 64], [4, 512]], (256, 512, 1024), 4),
    ("aten::_scaled_grouped_mm", [[3, 64, 1024], [4, 1024, 512], [], []], None, None),  # groups disagree
    ("aten::_scaled_grouped_mm_v2", [[256, 1024], [4, 1024, 512], [[256]], [], [], [[4, 512]], [], [], [4]],
     (256, 512, 1024), 4),
])
def test_grouped_gemm_shape(op, dims, shape, groups) -> None:
    g = gemm(op, dims)
    assert ((g.M, g.N, g.K) if g else None) == shape and (g.groups if g else None) == groups


@pytest.mark.parametrize("op, dims, stage, shape", [
    # aiter::ck_moe_stage1(hidden [M, K], w1 [E, 2I, K], ...) and ck_moe_stage2(inter [M, topk, I], w1, w2 [E, H, I])
    ("aiter::ck_moe_stage1", [[512, 256], [8, 256, 256], [8, 256, 128]], None, ("stage1", 512, 256, 256)),
    ("aiter::ck_moe_stage2", [[512, 2, 128], [8, 256, 256], [8, 256, 128]], None, ("stage2", 512, 256, 128)),
    ("aiter::ck_moe_stage2", [[512, 2, 64], [8, 256, 256], [8, 256, 128]], None, None),  # I disagrees with w2
    # fused ops run both stages: the launch sequence picks one
    ("vllm::inplace_fused_experts", [[512, 256], [8, 256, 256], [8, 256, 128]], "stage1", ("stage1", 512, 256, 256)),
    ("vllm::inplace_fused_experts", [[512, 256], [8, 256, 256], [8, 256, 128]], "stage2", ("stage2", 512, 256, 128)),
    ("vllm::inplace_fused_experts", [[512, 256], [8, 256, 256], [8, 256, 128]], None, None),
])
def test_moe_op_gemm_of_one_stage(op, dims, stage, shape) -> None:
    g = gemm(op, dims, stage=stage)
    assert ((g.stage, g.M, g.N, g.K) if g else None) == shape
    if g:
        assert g.groups == 8


@pytest.mark.parametrize("op, dims, types, dtype", [
    ("aten::_scaled_mm", [[64, 32], [32, 48]], ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float"], "fp8_e4m3"),
    ("aten::mm", [[64, 32], [32, 48]], ["c10::Float8_e4m3fnuz", "c10::Float8_e4m3fnuz"], "fp8_e4m3_fnuz"),
    ("aten::addmm", [[48], [64, 32], [32, 48]], ["c10::BFloat16", "c10::Half", "c10::Half"], "fp16"),  # A is arg 1
    ("aten::linear", [[64, 32], [48, 32]], ["float", "float"], "fp32"),
    ("aten::mm", [[64, 32], [32, 48]], ["unsigned char", "unsigned char"], None),  # packed fp4 or uint8: unknown
    ("aten::mm", [[64, 32], [32, 48]], "float", None),
])
def test_operand_dtype(op: str, dims, types, dtype) -> None:
    assert gemm(op, dims, types).dtype == dtype


FP8, F32, E8M0, U8, TL, SL = "c10::Float8_e4m3fn", "float", "c10::Float8_e8m0fnu", "unsigned char", "TensorList", "ScalarList"
V2_DIMS = [[256, 1024], [1024, 512], [[256, 8]], [], [], [[4, 8]], [], [], [], [], [], []]
V2_TYPES = [FP8, FP8, TL, SL, SL, TL, SL, SL, "", "Scalar", SL, "Scalar"]


def v2_concrete(recipe_a: int, recipe_b: int) -> list[str]:
    return ["", "", "", f"[{recipe_a}]", "[]", "", f"[{recipe_b}]", "[]", "", "15", "[]", "False"]


@pytest.mark.parametrize("recipes, fmt", [
    ((4, 5), "fp32_block"),  # ScalingType.BlockWise1x128 x BlockWise128x128 (DeepSeek-style)
    ((3, 3), "ue8m0_1x32"),  # BlockWise1x32: MX, e8m0 scales
    ((1, 1), "per_row"),
    ((0, 0), "per_tensor"),
    ((2, 2), None),  # BlockWise1x16 (NVFP4): no format the cards name
    ((0, 4), None),  # mixed recipes
])
def test_scaled_mm_v2_states_its_scale_format_in_the_recipe_arguments(recipes, fmt) -> None:
    assert gemm("aten::_scaled_mm_v2", V2_DIMS, V2_TYPES, v2_concrete(*recipes)).scale_format == fmt


@pytest.mark.parametrize("op, dims, types, fmt", [
    # aiter block-scale GEMM: x_scale [M, K/128], w_scale [N/128, K/128]
    ("aiter::gemm_a8w8_blockscale", [[4096, 7168], [2048, 7168], [4096, 56], [16, 56], [4096, 2048]],
     [FP8, FP8, F32, F32, "c10::BFloat16"], "fp32_block"),
    ("aiter::gemm_a8w8_blockscale", [[4096, 7168], [2048, 7168], [56, 4096], [56, 16]], [FP8, FP8, F32, F32], "fp32_block"),
    # the CK entry point takes the output before nothing else: its bf16 Out is not a scale
    ("aiter::gemm_a8w8_blockscale_ck", [[4096, 7168], [2048, 7168], [4096, 56], [16, 56], [4096, 2048], [], []],
     [FP8, FP8, F32, F32, "c10::BFloat16", "Scalar", ""], "fp32_block"),
    # 1x32 e8m0 scales, raw [M, K/32] / [N, K/32]
    ("aiter::gemm_a8w8_mxfp8", [[1024, 2048], [5120, 2048], [1024, 64], [5120, 64]], [FP8, FP8, E8M0, E8M0], "ue8m0_1x32"),
    ("aiter::gemm_a8w8_mxfp8", [[1024, 2048], [5120, 2048], [1024, 64], [5120, 64]], [FP8, FP8, U8, U8], "ue8m0_1x32"),
    # the same aiter block-scale API fed 2-D e8m0 scales at 128-blocks: not fp32 blocks, not 1x32 -> no guess
    ("aiter::gemm_a8w8_blockscale", [[4096, 7168], [2048, 7168], [4096, 56], [16, 56]], [FP8, FP8, E8M0, E8M0], None),
    ("aten::_scaled_mm", [[64, 256], [256, 32], [64, 1], [1, 32], [], [], []], [FP8, FP8, F32, F32, "", "", ""], "per_row"),
    ("aten::_scaled_mm", [[64, 256], [256, 32], [], [], [], [], []], [FP8, FP8, F32, F32, "", "", ""], "per_tensor"),
    ("aten::_scaled_grouped_mm", [[256, 1024], [4, 1024, 512], [256], [4, 512], [4]], [FP8, FP8, F32, F32, "int"],
     "per_row"),
    # pre-shuffled (flattened) e8m0 scales: no guess
    ("aten::_scaled_mm", [[64, 256], [256, 32], [512], [256]], [FP8, FP8, E8M0, E8M0], None),
    # K = 128, N = 1: [M, 1] and [1, 1] fit both one-block and per-row scales -> ambiguous -> None
    ("aten::_scaled_mm", [[64, 128], [128, 1], [64, 1], [1, 1]], [FP8, FP8, F32, F32], None),
    ("aten::_scaled_mm", [[64, 128], [128, 32], [64, 1], [1, 1]], [FP8, FP8, F32, F32], "fp32_block"),
    # bf16 GEMMs carry no operand scales even with a bias
    ("aten::addmm", [[48], [64, 32], [32, 48], [], []], [F32, "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"], None),
    ("aten::mm", [[64, 32], [32, 48]], [FP8, FP8], None),  # no scale tensors at all
])
def test_scale_format(op: str, dims, types, fmt) -> None:
    assert gemm(op, dims, types).scale_format == fmt

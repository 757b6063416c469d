"""Kernel-name shortening/demangling and GEMM shapes from recorded op inputs."""
from __future__ import annotations

import pytest

from skill_server.hotspot import GemmShape
from skill_server.profiles.gemm_inputs import gemm_shape, operand_dtype, scale_format
from skill_server.profiles.kernel_names import MAX_SHORT_NAME, demangle, short_name


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
    ("aten::addmm", [[16], [64, 32], [32, 16], [], []], (64, 16, 32)),
    ("aten::matmul", [[2, 32, 32], [32, 48]], (64, 48, 32)),
    ("aten::linear", [[4, 1024, 7168], [2048, 7168], [2048]], (4096, 2048, 7168)),
    ("aiter::gemm_a8w8_blockscale", [[4096, 7168], [2048, 7168], [4096, 56], [16, 56]], (4096, 2048, 7168)),
    ("aten::mm", [[64, 32], [31, 48]], None),  # K disagrees
    ("aten::matmul", [[2, 32, 32], [2, 32, 48]], None),  # batched right operand
    ("aten::bmm", [[2, 32, 32], [2, 32, 48]], None),
    ("aten::mm", [[64, 32]], None),
    ("aten::mm", [[64, 0], [0, 48]], None),
    ("aten::mm", [[64, True], [1, 48]], None),
    ("aten::mm", "[[64, 32], [32, 48]]", None),
    ("aten::gemm_a8w8", [[64, 32], [48, 32]], None),  # the custom-op rule is for non-aten ops only
    ("aten::relu", [[64, 32]], None),
])
def test_gemm_shape(op: str, dims, shape) -> None:
    expected = GemmShape(M=shape[0], N=shape[1], K=shape[2]) if shape else None
    assert gemm_shape(op, dims) == expected


@pytest.mark.parametrize("op, types, dtype", [
    ("aten::_scaled_mm", ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float"], "fp8_e4m3"),
    ("aten::mm", ["c10::Float8_e4m3fnuz", "c10::Float8_e4m3fnuz"], "fp8_e4m3_fnuz"),
    ("aten::addmm", ["c10::BFloat16", "c10::Half", "c10::Half"], "fp16"),  # A is argument 1
    ("aten::linear", ["float", "float"], "fp32"),
    ("aten::mm", ["unsigned char", "unsigned char"], None),  # packed fp4 or plain uint8: unknown
    ("aten::relu", ["float"], None),
    ("aten::mm", "float", None),
])
def test_operand_dtype(op: str, types, dtype) -> None:
    assert operand_dtype(op, types) == dtype


FP8, F32, E8M0, U8 = "c10::Float8_e4m3fn", "float", "c10::Float8_e8m0fnu", "unsigned char"


@pytest.mark.parametrize("op, dims, types, fmt", [
    # aiter block-scale GEMM: x_scale [M, K/128], w_scale [N/128, K/128]
    ("aiter::gemm_a8w8_blockscale", [[4096, 7168], [2048, 7168], [4096, 56], [16, 56], [4096, 2048]],
     [FP8, FP8, F32, F32, "c10::BFloat16"], "fp32_block"),
    ("aiter::gemm_a8w8_blockscale", [[4096, 7168], [2048, 7168], [56, 4096], [56, 16]], [FP8, FP8, F32, F32], "fp32_block"),
    # 1x32 e8m0 scales, raw [M, K/32] / [N, K/32]
    ("aiter::gemm_a8w8_mxfp8", [[1024, 2048], [5120, 2048], [1024, 64], [5120, 64]], [FP8, FP8, E8M0, E8M0], "ue8m0_1x32"),
    ("aiter::gemm_a8w8_mxfp8", [[1024, 2048], [5120, 2048], [1024, 64], [5120, 64]], [FP8, FP8, U8, U8], "ue8m0_1x32"),
    ("aten::_scaled_mm", [[64, 256], [256, 32], [64, 1], [1, 32], [], [], []], [FP8, FP8, F32, F32, "", "", ""], "per_row"),
    ("aten::_scaled_mm", [[64, 256], [256, 32], [], [], [], [], []], [FP8, FP8, F32, F32, "", "", ""], "per_tensor"),
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
    assert scale_format(op, dims, types, gemm_shape(op, dims)) == fmt

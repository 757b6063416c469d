"""The arms of card ``flydsl_fp8_blockscale_gemm`` (``ARMS``, read by ``problem.PROBLEM``).

====================  =========  ================  ==========================================
arm                   role       platforms         what
====================  =========  ================  ==========================================
cublas_blockscale     baseline   cuda              cuBLAS block-scale GEMM (``F.scaled_mm``)
ck_blockscale         baseline   rocm              CK via aiter (the card's production kernel)
triton_twin           reference  cuda, rocm, cpu   portable Triton software-promote kernel
flydsl_recipe         reference  rocm              the card's recipe: ``recipe.config_for`` picks the core by shape
flydsl_4wave          reference  rocm              the FlyDSL gfx950 4-wave core
flydsl_8wave_cluster  reference  rocm              the 8-wave ping-pong core, cluster schedule (narrow-N/deep-K)
flydsl_4wave_xcd0     ablation   rocm              the same without the XCD swizzle
torch_dequant         reference  all               dequant + fp32 matmul (harness control)
e8m0_scaled           ablation   all               power-of-two scales: must FAIL parity
====================  =========  ================  ==========================================

(``cpu`` for the Triton twin means the interpreter: ``TRITON_INTERPRET=1``.)

Each ``build`` names the module that implements it; the kernel-name regexes below are the
runtime signatures the verifier checks.
"""
from __future__ import annotations

from verifiers.problem import ArmSpec, SignatureSpec

TWIN_KERNEL = r"blockscale_fp8_gemm_promote"
FLYDSL_KERNEL = r"kernel_blockscale_gemm"  # both cores: ..._gemm and ..._gemm_8wave
FLYDSL_8WAVE_KERNEL = r"kernel_blockscale_gemm_8wave"
# cuBLAS's Hopper GEMMs show up as sm90_xmma_*, cutlass_* or nvjet_* (cuBLAS >= 12.9) or
# another *gemm* name. The lookahead keeps this from matching the Triton twin or the FlyDSL
# kernel (both contain "gemm"): the verifier forbids a candidate to run the baseline's
# required kernels, so a loose baseline pattern would fail every honest candidate.
CUBLAS_KERNELS = rf"^(?!.*(?:{TWIN_KERNEL}|{FLYDSL_KERNEL})).*(?:sm90_xmma|cutlass|nvjet|gemm)"
CK_KERNELS = r"kernel_gemm_xdl.*blockscale|gemm_a8w8_blockscale|ck_tile.*(?:gemm|blockscale)|fp8gemm_bf16_blockscale"

_NOT_TWIN = (TWIN_KERNEL,)
ARMS = {
    "cublas_blockscale": ArmSpec(
        name="cublas_blockscale",
        build="cublas_baseline:build",
        role="baseline",
        description="cuBLAS fp8 block-scale GEMM via F.scaled_mm (BlockWise1x128 x BlockWise128x128), sm_90",
        platforms=("cuda",),
        signature=SignatureSpec(required=(CUBLAS_KERNELS,), forbidden=_NOT_TWIN),
    ),
    "ck_blockscale": ArmSpec(
        name="ck_blockscale",
        build="ck_baseline:build",
        prepare="ck_baseline:prepare_for_verifier",
        role="baseline",
        description="CK a8w8 block-scale GEMM through aiter (b-preshuffle when available)",
        platforms=("rocm",),
        signature=SignatureSpec(required=(CK_KERNELS,), forbidden=(TWIN_KERNEL, FLYDSL_KERNEL)),
    ),
    "triton_twin": ArmSpec(
        name="triton_twin",
        build="triton_twin:build",
        role="reference",
        description="portable Triton kernel, software fp32 promote per 128-K block, tiles per shape class",
        platforms=("cuda", "rocm", "cpu"),
        signature=SignatureSpec(
            required=(TWIN_KERNEL,),
            forbidden=(r"sm90_xmma|nvjet|cutlass", r"kernel_gemm_xdl|gemm_a8w8_blockscale", FLYDSL_KERNEL),
            launches_per_iter=1,
        ),
    ),
    "flydsl_4wave": ArmSpec(
        name="flydsl_4wave",
        build="flydsl_gemm:build",
        role="reference",
        description="FlyDSL gfx950 4-wave block-scale preshuffle core, software promote, XCD swizzle",
        platforms=("rocm",),
        signature=SignatureSpec(
            required=(FLYDSL_KERNEL,),
            forbidden=(r"kernel_gemm_xdl|gemm_a8w8_blockscale", TWIN_KERNEL),
            launches_per_iter=1,
        ),
    ),
    "flydsl_recipe": ArmSpec(
        name="flydsl_recipe",
        build="recipe:build",
        role="reference",
        description="the card's recipe: 8-wave cluster core on narrow-N/deep-K shapes, 4-wave core elsewhere",
        platforms=("rocm",),
        signature=SignatureSpec(
            required=(FLYDSL_KERNEL,),
            forbidden=(r"kernel_gemm_xdl|gemm_a8w8_blockscale", TWIN_KERNEL),
            launches_per_iter=1,
        ),
    ),
    "flydsl_8wave_cluster": ArmSpec(
        name="flydsl_8wave_cluster",
        build="flydsl_8wave:build",
        role="reference",
        description="FlyDSL gfx950 8-wave ping-pong block-scale core, BLOCK_M=128/BLOCK_N=256, cluster promotes",
        platforms=("rocm",),
        signature=SignatureSpec(
            required=(FLYDSL_8WAVE_KERNEL,),
            forbidden=(r"kernel_gemm_xdl|gemm_a8w8_blockscale", TWIN_KERNEL),
            launches_per_iter=1,
        ),
    ),
    "flydsl_4wave_xcd0": ArmSpec(
        name="flydsl_4wave_xcd0",
        build="flydsl_gemm:build_xcd0",
        role="ablation",
        description="the FlyDSL 4-wave core without the XCD swizzle (the card's xcd0 ablation)",
        platforms=("rocm",),
        signature=SignatureSpec(required=(FLYDSL_KERNEL,), forbidden=(r"kernel_gemm_xdl|gemm_a8w8_blockscale",)),
    ),
    "torch_dequant": ArmSpec(
        name="torch_dequant",
        build="torch_dequant:build",
        role="reference",
        description="fp32 dequant -> fp32 matmul -> bf16 (the oracle's arithmetic; runs anywhere)",
        signature=SignatureSpec(forbidden=_NOT_TWIN),
    ),
    "e8m0_scaled": ArmSpec(
        name="e8m0_scaled",
        build="e8m0_scaled:build",
        role="ablation",
        description="block scales rounded to powers of two (what an E8M0 MMA scale holds): must FAIL strict parity",
        signature=SignatureSpec(forbidden=_NOT_TWIN),
    ),
}

#: arms that must fail strict parity (the card's trap); a verifier run that passes them is broken
EXPECTED_PARITY_FAILURES = ("e8m0_scaled",)

"""The arms of card ``flydsl_mxfp8_8wave_gemm`` (``ARMS``, read by ``problem.PROBLEM``).

==================  =========  ================  =============================================
arm                 role       platforms         what
==================  =========  ================  =============================================
flydsl_4wave        reference  rocm              FlyDSL gfx950 kernel, v_mfma_scale with real
                                                 per-32 scales, swapped A/B, 4 waves (NOT the
                                                 PR's 8-wave pipeline; see flydsl_gemm.py)
flydsl_8wave        reference  rocm              the PR's tile and store path: 8 waves, BLOCK_M=256,
                                                 block_n by pick_block_n, permlane16_swap +
                                                 ds_bpermute 64-byte row stores (flydsl_8wave.py)
flydsl_8wave_bn256  reference  rocm              the wide-grid row's tile (block_n=256, permlane +
                                                 ds_bpermute 64-byte rows) forced at any shape: how the
                                                 emulator runs that row (emulation-sized grids are all
                                                 launch-starved, so pick_block_n gives 128 there)
flydsl_8wave_direct ablation   rocm              the same with plain 8-byte stores
triton_dequant      reference  cuda, rocm, cpu   Triton twin: per-32 dequant in registers,
                                                 bf16 tl.dot (exact products), fp32 accumulate
aiter_blockscale    baseline   rocm              aiter gemm_a8w8_blockscale_bpreshuffle, 2-D e8m0
                                                 scales: the PR's comparison (the card's ROCm baseline)
torch_dequant       baseline   all               dequant + fp32 matmul (the oracle's recipe)
scales_pinned       ablation   all               scales pinned to 1.0: must FAIL parity
==================  =========  ================  =============================================

(``cpu`` for the Triton twin means the interpreter: ``TRITON_INTERPRET=1``.)

Each ``build`` names the module that implements it (``flydsl_gemm``, ``flydsl_8wave``, ``aiter_baseline``,
``portable_arms``); the kernel-name regexes below are the runtime signatures.
"""
from __future__ import annotations

from verifiers.problem import ArmSpec, SignatureSpec

FLYDSL_KERNEL = r"mxfp8_gemm_4wave_swapab"
FLYDSL_8WAVE_KERNEL = r"mxfp8_gemm_8wave_swapab"
# aiter's block-scale routes (CK, CK-tile, asm, FlyDSL, batched); never the project's kernels
AITER_KERNELS = r"^(?!.*(?:mxfp8_gemm_[48]wave|_mxfp8_dequant)).*(?:blockscale|a8w8|ck_tile)"
TRITON_KERNEL = r"_mxfp8_dequant_gemm_kernel"
# cuBLAS (sm90_xmma / cutlass / nvjet / *gemm*), hipBLASLt (Cijk_*), CPU BLAS has no trace
BLAS_KERNELS = r"gemm|Cijk|nvjet|xmma|cutlass"

ARMS = {
    "flydsl_4wave": ArmSpec(
        name="flydsl_4wave",
        build="flydsl_gemm:build",
        role="reference",
        description=(
            "FlyDSL gfx950 mxfp8 GEMM: v_mfma_scale_f32_16x16x128_f8f6f4 with real per-32 e8m0 "
            "scales from the shuffled buffers, preshuffled B, swapped A/B, 4 waves, no LDS"
        ),
        platforms=("rocm",),
        signature=SignatureSpec(required=(FLYDSL_KERNEL,), forbidden=(TRITON_KERNEL,), launches_per_iter=1),
    ),
    "flydsl_8wave": ArmSpec(
        name="flydsl_8wave",
        build="flydsl_8wave:build",
        role="reference",
        description=(
            "FlyDSL gfx950 mxfp8 GEMM, the PR's tile: 8 waves, BLOCK_M=256, block_n 128/256 by pick_block_n, "
            "swap-ab stores widened by v_permlane16_swap + ds_bpermute to 64-byte rows (operands global -> "
            "registers, not the PR's LDS mainloop)"
        ),
        platforms=("rocm",),
        signature=SignatureSpec(required=(FLYDSL_8WAVE_KERNEL,), forbidden=(TRITON_KERNEL,), launches_per_iter=1),
    ),
    "flydsl_8wave_bn256": ArmSpec(
        name="flydsl_8wave_bn256",
        build="flydsl_8wave:build_bn256",
        role="reference",
        description=("the 8-wave kernel with the wide-grid row's tile forced (block_n=256: v_permlane16_swap + "
                     "ds_bpermute, 64-byte row stores) whatever pick_block_n says"),
        platforms=("rocm",),
        signature=SignatureSpec(required=(FLYDSL_8WAVE_KERNEL,), forbidden=(TRITON_KERNEL,), launches_per_iter=1),
    ),
    "flydsl_8wave_direct": ArmSpec(
        name="flydsl_8wave_direct",
        build="flydsl_8wave:build_direct",
        role="ablation",
        description="the same 8-wave kernel with plain 8-byte swap-ab stores (no lane-exchange stages)",
        platforms=("rocm",),
        signature=SignatureSpec(required=(FLYDSL_8WAVE_KERNEL,), forbidden=(TRITON_KERNEL,), launches_per_iter=1),
    ),
    "aiter_blockscale": ArmSpec(
        name="aiter_blockscale",
        build="aiter_baseline:build",
        role="baseline",
        description=(
            "aiter gemm_a8w8_blockscale_bpreshuffle with 2-D e8m0 scales (the route the PR measured against; "
            "ROCm only, aiter picks its kernel)"
        ),
        platforms=("rocm",),
        signature=SignatureSpec(required=(AITER_KERNELS,), forbidden=(FLYDSL_KERNEL, FLYDSL_8WAVE_KERNEL, TRITON_KERNEL)),
    ),
    "triton_dequant": ArmSpec(
        name="triton_dequant",
        build="portable_arms:build_triton",
        role="reference",
        description="portable Triton kernel: per-32 dequant in registers, bf16 tl.dot, fp32 accumulate",
        platforms=("cuda", "rocm", "cpu"),
        signature=SignatureSpec(required=(TRITON_KERNEL,), forbidden=(FLYDSL_KERNEL,), launches_per_iter=1),
    ),
    "torch_dequant": ArmSpec(
        name="torch_dequant",
        build="portable_arms:build_torch",
        role="baseline",
        description="torch: dequantise both operands, fp32 matmul, bf16 (the oracle's arithmetic)",
        signature=SignatureSpec(forbidden=(FLYDSL_KERNEL, TRITON_KERNEL)),
    ),
    "scales_pinned": ArmSpec(
        name="scales_pinned",
        build="portable_arms:build_scales_pinned",
        role="ablation",
        description="scales pinned to 1.0 (the block-scale kernel's MFMA contract, no promote): must FAIL parity",
        signature=SignatureSpec(forbidden=(FLYDSL_KERNEL, TRITON_KERNEL)),
    ),
}

#: arms that must fail strict parity; a verifier run that passes them is broken
EXPECTED_PARITY_FAILURES = ("scales_pinned",)

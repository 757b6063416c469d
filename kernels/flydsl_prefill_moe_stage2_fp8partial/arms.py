"""The arms of card ``flydsl_prefill_moe_stage2_fp8partial`` (``ARMS``, read by ``problem.PROBLEM``).

===================  =========  =============  ==========================================
arm                  role       platforms      kernels
===================  =========  =============  ==========================================
triton_bf16          baseline   cuda,rocm,cpu  moe2_gemm_bf16 + moe_reduce_inbf16
triton_fp8           reference  cuda,rocm,cpu  moe2_gemm_pf8_s<hex> + moe_reduce_infp8_s<hex>
flydsl_bf16          baseline   rocm           moe2_gemm_bf16 (fused FlyDSL GEMM) + moe_reduce_inbf16
                                               (FlyDSL): the card's bf16-partial FlyDSL stage 2
flydsl_fp8           reference  rocm           moe2_gemm_cshuffle_pf8_s<hex> (fused FlyDSL GEMM,
                                               fp8 store epilogue) + moe_reduce_infp8_s<hex> (FlyDSL)
flydsl_reduce_bf16   ablation   rocm           Triton moe2_gemm_bf16 + FlyDSL moe_reduce_inbf16
flydsl_reduce_fp8    ablation   rocm           Triton moe2_gemm_pf8_s<hex> + FlyDSL infp8 reduce
flydsl_fp8_epilogue  ablation   rocm           moe2_gemm_accf32 + moe2_store_pf8_s<hex>
                                               (FlyDSL store epilogue) + moe_reduce_infp8_s<hex>
torch_bf16           baseline   cpu            moe2_gemm_bf16_torch + moe_reduce_inbf16_torch
                                               (torch steps, no kernel): the bf16-partial
                                               baseline's arithmetic, fast at real shapes
===================  =========  =============  ==========================================

``flydsl_fp8_epilogue`` runs the FlyDSL fp8 store epilogue on hardware (the GEMM hands it
fp32 accumulator rows through memory): it exists for parity of that kernel, not speed.

``torch_bf16`` is the CPU baseline of the emulated real-shape run (``check-kernel --emulate
--full``): the Triton baseline in Triton's interpreter would take hours there. It is bound
nowhere by the card (CPU verification keeps ``triton_bf16``, the real kernels) and never runs
on a GPU, where its operators would not be the baseline's kernels.

Each ``build`` names the module that implements it (``triton_arms``, ``flydsl_arms``, ``torch_arms``).
"""
from __future__ import annotations

from verifiers.problem import ArmSpec, SignatureSpec

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import naming

BASELINE_SIGNATURE = SignatureSpec(
    required=(rf"^{naming.GEMM_BF16}$", rf"^{naming.REDUCE_BF16}$"),
    forbidden=(r"pf8", r"infp8"),
    launches_per_iter=2,
)
FP8_SIGNATURE = SignatureSpec(
    required=(naming.GEMM_PF8, naming.REDUCE_INFP8),
    forbidden=(rf"^{naming.GEMM_BF16}$", naming.REDUCE_BF16, naming.STORE_BF16),
    launches_per_iter=2,
)
#: the torch stand-in's two named CPU steps; never a Triton or FlyDSL kernel's name, never fp8
TORCH_SIGNATURE = SignatureSpec(
    required=(rf"^{naming.TORCH_GEMM_BF16}$", rf"^{naming.TORCH_REDUCE_BF16}$"),
    forbidden=(r"pf8", r"infp8", rf"^{naming.GEMM_BF16}$", rf"^{naming.REDUCE_BF16}$"),
    launches_per_iter=2,
)

ARMS = {
    "triton_bf16": ArmSpec(
        name="triton_bf16",
        build="triton_arms:build_bf16",
        role="baseline",
        description="Triton grouped GEMM storing bf16 partials + Triton bf16 top-k reduce",
        platforms=("cuda", "rocm", "cpu"),
        signature=BASELINE_SIGNATURE,
    ),
    "triton_fp8": ArmSpec(
        name="triton_fp8",
        build="triton_arms:build_fp8",
        role="reference",
        description="Triton grouped GEMM storing e4m3(P*s) partials + Triton infp8 reduce (*1/s, sum)",
        platforms=("cuda", "rocm", "cpu"),
        signature=FP8_SIGNATURE,
    ),
    "flydsl_bf16": ArmSpec(
        name="flydsl_bf16",
        build="flydsl_arms:build_fused_bf16",
        role="baseline",
        description="the card's ROCm baseline: fused FlyDSL stage-2 GEMM storing bf16 partials + FlyDSL bf16 reduce",
        platforms=("rocm",),
        signature=BASELINE_SIGNATURE,
    ),
    "flydsl_fp8": ArmSpec(
        name="flydsl_fp8",
        build="flydsl_arms:build_fused_fp8",
        role="reference",
        description="fused FlyDSL stage-2 GEMM, cshuffle_pf8 epilogue (e4m3(P*s)) + FlyDSL infp8 reduce (gfx950)",
        platforms=("rocm",),
        signature=SignatureSpec(
            required=(naming.GEMM_CSHUFFLE_PF8, naming.REDUCE_INFP8),
            forbidden=(rf"^{naming.GEMM_BF16}$", naming.REDUCE_BF16, naming.STORE_BF16),
            launches_per_iter=2,
        ),
    ),
    "flydsl_reduce_bf16": ArmSpec(
        name="flydsl_reduce_bf16",
        build="flydsl_arms:build_bf16",
        role="ablation",
        description="Triton GEMM storing bf16 partials + FlyDSL bf16 reduce (gfx950)",
        platforms=("rocm",),
        signature=BASELINE_SIGNATURE,
    ),
    "flydsl_reduce_fp8": ArmSpec(
        name="flydsl_reduce_fp8",
        build="flydsl_arms:build_fp8",
        role="ablation",
        description="Triton GEMM storing e4m3(P*s) partials + FlyDSL infp8 reduce (gfx950): the reduce side alone",
        platforms=("rocm",),
        signature=FP8_SIGNATURE,
    ),
    "flydsl_fp8_epilogue": ArmSpec(
        name="flydsl_fp8_epilogue",
        build="flydsl_arms:build_fp8_epilogue",
        role="ablation",
        description="Triton GEMM -> fp32 rows, FlyDSL fp8 store epilogue (w, *s, e4m3 scatter), FlyDSL infp8 reduce",
        platforms=("rocm",),
        signature=SignatureSpec(
            required=(rf"^{naming.GEMM_ACC}$", r"^moe2_store_pf8_s[0-9a-f]{8}$", naming.REDUCE_INFP8),
            forbidden=(rf"^{naming.GEMM_BF16}$", naming.REDUCE_BF16, naming.STORE_BF16),
            launches_per_iter=3,
        ),
    ),
    "torch_bf16": ArmSpec(
        name="torch_bf16",
        build="torch_arms:build_bf16",
        role="baseline",
        description="torch on CPU: grouped GEMM over the sorted blocks storing bf16 partials (fp32 products "
                    "and sums, router weight in fp32) + fp32 top-k sum in slot order, bf16 out",
        platforms=("cpu",),
        signature=TORCH_SIGNATURE,
    ),
}

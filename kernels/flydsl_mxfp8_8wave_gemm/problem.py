"""The verifier binding of card ``flydsl_mxfp8_8wave_gemm``: ``PROBLEM``.

One operator: mxfp8 GEMM, ``C[M, N] = bf16((A * sa) @ (B * sb)^T)`` with fp8 e4m3
operands and one ue8m0 (power-of-two) scale per 32 elements of K on both (OCP MX,
1x32). Here the hardware scaled MFMA is *the right tool* (the scales are exact powers
of two), the opposite of the fp8 block-scale card. Strict parity against the fp32
dequant oracle. Input names and layouts: see ``inputs.py``.

==================  =========  ================  =============================================
arm                 role       platforms         what
==================  =========  ================  =============================================
flydsl_4wave        reference  rocm              FlyDSL gfx950 kernel, v_mfma_scale with real
                                                 per-32 scales, swapped A/B, 4 waves (NOT the
                                                 PR's 8-wave pipeline; see flydsl_gemm.py)
triton_dequant      reference  cuda, rocm, cpu   Triton twin: per-32 dequant in registers,
                                                 bf16 tl.dot (exact products), fp32 accumulate
torch_dequant       baseline   all               dequant + fp32 matmul (the oracle's recipe)
scales_pinned       ablation   all               scales pinned to 1.0: must FAIL parity
==================  =========  ================  =============================================

(``cpu`` for the Triton twin means the interpreter: ``TRITON_INTERPRET=1``.)
Shapes: rows of the pull request's table (its table is ordered N, K, M).
"""
from __future__ import annotations

from verifiers.problem import ArmSpec, EmulationSpec, ParitySpec, Problem, SegmentSpec, SignatureSpec

from .inputs import PERTURBATIONS, make_inputs, make_outputs, oracle

NAME = "flydsl_mxfp8_8wave_gemm"
FLYDSL_KERNEL = r"mxfp8_gemm_4wave_swapab"
TRITON_KERNEL = r"_mxfp8_dequant_gemm_kernel"
# cuBLAS (sm90_xmma / cutlass / nvjet / *gemm*), hipBLASLt (Cijk_*), CPU BLAS has no trace
BLAS_KERNELS = r"gemm|Cijk|nvjet|xmma|cutlass"

SHAPES = (
    {"M": 1024, "N": 5120, "K": 2048},
    {"M": 2048, "N": 5120, "K": 2048},
    {"M": 16384, "N": 5120, "K": 2048},
    {"M": 1024, "N": 8192, "K": 1280},
    {"M": 4096, "N": 8192, "K": 1280},
)
SMOKE_SHAPES = (
    {"M": 64, "N": 64, "K": 256},
    {"M": 192, "N": 256, "K": 384},  # M tail inside a 128-row block, K/128 odd
)


def flops(dims: dict[str, int]) -> float:
    return 2.0 * dims["M"] * dims["N"] * dims["K"]


def min_bytes(dims: dict[str, int]) -> float:
    """fp8 A and B once, e8m0 scales once, bf16 C once."""
    m, n, k = dims["M"], dims["N"], dims["K"]
    return float(m * k + n * k + (m + n) * (k // 32) + 2 * m * n)


PARITY = ParitySpec(
    mode="strict",
    rtol=1e-2,
    atol=1e-2,
    max_mismatch=0,
    min_cosine=0.9999,
    # a correct kernel differs from the oracle by fp32 summation order only, i.e. an
    # occasional one-ulp bf16 flip (rel-L2 ~1e-4 or less; the PR saw ~2e-4 against a
    # looser torch reference); ignoring the scales lands near 1
    max_rel_l2=1e-3,
)

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
    "triton_dequant": ArmSpec(
        name="triton_dequant",
        build="arms:build_triton",
        role="reference",
        description="portable Triton kernel: per-32 dequant in registers, bf16 tl.dot, fp32 accumulate",
        platforms=("cuda", "rocm", "cpu"),
        signature=SignatureSpec(required=(TRITON_KERNEL,), forbidden=(FLYDSL_KERNEL,), launches_per_iter=1),
    ),
    "torch_dequant": ArmSpec(
        name="torch_dequant",
        build="arms:build_torch",
        role="baseline",
        description="torch: dequantise both operands, fp32 matmul, bf16 (the oracle's arithmetic)",
        signature=SignatureSpec(forbidden=(FLYDSL_KERNEL, TRITON_KERNEL)),
    ),
    "scales_pinned": ArmSpec(
        name="scales_pinned",
        build="arms:build_scales_pinned",
        role="ablation",
        description="scales pinned to 1.0 (the block-scale kernel's MFMA contract, no promote): must FAIL parity",
        signature=SignatureSpec(forbidden=(FLYDSL_KERNEL, TRITON_KERNEL)),
    ),
}

# gfx950-emulated (FlyDSL arms on the emulator, CPU, parity only): the 2x2 wave grid with two
# K steps (gfx950_targets.EMULATED_ARMS ``real_2x2``; 5-10 s per launch on a 2-core box, so no
# hidden shape). One seed and the secret one, no perturbation.
EMULATION = EmulationSpec(shapes=({"M": 128, "N": 128, "K": 256},), baseline="torch_dequant", seeds=(0,))

PROBLEM = Problem(
    card_id="flydsl_mxfp8_8wave_gemm",
    name=NAME,
    dim_names=("M", "N", "K"),
    shapes=SHAPES,
    make_inputs=make_inputs,
    make_outputs=make_outputs,
    oracle=oracle,
    parity=PARITY,
    arms=ARMS,
    # one GEMM launch per call for the kernels; the segment is every kernel of the call
    segment=SegmentSpec(kernels=()),
    perturbations=PERTURBATIONS,
    flops=flops,
    min_bytes=min_bytes,
    smoke_shapes=SMOKE_SHAPES,
    emulation=EMULATION,
)

#: arms that must fail strict parity; a verifier run that passes them is broken
EXPECTED_PARITY_FAILURES = ("scales_pinned",)

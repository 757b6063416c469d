"""The verifier binding of card ``flydsl_fp8_blockscale_gemm``: ``PROBLEM``.

One operator: fp8 e4m3 a8w8 GEMM with arbitrary fp32 block scales (1x128 on A,
128x128 on B), bf16 out. Strict parity against the fp32 dequant oracle (the card's
rtol=atol=1e-2, zero elements out of tolerance), on the card's four shapes.
Arms per platform:

==================  =========  ================  ==========================================
arm                 role       platforms         what
==================  =========  ================  ==========================================
cublas_blockscale   baseline   cuda              cuBLAS block-scale GEMM (``F.scaled_mm``)
ck_blockscale       baseline   rocm              CK via aiter (the card's production kernel)
triton_twin         reference  cuda, rocm, cpu   portable Triton software-promote kernel
flydsl_4wave        reference  rocm              the FlyDSL gfx950 4-wave core
flydsl_4wave_xcd0   ablation   rocm              the same without the XCD swizzle
torch_dequant       reference  all               dequant + fp32 matmul (harness control)
e8m0_scaled         ablation   all               power-of-two scales: must FAIL parity
==================  =========  ================  ==========================================

(``cpu`` for the Triton twin means the interpreter: ``TRITON_INTERPRET=1``.)
"""
from __future__ import annotations

from verifiers.problem import ArmSpec, EmulationSpec, ParitySpec, Problem, SegmentSpec, SignatureSpec

from .inputs import PERTURBATIONS, make_inputs, make_outputs, realistic_activations
from .oracle import oracle
from .quant import BLOCK, quantize_activations

NAME = "flydsl_fp8_blockscale_gemm"
TWIN_KERNEL = r"blockscale_fp8_gemm_promote"
FLYDSL_KERNEL = r"kernel_blockscale_gemm"
# cuBLAS's Hopper GEMMs show up as sm90_xmma_*, cutlass_* or nvjet_* (cuBLAS >= 12.9) or
# another *gemm* name. The lookahead keeps this from matching the Triton twin or the FlyDSL
# kernel (both contain "gemm"): the verifier forbids a candidate to run the baseline's
# required kernels, so a loose baseline pattern would fail every honest candidate.
CUBLAS_KERNELS = rf"^(?!.*(?:{TWIN_KERNEL}|{FLYDSL_KERNEL})).*(?:sm90_xmma|cutlass|nvjet|gemm)"
CK_KERNELS = r"kernel_gemm_xdl.*blockscale|gemm_a8w8_blockscale|ck_tile.*(?:gemm|blockscale)|fp8gemm_bf16_blockscale"

SHAPES = (
    {"M": 4096, "N": 65536, "K": 1536},  # wide-N, 512 MiB C
    {"M": 4096, "N": 2048, "K": 7168},  # narrow-N, deep-K
    {"M": 16384, "N": 1536, "K": 7168},  # narrow-N, deep-K, big-M
    {"M": 16384, "N": 7168, "K": 768},  # K-light, 235 MiB C (K/128 = 6: cuBLAS scale pad)
)
# parity only, never timed: a ragged M (1000 = 7 full 128-row tiles + 104), a decode-sized
# M, and an odd number of K blocks (9: cuBLAS's scale pad, N/128 = 18 column blocks). Kept
# small enough that the Triton interpreter gets through them on a CPU.
HIDDEN_SHAPES = (
    {"M": 1000, "N": 1536, "K": 1280},
    {"M": 64, "N": 7168, "K": 2048},
    {"M": 512, "N": 2304, "K": 1152},
)
# on CPU (Triton's interpreter, ~0.4 s per call at the smallest smoke shape) the hidden shape is a
# small one with an M tail inside a tile and K/128 = 3 (the pad path), at half that cost
CPU_HIDDEN_SHAPES = ({"M": 72, "N": 128, "K": 384},)
SMOKE_SHAPES = (
    {"M": 128, "N": 256, "K": 512},
    {"M": 256, "N": 384, "K": 768},  # K/128 = 6 (pad path), N/128 = 3 (odd tile count)
)


def flops(dims: dict[str, int]) -> float:
    return 2.0 * dims["M"] * dims["N"] * dims["K"]


def min_bytes(dims: dict[str, int]) -> float:
    """fp8 A and B once, fp32 scales once, bf16 C once (the preshuffled B is an alternative copy)."""
    m, n, k = dims["M"], dims["N"], dims["K"]
    scales = 4 * (m * (k // 128) + (n // 128) * (k // 128))
    return float(m * k + n * k + scales + 2 * m * n)


PARITY = ParitySpec(
    mode="strict",
    rtol=1e-2,
    atol=1e-2,
    max_mismatch=0,
    min_cosine=0.999,
    # a correct kernel differs from the oracle by bf16 rounding flips only (~1e-3);
    # the E8M0 trap lands near 0.2-0.3
    max_rel_l2=5e-3,
)

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

def refresh_inputs(values: dict, dims: dict[str, int], seed: int) -> None:
    """New activations (and their scales, both layouts) in place, drawn like ``make_inputs``
    does; the weights are static. O(M*K) on the device against the GEMM's O(M*N*K)."""
    import torch

    a = values["a"]
    gen = torch.Generator(device=a.device)
    gen.manual_seed(int(seed))
    q, scale = quantize_activations(realistic_activations(dims["M"], dims["K"], gen, a.device))
    a.copy_(q)
    values["a_scale"].copy_(scale)
    values["a_scale_t"].copy_(scale.t())


def oracle_at(values: dict, dims: dict[str, int], index: dict) -> dict:
    """``c`` at flat indices: one float64 dot product of dequantised rows per element, in bf16."""
    import torch

    idx = index["c"].long()
    rows, cols = idx // dims["N"], idx % dims["N"]
    k_blocks = dims["K"] // BLOCK
    a = values["a"][rows].double().view(-1, k_blocks, BLOCK) * values["a_scale"][rows].double()[:, :, None]
    b = values["b"][cols].double().view(-1, k_blocks, BLOCK) * values["b_scale"][cols // BLOCK].double()[:, :, None]
    return {"c": (a * b).sum(dim=(1, 2)).to(torch.bfloat16)}


# gfx950-emulated (FlyDSL arms on the emulator, CPU, parity only): the card config's smallest
# valid shape (one 64x256 tile, one K tile, ~0.4 s per launch) and, hidden, two M tiles with
# a ping-pong K pair (~1.5 s); gfx950_targets.EMULATED_ARMS compiles the kernels at these dims.
# One seed and the secret one, no perturbation: the scales are random per seed already.
EMULATION = EmulationSpec(shapes=({"M": 64, "N": 256, "K": 128},), hidden_shapes=({"M": 128, "N": 256, "K": 256},),
                          baseline="torch_dequant", seeds=(0,))

PROBLEM = Problem(
    card_id="flydsl_fp8_blockscale_gemm",
    name=NAME,
    dim_names=("M", "N", "K"),
    shapes=SHAPES,
    make_inputs=make_inputs,
    make_outputs=make_outputs,
    oracle=oracle,
    parity=PARITY,
    arms=ARMS,
    # one GEMM kernel per call; the segment is every kernel of the call (no filter)
    segment=SegmentSpec(kernels=()),
    perturbations=PERTURBATIONS,
    flops=flops,
    min_bytes=min_bytes,
    smoke_shapes=SMOKE_SHAPES,
    cpu_hidden_shapes=CPU_HIDDEN_SHAPES,
    hidden_shapes=HIDDEN_SHAPES,
    # the weights and their scales, as in a served model: prepared once (CK's preshuffle,
    # cuBLAS's K/128 pad to a multiple of 4), so build may preprocess them. All three stay
    # fixed together, so b and b_shuffled always agree; A and its scales change every round.
    static_inputs=("b", "b_shuffled", "b_scale"),
    refresh_inputs=refresh_inputs,
    oracle_at=oracle_at,
    emulation=EMULATION,
)

#: arms that must fail strict parity (the card's trap); a verifier run that passes them is broken
EXPECTED_PARITY_FAILURES = ("e8m0_scaled",)

"""The verifier binding of card ``flydsl_fp8_blockscale_gemm``: ``PROBLEM``.

One operator: fp8 e4m3 a8w8 GEMM with arbitrary fp32 block scales (1x128 on A,
128x128 on B), bf16 out. Strict parity against the fp32 dequant oracle (the card's
rtol=atol=1e-2, zero elements out of tolerance), on the card's four shapes.
The arms (baselines, references, ablations per platform): ``arms.ARMS``.
"""
from __future__ import annotations

from verifiers.problem import EmulationSpec, ParitySpec, Problem, SegmentSpec

from .arms import ARMS
from .inputs import PERTURBATIONS, make_inputs, make_outputs, realistic_activations
from .oracle import oracle
from .quant import BLOCK, quantize_activations

CARD_ID = "flydsl_fp8_blockscale_gemm"

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
    card_id=CARD_ID,
    name=CARD_ID,
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
    refreshed_inputs=("a", "a_scale", "a_scale_t"),
    oracle_at=oracle_at,
    emulation=EMULATION,
)

"""Static gfx950 gates for the FlyDSL block-scale fp8 GEMM (``flydsl_gemm``).

Each target compiles the 4-wave software-promote core for one of the card's configs at a
real card shape (``N`` and ``K`` are compile-time; ``M`` is a runtime argument, so a small
placeholder ``M`` gives the same code). The gates state the card's static claims:

* the fp8 MFMA is the CDNA4 16x16x128 one, and any scaled MFMA has both scales pinned to
  E8M0 1.0 (never an arbitrary fp32 block scale folded into the hardware scale);
* the fp32 promote is in software, once per 128-K block (every MFMA starts from a zero
  partial that is multiplied into the fp32 accumulator);
* no scratch (the card: anything past ``t64x256x128 wpe2`` spills and runs 3-10x slower),
  the register file fits 2 waves per SIMD, static LDS stays within the 2-stage A buffer
  plus the cshuffle epilogue tile.

NEGATIVE_TARGETS are deliberately wrong variants that the gates must catch.
Importing this module imports neither torch nor flydsl.
"""
from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from verifiers.gfx950 import CompileTarget, EmulatedArm, GateSpec, emulation_kernel

from .flydsl_8wave import CARD_CONFIG_8WAVE, MFMA_PER_K_ITER, EightWaveConfig
from .flydsl_8wave import describe as describe_8wave
from .flydsl_gemm import CARD_CONFIG, CARD_CONFIG_XCD8, BlockscaleConfig, describe

#: a runtime-M placeholder: M only bounds buffers, the compiled code does not depend on it
PLACEHOLDER_M = 256

#: card shapes the targets compile at (N, K); labels are provenance only
Q_UP = (65536, 1536)  # wide-N, 512 MiB C: xcd8 is the validated lever
DOWN_PROJ = (7168, 768)  # K-light, grid-saturated: tile_n=256/tile_k=128 is the lever
DEEP_K = (2048, 7168)  # narrow-N, deep-K: config_4wave keeps the K loop (register-staged A copy)
ODD_N = (384, 768)  # N % 256 != 0: config_4wave falls back to tile_n=128 (the problem's smoke shape)

ASYNC_A_COPY = r"^buffer_load_dwordx4\b.*\blds\b"  # A staged by the gfx950 buffer->LDS DMA

BASE_GATES = GateSpec(
    required=(
        r"^v_mfma(_scale)?_f32_16x16x128_f8f6f4\b",  # CDNA4 fp8 MFMA, K=128 per instruction
        r"^v_(pk_)?fma_f32\b",  # the promote's fp32 FMA
        r"^v_cvt_pk_bf16_f32\b",  # bf16 output
        ASYNC_A_COPY,
    ),
    forbidden=(
        r"^v_mfma_f32_16x16x32_(fp8|bf8)",  # the CDNA3 fp8 MFMA: wrong arch path
        r"^v_mfma_f32_32x32x64_f8f6f4\b",  # not this core's MFMA shape
    ),
    scaled_mfma="pinned",
    require_fp32_promote=True,
    promote_max_chain=1,
    max_scratch_bytes=0,
    max_vgpr=256,
    max_agpr=256,
    # two 64x128 fp8 A stages (16 KiB) + the padded 64x264 bf16 cshuffle tile (33 KiB)
    max_lds_bytes=64 * 1024,
    min_waves_per_simd=2,  # waves_per_eu=2: the register budget the card validated
)


def _target(
    name: str,
    shape: tuple[int, int],
    cfg: BlockscaleConfig,
    description: str,
    gates: GateSpec = BASE_GATES,
    expect_fail: tuple[str, ...] = (),
) -> CompileTarget:
    n, k = shape
    required = gates.required
    if cfg.epilogue == "cshuffle":  # the LDS reshuffle must end in 16-byte row-chunk stores
        required += (r"^buffer_store_dwordx4\b",)
    if not cfg.async_copy:  # A goes global -> registers -> LDS instead of the DMA
        required = tuple(r for r in required if r != ASYNC_A_COPY) + (r"^ds_write_b128\b",)
    gates = gates.model_copy(update={"required": required})

    def make():
        from .flydsl_gemm import compile_args

        return compile_args(PLACEHOLDER_M, n, k, cfg)

    return CompileTarget(
        name=name,
        make=make,
        gates=gates,
        description=description,
        config=MappingProxyType({"N": n, "K": k, **describe(cfg)}),
        expect_fail=expect_fail,
    )


TARGETS = [
    _target(
        "t64x256x128_wpe2_xcd8_qup",
        Q_UP,
        replace(CARD_CONFIG, xcd_swizzle=8),
        "card winner for wide-N (N=65536, K=1536): 4-wave t64x256x128 wpe2 + XCD swizzle 8",
    ),
    _target(
        "t64x256x128_wpe2_xcd0_qup",
        Q_UP,
        CARD_CONFIG,
        "xcd0 ablation arm of the wide-N shape (same code minus the CTA remap)",
    ),
    _target(
        "t64x256x128_wpe2_xcd0_down",
        DOWN_PROJ,
        CARD_CONFIG,
        "K-light (N=7168, K=768): 4-wave t64x256x128 wpe2; XCD non-load-bearing here",
    ),
    _target(
        "t64x256x128_wpe2_xcd8_sync_deepk",
        DEEP_K,
        replace(CARD_CONFIG, xcd_swizzle=8, async_copy=False),
        "deep K (N=2048, K=7168, 56 K tiles): register-staged A copy in an scf.for K loop",
    ),
    _target(
        "t64x128x128_wpe2_xcd8_oddn",
        ODD_N,
        replace(CARD_CONFIG, tile_n=128, xcd_swizzle=8),
        "tile_n=128 (the card's other swept tile_n), used by config_4wave when N % 256 != 0",
    ),
    _target(
        "t64x256x128_wpe2_direct_down",
        DOWN_PROJ,
        replace(CARD_CONFIG, epilogue="direct"),
        "ablation: bf16 stored straight from the MFMA layout instead of the LDS cshuffle",
    ),
    _target(
        "t64x256x128_wpe2_pinned_down",
        DOWN_PROJ,
        replace(CARD_CONFIG, mfma="pinned"),
        "same core through the scaled MFMA with both E8M0 scales pinned to 1.0 (0x7F7F7F7F)",
    ),
]

# --------------------------------------------------------------------------- 8-wave core
QKV = (2048, 7168)  # narrow-N, deep-K: the 8-wave cluster row of the card
GATE_UP = (1536, 7168)  # narrow-N, deep-K, big-M: the same row by shape class

EIGHT_WAVE_GATES = GateSpec(
    required=(
        r"^v_mfma_f32_16x16x128_f8f6f4\b",  # unscaled CDNA4 fp8 MFMA (scale operands 0)
        r"^v_(pk_)?fma_f32\b",  # the promote's fp32 FMA
        r"^v_cvt_pk_bf16_f32\b",
        r"^s_barrier\b",  # the ping-pong: quadrant clusters separated by barriers
        r"^buffer_store_dwordx2\b",  # swap-ab: 4 bf16 of one row per lane = 8-byte stores
    ),
    forbidden=(r"^v_mfma_f32_16x16x32_(fp8|bf8)", r"^v_mfma_f32_32x32x64_f8f6f4\b"),
    scaled_mfma="pinned",
    require_fp32_promote=True,
    promote_max_chain=1,
    promote_cluster=MFMA_PER_K_ITER,  # no promote between the 16 MFMAs of one K iteration
    max_scratch_bytes=0,
    max_vgpr=256,
    max_agpr=256,
    max_lds_bytes=0,  # operands go global -> registers
    min_waves_per_simd=2,  # 8 waves per CTA at waves_per_eu=2: the card's "1 block/CU, 2 waves/SIMD"
)


def _target_8wave(name: str, shape: tuple[int, int], cfg: EightWaveConfig, description: str,
                  expect_fail: tuple[str, ...] = ()) -> CompileTarget:
    n, k = shape

    def make():
        from .flydsl_8wave import compile_args

        return compile_args(PLACEHOLDER_M, n, k, cfg)

    return CompileTarget(name=name, make=make, gates=EIGHT_WAVE_GATES, description=description,
                         config=MappingProxyType({"N": n, "K": k, **describe_8wave(cfg)}), expect_fail=expect_fail)


TARGETS += [
    _target_8wave("8w_bm128_bn256_cluster_qkv", QKV, CARD_CONFIG_8WAVE,
                  "card winner for narrow-N/deep-K (N=2048, K=7168): 8-wave ping-pong, cluster promotes"),
    _target_8wave("8w_bm128_bn256_cluster_gateup", GATE_UP, CARD_CONFIG_8WAVE,
                  "narrow-N/deep-K big-M (N=1536, K=7168): the same 8-wave cluster row by shape class"),
]

NEGATIVE_TARGETS = [
    _target_8wave("neg_8w_interleaved_qkv", QKV, replace(CARD_CONFIG_8WAVE, schedule="interleaved"),
                  "WRONG on purpose: each quadrant promoted right after its own MFMAs (between MFMAs of "
                  "one K iteration, on the barrier path)", expect_fail=("promote_cluster",)),
    _target(
        "neg_hw_b_scale_down",
        DOWN_PROJ,
        replace(CARD_CONFIG, scale_mode="hw_b_scale"),
        "WRONG on purpose: B block scale folded into the scaled MFMA as an E8M0 exponent",
        expect_fail=("scaled_mfma",),
    ),
    _target(
        "neg_wpe3_spill_down",
        DOWN_PROJ,
        replace(CARD_CONFIG, waves_per_eu=3),
        "WRONG on purpose: waves_per_eu=3 squeezes the two-level accumulator into 168 VGPRs -> spills",
        expect_fail=("scratch",),
    ),
]


# --------------------------------------------------------------------------- emulator
# The 4-wave core run on the gfx950 emulator (verifiers/gfx950/emulator) at small shapes:
# parity against the problem's oracle on CPU. N and K are compile-time, so each arm
# compiles its own kernel; M is a runtime argument.


def _emulated(name: str, dims: dict, cfg: BlockscaleConfig, arm: str, description: str,
              expect_parity: bool = True) -> EmulatedArm:
    n, k = dims["N"], dims["K"]

    def make():
        from .flydsl_gemm import compile_args

        return compile_args(dims["M"], n, k, cfg)

    gemm = emulation_kernel("gemm", make, {"N": n, "K": k, **describe(cfg)})
    return EmulatedArm(name=name, arm=arm, dims=dims, kernels={"gemm": gemm}, build="flydsl_gemm:build_emulated",
                       baseline="torch_dequant", expect_parity=expect_parity, description=description)


#: the smallest shape with a ping-pong pair (K = 2 tiles) and two M tiles
EMU_SMALL = {"M": 128, "N": 256, "K": 256}

#: the smallest valid shape of the card config: one 64-row tile, one 256-wide N tile, one K tile
EMU_SMALLEST = {"M": 64, "N": 256, "K": 128}

#: an M tail inside the 64-row tile and an odd number of K tiles
EMU_TAIL = {"M": 100, "N": 256, "K": 384}


def _recipe(dims: dict) -> BlockscaleConfig:
    """The config ``recipe.config_for`` picks at ``dims`` (the emulation shapes are 4-wave shapes:
    K < 4096; the 8-wave row is emulated under its own arm below)."""
    from .recipe import config_for

    cfg = config_for(dims["M"], dims["N"], dims["K"])
    if not isinstance(cfg, BlockscaleConfig):
        raise ValueError(f"recipe picks {cfg} at {dims}: declare it under the 8-wave arm")
    return cfg


EMULATED_ARMS = [
    _emulated("recipe_smallest", EMU_SMALLEST, _recipe(EMU_SMALLEST), "flydsl_recipe",
              "the card's recipe at the problem's emulation shape (config_for -> the 4-wave core)"),
    _emulated("recipe_small", EMU_SMALL, _recipe(EMU_SMALL), "flydsl_recipe",
              "the card's recipe at the hidden emulation shape (config_for -> the 4-wave core)"),
    _emulated("recipe_tail", EMU_TAIL, _recipe(EMU_TAIL), "flydsl_recipe",
              "the card's recipe with an M tail (100 = 64 + 36 rows) and 3 K tiles (a ping-pong pair + the tail)"),
    _emulated("xcd8_smallest", EMU_SMALLEST, CARD_CONFIG_XCD8, "flydsl_4wave",
              "card config at its smallest valid shape (the emulator benchmark's case)"),
    _emulated("xcd8_small", EMU_SMALL, CARD_CONFIG_XCD8, "flydsl_4wave",
              "card config (t64x256x128 wpe2, async A copy, cshuffle, XCD swizzle 8)"),
    _emulated("xcd0_small", EMU_SMALL, CARD_CONFIG, "flydsl_4wave_xcd0", "the xcd0 ablation (no CTA remap)"),
    _emulated("sync_loop", {"M": 64, "N": 256, "K": 640}, replace(CARD_CONFIG_XCD8, async_copy=False),
              "flydsl_4wave", "register-staged A copy with the scf.for K loop (5 K tiles: 2 pairs + tail)"),
    _emulated("direct_tn128", {"M": 64, "N": 384, "K": 384},
              replace(CARD_CONFIG_XCD8, tile_n=128, epilogue="direct"), "flydsl_4wave",
              "tile_n=128 (N % 256 != 0) with the direct epilogue, 3 K tiles"),
    _emulated("pinned_small", EMU_SMALL, replace(CARD_CONFIG_XCD8, mfma="pinned"), "flydsl_4wave",
              "scaled MFMA with both E8M0 scales pinned to 1.0: exact for fp8, must pass"),
    _emulated("neg_hw_b_scale", EMU_SMALL, replace(CARD_CONFIG_XCD8, scale_mode="hw_b_scale"), "flydsl_4wave",
              "WRONG on purpose: real E8M0 block scales (B scale rounded to a power of two) must FAIL parity",
              expect_parity=False),
]

#: ``check-kernel --emulate --full``: the card's deep-K kernel (the gate target
#: t64x256x128_wpe2_xcd8_sync_deepk's config) at the problem's 4096x2048x7168, its whole
#: 56-tile K loop, 512 workgroups (about 23.5 M wave-instructions on the emulator)
FULL_EMULATED_ARMS = [
    _emulated("full_deepk", {"M": 4096, "N": 2048, "K": 7168}, replace(CARD_CONFIG, xcd_swizzle=8, async_copy=False),
              "flydsl_4wave", "the card's deep-K kernel at the problem's narrow-N, deep-K shape 4096x2048x7168"),
]


def _emulated_8wave(name: str, dims: dict, cfg: EightWaveConfig, description: str) -> EmulatedArm:
    k = dims["K"]

    def make():
        from .flydsl_8wave import compile_args

        return compile_args(dims["M"], dims["N"], k, cfg)

    gemm = emulation_kernel("gemm", make, {"K": k, **describe_8wave(cfg)})
    return EmulatedArm(name=name, arm="flydsl_8wave_cluster", dims=dims, kernels={"gemm": gemm},
                       build="flydsl_8wave:build_emulated", baseline="torch_dequant", description=description)


EMULATED_ARMS += [
    _emulated_8wave("w8_cluster_smallest", EMU_SMALLEST, CARD_CONFIG_8WAVE,
                    "8-wave cluster core at the problem's emulation shape: half a CTA of rows (M tail), one K step"),
    _emulated_8wave("w8_cluster_small", {"M": 128, "N": 256, "K": 256}, CARD_CONFIG_8WAVE,
                    "8-wave cluster core: one 128x256 CTA, 2 K iterations (one loop trip + the peeled last)"),
    _emulated_8wave("w8_cluster_tail", {"M": 200, "N": 512, "K": 384}, CARD_CONFIG_8WAVE,
                    "8-wave cluster core with an M tail (200 = 128 + 72 rows), 2 N blocks, 3 K iterations"),
    _emulated_8wave("w8_cluster_deepk", {"M": 192, "N": 512, "K": 1024}, CARD_CONFIG_8WAVE,
                    "8-wave cluster core, deeper K: 8 K iterations (the scf.for loop runs 7 trips), an M tail "
                    "(192 = 128 + 64 rows), 2 N blocks"),
]

#: ... and the recipe's narrow-N, deep-K row: ``config_for(4096, 2048, 7168)`` picks the 8-wave
#: cluster core, here at that shape with its whole K loop (56 K iterations, 256 CTAs of 128x256)
FULL_EMULATED_ARMS += [
    _emulated_8wave("full_8wave_cluster", {"M": 4096, "N": 2048, "K": 7168}, CARD_CONFIG_8WAVE,
                    "the recipe's 8-wave cluster core at the narrow-N, deep-K shape 4096x2048x7168 (config_for's pick)"),
]

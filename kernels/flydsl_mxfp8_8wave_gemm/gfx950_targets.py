"""Static gfx950 gates for the mxfp8 kernel: the opposite expectation from the block-scale card.

The block-scale card's kernel must keep the scaled MFMA's scales pinned to 1.0 (its fp32
scales are not powers of two and are applied in software). Here the scales *are* e8m0
powers of two, so the kernel must use ``v_mfma_scale_f32_16x16x128_f8f6f4`` with real,
per-lane scale operands loaded from the shuffled buffers (``scaled_mfma='real'``), must not
fall back to the unscaled MFMA, must not spill, and must store C with the 8-byte stores
that the A/B swap buys (a ``buffer_store_short`` epilogue means the swap was lost).

NEGATIVE_TARGETS are deliberately wrong variants of the same kernel that the gates must
catch: the scales pinned to 1.0 (what the block-scale kernel does) and the scale keywords
omitted from ``fx.gemm`` (the atom's default scale 0, which LLVM lowers to the unscaled
MFMA). Importing this module imports neither torch nor flydsl.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verifiers.gfx950 import CompileTarget, EmulatedArm, GateSpec, emulation_kernel

SCALED_MFMA = r"v_mfma_scale_f32_16x16x128_f8f6f4"
UNSCALED_F8F6F4 = r"v_mfma_f32_16x16x128_f8f6f4"
CDNA3_FP8_MFMA = r"v_mfma_f32_16x16x32_fp8"
SWAPPED_STORE = r"buffer_store_dwordx2"
KERNEL = r"mxfp8_gemm_4wave_swapab"

GATES = GateSpec(
    required=(SCALED_MFMA, SWAPPED_STORE),
    forbidden=(UNSCALED_F8F6F4, CDNA3_FP8_MFMA, r"buffer_store_short", r"scratch_"),
    scaled_mfma="real",
    max_scratch_bytes=0,
    max_lds_bytes=0,  # direct-to-register design: any LDS means the kernel changed
    min_waves_per_simd=2,
    waves_per_workgroup=4,
    kernel=KERNEL,
)


def _maker(waves_m: int, waves_n: int, k: int, scale_mode: str = "real") -> Callable[[], tuple[Any, tuple]]:
    def make() -> tuple[Any, tuple]:
        from skill_kernels.flydsl_mxfp8_8wave_gemm.flydsl_gemm import KernelConfig, compile_args

        cfg = KernelConfig(waves_m=waves_m, waves_n=waves_n, scale_mode=scale_mode)
        # M and N are runtime arguments (small placeholders); K is compiled in
        return compile_args(cfg, m=256, n=256, k=k)

    return make


def _config(waves_m: int, waves_n: int, k: int, scale_mode: str = "real") -> dict:
    return {
        "K": k,
        "waves_m": waves_m,
        "waves_n": waves_n,
        "block_m": 64 * waves_m,
        "block_n": 64 * waves_n,
        "waves_per_eu": 2,
        "scale_mode": scale_mode,
    }


def _target(name: str, waves_m: int, waves_n: int, k: int, description: str, scale_mode: str = "real",
            expect_fail: tuple[str, ...] = ()) -> CompileTarget:
    """The 4-wave kernel compiled with one parameter set (the compile and its reported config agree)."""
    return CompileTarget(name=name, make=_maker(waves_m, waves_n, k, scale_mode), gates=GATES, description=description,
                         config=_config(waves_m, waves_n, k, scale_mode), expect_fail=expect_fail)


TARGETS = [
    _target("bm128_bn128_k2048", 2, 2, 2048,
            "default tile (2x2 waves), K=2048 (PR rows N=5120): real per-32 scales, swapped A/B"),
    _target("bm64_bn256_k1280", 1, 4, 1280, "wide-N tile (1x4 waves), K=1280 (PR rows N=8192)"),
    _target("bm256_bn64_k384", 4, 1, 384,
            "tall tile (4x1 waves), K=384: an odd number of 128-K steps (the peeled tail)"),
]

# --------------------------------------------------------------------------- 8-wave kernel
KERNEL_8W = r"mxfp8_gemm_8wave_swapab"
PERMLANE = r"^v_permlane16_swap_b32"  # printed with its encoding suffix (_e32)
ROW64_STORE = r"^buffer_store_dwordx4\b.*\boffset:48\b"  # the 4th 16-byte store of a 64-byte row

GATES_8W = GATES.model_copy(update={
    "required": (SCALED_MFMA, PERMLANE, r"^ds_bpermute_b32\b", ROW64_STORE),
    "forbidden": (UNSCALED_F8F6F4, CDNA3_FP8_MFMA, r"^buffer_store_(short|byte|dword|dwordx2)\b", r"scratch_"),
    "waves_per_workgroup": 8,
    "kernel": KERNEL_8W,
})
#: block_n=128: a wave's row is 64 columns over 4 lanes, stage 1 only: 16-byte stores
GATES_8W_BN128 = GATES_8W.model_copy(update={
    "required": (SCALED_MFMA, PERMLANE, r"^buffer_store_dwordx4\b"),
})


def _config_8w(block_n: int, k: int, stores: str = "permlane") -> dict:
    return {"K": k, "block_m": 256, "block_n": block_n, "waves": 8, "stores": stores, "waves_per_eu": 2}


def _maker_8w(block_n: int, k: int, stores: str = "permlane", m: int = 256, n: int = 256):
    def make() -> tuple[Any, tuple]:
        from skill_kernels.flydsl_mxfp8_8wave_gemm.flydsl_8wave import Config8, compile_args

        return compile_args(Config8(block_n=block_n, stores=stores), m=m, n=n, k=k)

    return make


def _target_8w(name: str, block_n: int, k: int, gates: GateSpec, description: str, stores: str = "permlane",
               expect_fail: tuple[str, ...] = ()) -> CompileTarget:
    """The 8-wave kernel compiled with one parameter set (the compile and its reported config agree)."""
    return CompileTarget(name=name, make=_maker_8w(block_n, k, stores), gates=gates, description=description,
                         config=_config_8w(block_n, k, stores), expect_fail=expect_fail)


TARGETS += [
    _target_8w("8w_bm256_bn256_k2048", 256, 2048, GATES_8W,
               "PR tile, wide grid (pick_block_n: >= 129 wide tiles), K=2048: swap-ab stores "
               "widened by v_permlane16_swap + ds_bpermute to 64-byte rows"),
    _target_8w("8w_bm256_bn128_k1280", 128, 1280, GATES_8W_BN128,
               "PR tile, launch-starved grid (pick_block_n -> 128), K=1280: permlane16_swap stage, 16-byte stores"),
]

NEGATIVE_TARGETS = [
    _target_8w("neg_8w_direct_stores", 256, 2048, GATES_8W,
               "WRONG on purpose: the 8-byte swap-ab stores without the lane-exchange stages",
               "direct", ("required", "forbidden")),
    _target("scales_pinned_1p0", 2, 2, 2048,
            "both scale operands the constant E8M0 1.0 (0x7F7F7F7F), the block-scale kernel's contract",
            "pinned", ("scaled_mfma",)),
    _target("scales_omitted", 2, 2, 2048,
            "fx.gemm without scale_a/scale_b: default scale 0, lowered to the unscaled MFMA",
            "omitted", ("scaled_mfma", "required", "forbidden")),
]


# --------------------------------------------------------------------------- emulator
# The kernel on the gfx950 emulator (verifiers/gfx950/emulator) at small shapes: parity
# against the problem's oracle on CPU; the two wrong scale modes must fail it.


def _emulated(name: str, dims: dict, waves: tuple[int, int], scale_mode: str = "real",
              expect_parity: bool = True, description: str = "") -> EmulatedArm:
    def make() -> tuple[Any, tuple]:
        from skill_kernels.flydsl_mxfp8_8wave_gemm.flydsl_gemm import KernelConfig, compile_args

        cfg = KernelConfig(waves_m=waves[0], waves_n=waves[1], scale_mode=scale_mode)
        return compile_args(cfg, m=dims["M"], n=dims["N"], k=dims["K"])

    gemm = emulation_kernel("gemm", make, _config(waves[0], waves[1], dims["K"], scale_mode))
    return EmulatedArm(name=name, arm="flydsl_4wave", dims=dims, kernels={"gemm": gemm},
                       build="flydsl_gemm:build_emulated", baseline="torch_dequant", expect_parity=expect_parity,
                       description=description)


EMULATED_ARMS = [
    _emulated("real_2x2", {"M": 128, "N": 128, "K": 256}, (2, 2), description="default 2x2 wave grid, 2 K steps"),
    _emulated("real_2x2_tail", {"M": 320, "N": 256, "K": 384}, (2, 2),
              description="default 2x2 wave grid at the hidden emulation shape: an M tail (320 = 2 x 128 + 64), "
                          "2 N blocks, 3 K steps"),
    _emulated("real_4x1_tail", {"M": 192, "N": 64, "K": 384}, (4, 1),
              description="tall 4x1 grid, an M tail inside the block and an odd number of K steps"),
    _emulated("scales_pinned", {"M": 128, "N": 128, "K": 256}, (2, 2), "pinned", expect_parity=False,
              description="WRONG on purpose: scale operands pinned to E8M0 1.0 must FAIL parity"),
    _emulated("scales_omitted", {"M": 128, "N": 128, "K": 256}, (2, 2), "omitted", expect_parity=False,
              description="WRONG on purpose: scales omitted (unscaled MFMA) must FAIL parity"),
]



def _emulated_8w(name: str, arm: str, dims: dict, block_n: int, stores: str, description: str) -> EmulatedArm:
    """The 8-wave kernel at ``dims`` with ``block_n`` and ``stores`` compiled in. Under the card's
    recipe arm (``flydsl_8wave``) the compiled block_n must be what ``pick_block_n`` picks at
    ``dims`` (``build_emulated`` refuses otherwise); ``flydsl_8wave_bn256`` is the wide-grid row's
    tile at shapes small enough to emulate (every emulation-sized grid is launch-starved)."""
    cfg = {**_config_8w(block_n, dims["K"], stores), "dispatch": arm == "flydsl_8wave"}
    gemm = emulation_kernel("gemm", _maker_8w(block_n, dims["K"], stores, dims["M"], dims["N"]), cfg)
    return EmulatedArm(name=name, arm=arm, dims=dims, kernels={"gemm": gemm},
                       build="flydsl_8wave:build_emulated", baseline="torch_dequant", description=description)


#: the shapes the 8-wave arms run at: each has an M tail (rows past M inside a 256-row block)
EMU_8W_SMALL = {"M": 128, "N": 128, "K": 256}  # the problem's emulation shape: half a block, 2 K steps
EMU_8W_TAIL = {"M": 320, "N": 256, "K": 384}  # 256 + 64 rows, 2 N blocks of 128, 3 K steps
EMU_8W_WIDE = {"M": 256, "N": 256, "K": 256}  # one full 256x256 block
EMU_8W_WIDE_TAIL = {"M": 320, "N": 512, "K": 384}  # 256 + 64 rows, 2 N blocks of 256, 3 K steps

#: what a tail shape (EMU_8W_TAIL, EMU_8W_WIDE_TAIL: 2 N blocks of the tile's block_n) exercises
TAIL_8W = "M tail (320 = 256 + 64), 2 N blocks, 3 K steps"


def _tile_8w(arm: str, block_n: int, stores: str, what: str, shapes: dict[str, tuple[dict, str]]) -> list[EmulatedArm]:
    """One 8-wave tile declared once, emulated at each of ``shapes``: emulated arm name -> (dims,
    what that shape exercises, appended to ``what``)."""
    return [_emulated_8w(name, arm, dims, block_n, stores, f"{what}, {where}")
            for name, (dims, where) in shapes.items()]


EMULATED_ARMS += [
    # the card's recipe (flydsl_8wave): pick_block_n -> 128 (launch-starved), permlane16_swap stage
    *_tile_8w("flydsl_8wave", 128, "permlane", "recipe (pick_block_n -> 128): permlane16_swap stores",
              {"w8_recipe_small": (EMU_8W_SMALL, "128 of 256 rows, 2 K steps"),
               "w8_bn128_permlane_tail": (EMU_8W_TAIL, TAIL_8W)}),
    # the wide-grid row's tile: permlane16_swap + ds_bpermute transpose, 64-byte row stores
    *_tile_8w("flydsl_8wave_bn256", 256, "permlane", "block_n=256: permlane16_swap + ds_bpermute",
              {"w8_bn256_permlane": (EMU_8W_WIDE, "64-byte row stores, one 256x256 block, 2 K steps"),
               "w8_bn256_permlane_tail": (EMU_8W_WIDE_TAIL, TAIL_8W)}),
    # the ablation: the same kernel with the 8-byte swap-ab stores (no lane exchange), a block_n per shape
    _emulated_8w("w8_bn256_direct", "flydsl_8wave_direct", EMU_8W_WIDE, 256, "direct",
                 "8-byte swap-ab stores, block_n=256: one CTA, two 128-K steps"),
    _emulated_8w("w8_bn128_direct_tail", "flydsl_8wave_direct", EMU_8W_TAIL, 128, "direct",
                 f"8-byte swap-ab stores, block_n=128: an {TAIL_8W}"),
]

#: ``check-kernel --emulate --full``: the card's recipe arm at the problem's first shape,
#: 1024x5120x2048, its whole K loop (16 steps of 128): ``pick_block_n`` picks 128 there (a grid
#: of 80 wide blocks is launch-starved), so the permlane16_swap store stage runs, on 160 CTAs
FULL_EMULATED_ARMS = [
    _emulated_8w("full_recipe", "flydsl_8wave", {"M": 1024, "N": 5120, "K": 2048}, 128, "permlane",
                 "the card's recipe (pick_block_n -> 128, permlane16_swap stores) at the problem's 1024x5120x2048"),
]

"""Static gfx950 gates for the FlyDSL fp8-partial store epilogue and top-k reduce.

Each target compiles one kernel at a card shape (top_k and N are compile-time; M and the
row count are runtime arguments, so small placeholders give the same code) with the
reference scale ``REF_SCALE`` (0.0007, the card's example value; the value only changes
one constant). The gates state the card's static claims for each side:

* store side (``moe2_store_pf8_s<hex>``): the fp32 -> fp8 conversion
  ``v_cvt_pk_fp8_f32`` (or its scaled gfx950 form) is present, the stores are 16-byte
  (``buffer_store_dwordx4``), and the LLVM IR multiplies by exactly ``s`` (the float32
  constant, matched in every spelling LLVM uses for it);
* reduce side (``moe_reduce_infp8_s<hex>``): the fp8 -> fp32 conversion
  ``v_cvt_pk_f32_fp8`` / ``v_cvt_f32_fp8`` is present, the partial loads are 16-byte
  (``buffer_load_dwordx4``), the output is converted with ``v_cvt_pk_bf16_f32``, and the
  IR multiplies by exactly ``1/s`` rounded to float32: the reducer's unscale is the
  reciprocal of the producer's scale, checked in the binary;
* both: no MFMA, no scratch, and at most 64 VGPRs (8 waves per SIMD: a bandwidth kernel
  needs the occupancy).

NEGATIVE_TARGETS must fail: the bf16 baseline variants (no fp8 conversion at all), and a
reducer compiled with ``2 s`` (the card's reducer-only override) gated against the
producer's ``1/s`` constant. Importing this module imports neither torch nor flydsl.
"""
from __future__ import annotations

from types import MappingProxyType

from verifiers.gfx950 import CompileTarget, EmulatedArm, EmulationBudget, GateSpec, emulation_kernel

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.fp8_format import as_f32, f32_bits

REF_SCALE = 0.0007
#: card shapes: (top_k, N hidden) of the two validation models' stage 2
GPT_OSS = (4, 2880)  # top_k=4, hidden 2880, 128 experts
DEEPSEEK = (8, 7168)  # top_k=8, hidden 7168, 256 experts


def ir_constant(value: float) -> str:
    """A regex for a float32 constant as LLVM IR prints it: the short decimal form
    (``7.000000e-04``) when that parses back to the same float32, else hex (``f0x`` + the
    float32 bits in newer LLVM, ``0x`` + the double's bits in older LLVM)."""
    import re
    import struct

    v = as_f32(value)
    forms = [f"f0x{f32_bits(v):08X}", f"0x{struct.unpack('<Q', struct.pack('<d', v))[0]:016X}"]
    decimal = f"{v:.6e}"
    if as_f32(float(decimal)) == v:
        forms.append(re.escape(decimal))
    return "(" + "|".join(forms) + ")"


def _no_mfma_budget() -> dict:
    return {
        "forbidden": (r"^v_mfma",),
        "scaled_mfma": "forbidden",
        "max_scratch_bytes": 0,
        "max_vgpr": 64,
        "min_waves_per_simd": 8,
    }


def reduce_gates(scale: float) -> GateSpec:
    inv = as_f32(1.0 / as_f32(scale))
    return GateSpec(
        required=(
            r"^v_cvt_(pk_)?f32_fp8",  # fp8 -> f32 on the load side
            r"^buffer_load_dwordx4\b",  # 16-byte partial loads
            r"^buffer_store_dwordx4\b",  # 16-byte bf16 stores
            r"^v_cvt_pk_bf16_f32\b",  # full-width bf16 output
        ),
        required_ir=(rf"fmul .*{ir_constant(inv)}",),  # unscale by exactly 1/s
        kernel=r"^moe_reduce_",
        **_no_mfma_budget(),
    )


def store_gates(scale: float) -> GateSpec:
    return GateSpec(
        required=(
            r"^v_cvt_(scalef32_)?pk_fp8_f32\b",  # f32 -> fp8 on the store side
            r"^buffer_store_dwordx4\b",  # 16-byte partial stores
        ),
        required_ir=(rf"fmul .*{ir_constant(as_f32(scale))}",),  # scaled by exactly s
        kernel=r"^moe2_store_",
        **_no_mfma_budget(),
    )


def gemm_gates(scale: float) -> GateSpec:
    """The fused stage-2 GEMM (``moe2_gemm_cshuffle_pf8_s<hex>``): a bf16 MFMA datapath, the
    fp32 -> fp8 conversion in its epilogue, scaled by exactly ``s``, 16-byte row stores
    after the LDS reshuffle, no scratch, 2 waves per SIMD at least."""
    return GateSpec(
        required=(
            r"^v_mfma_f32_16x16x32_bf16\b",  # the GEMM itself: bf16 operands, fp32 accumulate
            r"^v_cvt_(scalef32_)?pk_fp8_f32\b",  # f32 -> fp8 in the epilogue
            r"^ds_write(2(st64)?)?_b32\b",  # cshuffle: lane dwords into the LDS tile ...
            r"^ds_read_b128\b",  # ... read back as 16-byte row chunks ...
            r"^buffer_store_dwordx4\b",  # ... and stored whole
        ),
        forbidden=(r"^v_mfma\w*_(f8f6f4|fp8|bf8)",),  # fp8 lives only in the store, never in the MMA
        required_ir=(rf"fmul .*{ir_constant(as_f32(scale))}",),  # scaled by exactly s
        scaled_mfma="forbidden",
        max_scratch_bytes=0,
        min_waves_per_simd=2,
        kernel=r"^moe2_gemm_",
    )


def _gemm_target(name, n, k, scale, gates, description, expect_fail=(), scale_mode="scaled"):
    def make():
        from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.flydsl_stage2_gemm import compile_args

        return compile_args(n, k, scale, scale_mode)

    return CompileTarget(
        name=name,
        make=make,
        gates=gates,
        description=description,
        config=MappingProxyType({"kernel": "gemm", "N": n, "K": k, "scale": scale, "scale_mode": scale_mode}),
        expect_fail=expect_fail,
    )


def _reduce_target(name, shape, scale, gates, description, expect_fail=()):
    top_k, n = shape

    def make():
        from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.flydsl_reduce import compile_args

        return compile_args(top_k, n, scale)

    return CompileTarget(
        name=name,
        make=make,
        gates=gates,
        description=description,
        config=MappingProxyType({"kernel": "reduce", "top_k": top_k, "N": n, "scale": scale}),
        expect_fail=expect_fail,
    )


def _store_target(name, n, scale, acc_dtype, gates, description, expect_fail=()):
    def make():
        from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.flydsl_stage2_epilogue import compile_args

        return compile_args(n, scale, acc_dtype)

    return CompileTarget(
        name=name,
        make=make,
        gates=gates,
        description=description,
        config=MappingProxyType({"kernel": "store", "N": n, "scale": scale, "acc": acc_dtype}),
        expect_fail=expect_fail,
    )


TARGETS = [
    _gemm_target(
        "gemm_cshuffle_pf8_n2880_k2880", 2880, 2880, REF_SCALE, gemm_gates(REF_SCALE),
        "fused stage-2 GEMM, fp8 partial store (cshuffle_pf8), hidden 2880, intermediate 2880",
    ),
    _gemm_target(
        "gemm_cshuffle_pf8_n7168_k2048", 7168, 2048, REF_SCALE, gemm_gates(REF_SCALE),
        "fused stage-2 GEMM, fp8 partial store (cshuffle_pf8), hidden 7168, intermediate 2048",
    ),
    _reduce_target(
        "reduce_infp8_k4_n2880", GPT_OSS, REF_SCALE, reduce_gates(REF_SCALE),
        "fp8-partial top-k reduce, top_k=4, hidden 2880 (ragged tile: 2880 < 4096 columns)",
    ),
    _reduce_target(
        "reduce_infp8_k8_n7168", DEEPSEEK, REF_SCALE, reduce_gates(REF_SCALE),
        "fp8-partial top-k reduce, top_k=8, hidden 7168",
    ),
    _store_target(
        "store_pf8_n2880_f32acc", GPT_OSS[1], REF_SCALE, "f32", store_gates(REF_SCALE),
        "fp8 partial-store epilogue from fp32 accumulator rows, hidden 2880",
    ),
    _store_target(
        "store_pf8_n7168_bf16acc", DEEPSEEK[1], REF_SCALE, "bf16", store_gates(REF_SCALE),
        "fp8 partial-store epilogue from bf16 accumulator rows, hidden 7168",
    ),
]

NEGATIVE_TARGETS = [
    _gemm_target(
        "neg_gemm_pf8_mismatched_2s_n7168", 7168, 2048, 2 * REF_SCALE, gemm_gates(REF_SCALE),
        "a producer compiled with 2s gated against the reducer's s (producer/reducer scale mismatch)",
        expect_fail=("required_ir",),
    ),
    _gemm_target(
        "neg_gemm_pf8_dropped_scale_n7168", 7168, 2048, REF_SCALE, gemm_gates(REF_SCALE),
        "the scale keyword dropped on the way to the kernel: fp8 stores of acc*w with the default 1.0",
        expect_fail=("required_ir",), scale_mode="dropped",
    ),
    _gemm_target(
        "neg_gemm_bf16_n7168", 7168, 2048, None, gemm_gates(REF_SCALE),
        "the bf16-partial baseline GEMM gated as fp8: no f32 -> fp8 conversion, no s",
        expect_fail=("required", "required_ir"),
    ),
    _reduce_target(
        "neg_reduce_inbf16_k8_n7168", DEEPSEEK, None, reduce_gates(REF_SCALE),
        "the bf16-partial baseline reducer gated as fp8: no fp8 decode, no 1/s",
        expect_fail=("required", "required_ir"),
    ),
    _reduce_target(
        "neg_reduce_mismatched_2s_k8_n7168", DEEPSEEK, 2 * REF_SCALE, reduce_gates(REF_SCALE),
        "a reducer compiled with 2s (reducer-only override) gated against the producer's 1/s",
        expect_fail=("required_ir",),
    ),
    _store_target(
        "neg_store_bf16_n7168", DEEPSEEK[1], None, "f32", store_gates(REF_SCALE),
        "the bf16 partial store gated as fp8: no f32 -> fp8 conversion, no s",
        expect_fail=("required", "required_ir"),
    ),
]


# --------------------------------------------------------------------------- emulator
# The FlyDSL reduce and store epilogue on the gfx950 emulator (verifiers/gfx950/emulator)
# at small shapes, behind the Triton stage-2 GEMM run in Triton's CPU interpreter; parity
# against the problem's oracle. The scale is the calibrated one for the arm's dims
# (computed inside ``make``, in the compile subprocess), x2 for the wrong reducer.
EMU_DIMS = {"M": 24, "N": 96, "K": 64, "E": 8, "top_k": 2}
EMU_RAGGED = {"M": 16, "N": 160, "K": 48, "E": 16, "top_k": 4}


def _calibrated(dims: dict) -> float:
    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.calibration import scale_for

    return scale_for(dims).scale


def _emu_reduce(dims: dict, fp8: bool, scale_factor: float = 1.0):
    def make():
        from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.flydsl_reduce import compile_args

        return compile_args(dims["top_k"], dims["N"], _calibrated(dims) * scale_factor if fp8 else None)

    cfg = {"kernel": "reduce", "top_k": dims["top_k"], "N": dims["N"], "fp8": fp8, "scale_factor": scale_factor}
    return emulation_kernel("reduce", make, cfg)


def _emu_store(dims: dict):
    def make():
        from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.flydsl_stage2_epilogue import compile_args

        return compile_args(dims["N"], _calibrated(dims), "f32")

    return emulation_kernel("store", make, {"kernel": "store", "N": dims["N"], "acc": "f32"})


EMULATED_ARMS = [
    EmulatedArm(name="fp8_reduce", arm="flydsl_reduce_fp8", dims=EMU_DIMS, kernels={"reduce": _emu_reduce(EMU_DIMS, True)},
                build="flydsl_arms:build_fp8_emulated", baseline="triton_bf16",
                description="Triton GEMM (CPU) storing e4m3(P*s) + the FlyDSL infp8 reduce (emulated)"),
    EmulatedArm(name="fp8_reduce_ragged", arm="flydsl_reduce_fp8", dims=EMU_RAGGED,
                kernels={"reduce": _emu_reduce(EMU_RAGGED, True)}, build="flydsl_arms:build_fp8_emulated",
                baseline="triton_bf16", description="top_k=4, N=160 (ragged column tile)"),
    EmulatedArm(name="fp8_epilogue", arm="flydsl_fp8_epilogue", dims=EMU_DIMS,
                kernels={"store": _emu_store(EMU_DIMS), "reduce": _emu_reduce(EMU_DIMS, True)},
                build="flydsl_arms:build_fp8_epilogue_emulated", baseline="triton_bf16",
                description="GEMM to fp32 rows (CPU) + FlyDSL fp8 store epilogue + FlyDSL reduce (both emulated)"),
    EmulatedArm(name="bf16_reduce", arm="flydsl_reduce_bf16", dims=EMU_DIMS, kernels={"reduce": _emu_reduce(EMU_DIMS, False)},
                build="flydsl_arms:build_bf16_emulated", baseline="triton_bf16",
                description="the bf16-partial baseline reducer (emulated)"),
    EmulatedArm(name="neg_reduce_2s", arm="flydsl_reduce_fp8", dims=EMU_DIMS,
                kernels={"reduce": _emu_reduce(EMU_DIMS, True, 2.0)}, build="flydsl_arms:build_fp8_emulated",
                baseline="triton_bf16", expect_parity=False,
                description="WRONG on purpose: a reducer compiled with 2s (the producer's s) must FAIL parity"),
]


def _emu_gemm(dims: dict, fp8: bool, scale_factor: float = 1.0, scale_mode: str = "scaled"):
    def make():
        from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.flydsl_stage2_gemm import compile_args

        return compile_args(dims["N"], dims["K"], _calibrated(dims) * scale_factor if fp8 else None, scale_mode)

    cfg = {"kernel": "gemm", "N": dims["N"], "K": dims["K"], "fp8": fp8, "scale_factor": scale_factor,
           "scale_mode": scale_mode}
    return emulation_kernel("gemm", make, cfg)


def _fused(name: str, arm: str, dims: dict, fp8: bool, description: str, *, gemm_factor: float = 1.0,
           reduce_factor: float = 1.0, scale_mode: str = "scaled", expect_parity: bool = True,
           baseline: str = "triton_bf16", budget: EmulationBudget = EmulationBudget()) -> EmulatedArm:
    kernels = {"gemm": _emu_gemm(dims, fp8, gemm_factor, scale_mode), "reduce": _emu_reduce(dims, fp8, reduce_factor)}
    return EmulatedArm(name=name, arm=arm, dims=dims, kernels=kernels, build="flydsl_arms:build_fused_emulated",
                       baseline=baseline, expect_parity=expect_parity, description=description, budget=budget)


#: fused GEMM shapes: N = 96 (a ragged 64-column tile), K = 64 (two 32-K steps); N = 192, K = 80
#: (a K tail of 16), top_k = 4 over 8 experts (blocks past num_padded run no K step)
EMU_FUSED_TAIL = {"M": 20, "N": 192, "K": 80, "E": 8, "top_k": 4}

EMULATED_ARMS += [
    _fused("fused_pf8", "flydsl_fp8", EMU_DIMS, True,
           "fused FlyDSL stage-2 GEMM (cshuffle_pf8 epilogue) + FlyDSL infp8 reduce, both emulated; ragged N tile"),
    _fused("fused_pf8_ktail", "flydsl_fp8", EMU_FUSED_TAIL, True,
           "the same with a K tail (80 = 2 x 32 + 16) and top_k=4 over 8 experts"),
    _fused("fused_bf16", "flydsl_bf16", EMU_DIMS, False,
           "the card's baseline: the same fused GEMM storing bf16 partials + FlyDSL inbf16 reduce"),
    _fused("neg_fused_reduce_2s", "flydsl_fp8", EMU_DIMS, True,
           "WRONG on purpose: producer compiled with s, reducer with 2s: must FAIL parity", reduce_factor=2.0,
           expect_parity=False),
    _fused("neg_fused_dropped_scale", "flydsl_fp8", EMU_DIMS, True,
           "WRONG on purpose: the producer's scale keyword dropped (stores e4m3(acc*w)), reducer 1/s: must FAIL",
           scale_mode="dropped", expect_parity=False),
]


# --------------------------------------------------------------------------- real card shape
# ``check-kernel --emulate --full``: the fused FlyDSL stage 2 (cshuffle_pf8 GEMM + infp8 reduce)
# compiled for the card's first shape (gpt-oss-120b-like: N=2880, K=2880; the scale calibrated
# for N, K, E, top_k) and run over the whole routing of M=16384 tokens, 128 experts, top_k=4.
# Its CPU baseline is ``torch_bf16`` (the bf16-partial baseline's arithmetic in torch): the
# Triton baseline in Triton's interpreter would take hours at this shape. The GEMM's grid is
# 1150 x 45 workgroups (1084 expert blocks with work, 90 K steps each): 418 M
# wave-instructions, past launch's default budget (200 M, 900 s); the budget below leaves
# ~2.4x the instructions and an hour (measured on this 2-core box: 0.28 M/s, 1474 s;
# bench/results/emulated_full_shapes.md).
CARD_GPT_OSS = {"M": 16384, "N": 2880, "K": 2880, "E": 128, "top_k": 4}
CARD_BUDGET = EmulationBudget(max_instructions=1_000_000_000, max_seconds=3600.0)

FULL_EMULATED_ARMS = [
    _fused("full_fused_pf8", "flydsl_fp8", CARD_GPT_OSS, True,
           "the fused FlyDSL stage 2 (cshuffle_pf8 GEMM + infp8 reduce) at the card shape "
           "M=16384 N=2880 K=2880 E=128 top_k=4", baseline="torch_bf16", budget=CARD_BUDGET),
]

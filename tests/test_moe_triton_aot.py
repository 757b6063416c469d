"""The Triton twins' GPU code path, compiled ahead of time for H200 (sm_90) and MI355X
(gfx950) without a device: kernel names from the compiler, the hardware fp8 conversion on
the store and load sides, and a bf16 (never fp8) MMA datapath."""
from __future__ import annotations

import re
import warnings

import pytest

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import naming, triton_static

pytestmark = pytest.mark.slow
S = 0.0007
TAG = naming.scale_hex(S)

FP8_STORE = {"sm90": r"cvt\.rn\.satfinite\.e4m3x2\.f32", "gfx950": r"v_cvt_(scalef32_)?pk_fp8_f32"}
FP8_LOAD = {"sm90": r"cvt\.rn\.f16x2\.e4m3x2", "gfx950": r"v_cvt_(scalef32_)?(pk_)?f32_fp8"}
BF16_MMA = {"sm90": r"wgmma\.mma_async\S*\.f32\.bf16\.bf16", "gfx950": r"v_mfma_f32_\w+_bf16"}
FP8_MMA = {"sm90": r"(wgmma|mma)\S*e4m3", "gfx950": r"v_mfma\w*(fp8|f8f6f4)"}


def _compile(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


@pytest.mark.parametrize("target", ["sm90", "gfx950"])
def test_fp8_gemm_keeps_a_bf16_datapath_and_stores_fp8(target):
    k = _compile(triton_static.compile_gemm, target, S)
    assert k.name == f"moe2_gemm_pf8_s{TAG}"
    assert re.search(FP8_STORE[target], k.asm)
    assert re.search(BF16_MMA[target], k.asm) and not re.search(FP8_MMA[target], k.asm)


def test_bf16_gemm_has_no_fp8_conversion():
    k = _compile(triton_static.compile_gemm, "gfx950", None)
    assert k.name == "moe2_gemm_bf16"
    assert not re.search(FP8_STORE["gfx950"], k.asm) and re.search(BF16_MMA["gfx950"], k.asm)


@pytest.mark.parametrize("target", ["sm90", "gfx950"])
def test_fp8_reduce_decodes_fp8_in_hardware(target):
    k = _compile(triton_static.compile_reduce, target, 8, S)
    assert k.name == f"moe_reduce_infp8_s{TAG}"
    assert re.search(FP8_LOAD[target], k.asm)
    base = _compile(triton_static.compile_reduce, target, 8, None)
    assert base.name == "moe_reduce_inbf16" and not re.search(FP8_LOAD[target], base.asm)

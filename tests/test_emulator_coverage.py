"""Issue 26 coverage: what Triton emits for gfx950 beyond plain GEMMs runs on the emulator and
matches torch, and each check fails when the instruction's semantics are broken.

Cases (``validation/triton_cases.py``): a masked-tail fp8 GEMM with a [K, N] B
(``ds_read_b64_tr_b8``), chained fp8 / bf16 dots (``v_permlane16/32_swap``, ``tr_b8``,
``tr_b16``), a bf16-output GEMM (``v_permlane32_swap``), a softmax over a wide range
(``v_div_scale_f32`` rescaling), the scaled 16x16x128 MFMA with all four scale-byte
selections, and atomics. Every mutation below replaces one semantic by a plausible wrong
variant and shows the case that guards it then mismatches.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.emulator_support import fresh_programs, mutate_handler, require_llvm


@pytest.fixture(autouse=True)
def _llvm():
    require_llvm()


def run(case: str, dims: dict | None = None):  # noqa: ANN201
    from verifiers.gfx950.emulator.validation.triton_cases import run_case

    return run_case(case, dims)


@pytest.mark.parametrize(
    ("case", "opcodes"),
    [
        ("fp8_gemm_masked_tail", ("ds_read_b64_tr_b8", "s_bitset1_b32")),
        ("fp8_chained_dot", ("v_permlane16_swap_b32_e32", "v_permlane32_swap_b32_e32", "ds_read_b64_tr_b8",
                             "v_mfma_f32_16x16x32_fp8_fp8")),
        ("bf16_chained_dot", ("ds_read_b64_tr_b16",)),
        ("bf16_gemm_bf16_out", ("v_permlane32_swap_b32_e32",)),
        ("softmax_rescale", ("v_div_scale_f32", "v_div_fmas_f32", "v_div_fixup_f32")),
        ("mxfp8_dot_scaled_16x16x128", ("v_mfma_scale_f32_16x16x128_f8f6f4",)),
        ("atomics", ("global_atomic_add_f32", "global_atomic_add", "global_atomic_smax", "global_atomic_umin",
                     "global_atomic_cmpswap")),
    ],
)
def test_triton_case_matches_torch(case, opcodes):
    r = run(case)
    missing = [o for o in opcodes if not r.report.opcode_counts.get(o)]
    assert not missing, f"{case} no longer exercises {missing}"
    assert not r.report.hazards, r.report.hazards
    assert r.ok, f"{case}: error {r.max_error} above {r.bound}"


def test_scaled_16x16x128_case_selects_every_scale_byte():
    """The case is only a check of op_sel / op_sel_hi if Triton uses non-zero selections."""
    from tests.emulator_support import instructions
    from verifiers.gfx950.emulator.ops.mfma import scale_byte
    from verifiers.gfx950.emulator.validation.triton_cases import binary

    b = binary("mxfp8_dot_scaled_16x16x128")
    mfmas = [i for i in instructions(b.hsaco, b.name) if i.mnemonic == "v_mfma_scale_f32_16x16x128_f8f6f4"]
    assert {scale_byte(i, 0) for i in mfmas} == {0, 1, 2, 3}
    assert {scale_byte(i, 1) for i in mfmas} == {0, 1, 2, 3}


def test_masked_tail_gemm_other_shape():
    """Tails in all three dimensions again, two K iterations, a partial last M and N tile."""
    r = run("fp8_gemm_masked_tail", {"M": 70, "N": 130, "K": 129})
    assert r.ok and not r.report.hazards, r.max_error


# ------------------------------------------------------------------ mutations
def _blocks_of_8(eb):  # 8x8 (4x4) transposes within lanes 0-7 / 8-15 of each row
    e = 8 // eb
    lane = np.arange(64)[:, None]
    src = (lane // e) * e + np.arange(e)[None, :]
    return src, np.broadcast_to(lane % e, src.shape).copy()


def _even_odd(eb):  # transposes among the even lanes and among the odd lanes of each row
    e = 8 // eb
    nb = 16 // e
    lane = np.arange(64)[:, None]
    src = (lane // 16) * 16 + np.arange(e)[None, :] * nb + lane % nb
    return src, np.broadcast_to((lane % 16) // nb, src.shape).copy()


@pytest.mark.parametrize("variant", [_blocks_of_8, _even_odd])
@pytest.mark.parametrize("case", ["fp8_gemm_masked_tail", "bf16_chained_dot"])
def test_transpose_read_lane_order_is_checked(monkeypatch, variant, case):
    from verifiers.gfx950.emulator.ops import ds_transpose

    monkeypatch.setattr(ds_transpose, "transpose_source", variant)
    assert not run(case).ok


def _no_op(w, ins):  # noqa: ANN001
    """A lane swap that moves nothing."""


@pytest.mark.parametrize("wrong_row", [32, None])
def test_permlane16_swap_is_checked(monkeypatch, wrong_row):
    from verifiers.gfx950.emulator.ops.lanes import _permlane_swap

    mutate_handler(monkeypatch, "v_permlane16_swap_b32", _permlane_swap(wrong_row) if wrong_row else _no_op)
    assert not run("fp8_chained_dot").ok


@pytest.mark.parametrize("case", ["fp8_chained_dot", "bf16_gemm_bf16_out"])
def test_permlane32_swap_is_checked(monkeypatch, case):
    from verifiers.gfx950.emulator.ops.lanes import _permlane_swap

    mutate_handler(monkeypatch, "v_permlane32_swap_b32", _permlane_swap(16))  # 16-lane rows swapped instead
    assert not run(case).ok


@pytest.mark.parametrize("scale", [1.0, 2.0**64])
def test_div_fmas_rescaling_is_checked(monkeypatch, scale):
    """div_fmas that ignores VCC (1.0) or always scales up: the softmax's denormal quotients go wrong,
    so the case does reach v_div_scale's rescaling branch."""
    from verifiers.gfx950.emulator.numerics import fma_f32
    from verifiers.gfx950.emulator.ops.common import bits, f32, srcs, write
    from verifiers.gfx950.emulator.operands import VCC

    def wrong(w, ins):  # noqa: ANN001
        (a, b, c), p = srcs(w, ins, ("f32",) * 3)
        on = w.mask_of((w.s[VCC] | (w.s[VCC + 1] << 32)) & w.exec_bits)
        write(w, ins, bits(fma_f32(f32(a), f32(b), f32(c), np.where(on, scale, 1.0))), p)

    mutate_handler(monkeypatch, "v_div_fmas_f32", wrong)
    assert not run("softmax_rescale").ok


@pytest.mark.parametrize("broken", ["vcc_clear", "no_scaling"])
def test_div_scale_and_fmas_agree(monkeypatch, broken):
    """div_scale's two outputs must agree with div_fmas: rescaling the numerator but leaving VCC
    clear, or setting VCC without rescaling, leaves the denormal quotients off by 2^64.
    (Leaving out both is harmless here: the emulator keeps f32 denormals, so the unscaled
    Newton-Raphson steps are exact enough; the rescaling exists for the hardware's
    denormal-flushing modes.)"""
    from verifiers.gfx950.emulator.ops import HANDLERS
    from verifiers.gfx950.emulator.ops.common import srcs, write, write_mask

    true_scale = HANDLERS["v_div_scale_f32"]

    def wrong(w, ins):  # noqa: ANN001
        true_scale(w, ins)
        if broken == "vcc_clear":
            write_mask(w, ins.operands[1], np.zeros(64, dtype=bool), False)
        else:
            (s0, _, _), p = srcs(w, ins, ("f32",) * 3, first=2)
            write(w, ins, s0, p)

    mutate_handler(monkeypatch, "v_div_scale_f32", wrong)
    assert not run("softmax_rescale").ok


def test_scale_byte_selection_is_checked(monkeypatch):
    """op_sel and op_sel_hi swapped (bit 0 / bit 1 of the scale byte index) must fail."""
    from verifiers.gfx950.emulator.ops import mfma

    true_select = mfma.scale_byte

    def swapped(ins, src):  # noqa: ANN001
        b = true_select(ins, src)
        return ((b & 1) << 1) | (b >> 1)

    monkeypatch.setattr(mfma, "scale_byte", swapped)
    assert not run("mxfp8_dot_scaled_16x16x128").ok


def test_mfma_lane_k_order_is_checked(monkeypatch):
    """A K order that is a permutation shared by A and B (lane group g holding K[E*g, E*g + E))
    is invisible to a plain dot (the sum over K does not care) but not to the scaled MFMA,
    whose E8M0 scales apply per 32-wide K block: the scaled cases catch it."""
    from verifiers.gfx950.emulator.ops import mfma

    def contiguous(m, k, elem_bytes):  # noqa: ANN001
        e = k * m // 64
        lane = np.arange(64)[:, None]
        kk = (lane // m) * e + np.arange(e)[None, :]
        return np.broadcast_to(lane % m, kk.shape).copy(), kk

    monkeypatch.setattr(mfma, "operand_layout", contiguous)
    assert run("fp8_gemm_16x16x128").ok  # a shared K permutation: a plain GEMM cannot tell
    assert not run("mxfp8_dot_scaled_16x16x128").ok
    assert not run("mxfp8_dot_scaled").ok


def test_atomic_collisions_are_checked(monkeypatch):
    """Colliding lanes applied as one vector update (lost updates): the bins' sums and counts go wrong."""
    from verifiers.gfx950.emulator.ops import atomics

    def lossy(w, ins, addr, data, cmp, fn):  # noqa: ANN001
        mem, what = w.ctx.memory, atomics._what(w, ins)
        old = np.ascontiguousarray(mem.load(addr, 4, what)).view(np.uint32)[:, 0].copy()
        with np.errstate(all="ignore"):
            mem.store(addr, fn(old, data, cmp).astype(np.uint32).view(np.uint8).reshape(-1, 4), what)
        return old

    monkeypatch.setattr(atomics, "_update", lossy)
    r = run("atomics")
    assert not r.ok and r.max_error["cnt"] > 0


def test_atomic_return_value_is_checked(monkeypatch):
    """Returning the new value instead of the old one: the returned add and cmpswap values go wrong."""
    from verifiers.gfx950.emulator.ops import atomics

    true_update = atomics._update

    def returns_new(w, ins, addr, data, cmp, fn):  # noqa: ANN001
        true_update(w, ins, addr, data, cmp, fn)
        return np.ascontiguousarray(w.ctx.memory.load(addr, 4, "")).view(np.uint32)[:, 0].copy()

    monkeypatch.setattr(atomics, "_update", returns_new)
    fresh_programs(monkeypatch)
    r = run("atomics")
    assert r.max_error["old"] > 0 and r.max_error["prev"] > 0


def test_missing_toolchain_fails_in_ci_and_skips_elsewhere(monkeypatch):
    from tests.emulator_support import toolchain_missing

    monkeypatch.delenv("SKILL_SERVER_REQUIRE_GFX950", raising=False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"apt-get install -y llvm-22 lld-22"):
        toolchain_missing("no llvm-objdump that knows gfx950")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        toolchain_missing("no llvm-objdump that knows gfx950")

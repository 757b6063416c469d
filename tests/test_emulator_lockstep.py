"""The lockstep executor (many waves per decoded instruction, batched handlers) computes what
the one-wave-at-a-time executor computes: same outputs bit for bit, same instruction and
opcode counts, same hazards; and it really batches (a batched handler that is not used
would make it only slower).
"""
from __future__ import annotations

import pytest

from tests.emulator_support import fresh_programs, require_llvm


@pytest.fixture(autouse=True)
def _llvm():
    require_llvm()


def _both(monkeypatch, case: str, dims: dict | None = None):  # noqa: ANN202
    import torch

    from verifiers.gfx950.emulator.validation import triton_cases

    outs = {}
    for mode in ("0", "1"):
        monkeypatch.setenv("SKILL_SERVER_EMULATOR_LOCKSTEP", mode)
        c = triton_cases.CASES[case]
        d = dict(c.dims if dims is None else dims)
        b = triton_cases.binary(case)
        args, outputs, _ = c.setup(d, 0)
        from verifiers.gfx950.emulator.dispatch import launch

        rep = launch(b.hsaco, b.name, c.grid(d), b.block, args + [None, None], dynamic_lds_bytes=b.shared)
        outs[mode] = (rep, {k: v.clone() for k, v in outputs.items()})
    (r0, o0), (r1, o1) = outs["0"], outs["1"]
    for k in o0:
        same = (o0[k] == o1[k]) | (torch.isnan(o0[k].float()) & torch.isnan(o1[k].float()))
        assert bool(same.all()), f"{case}: output {k} differs between the executors"
    assert r0.instructions == r1.instructions and r0.opcode_counts == r1.opcode_counts
    assert sorted((h.kind, h.address) for h in r0.hazards) == sorted((h.kind, h.address) for h in r1.hazards)
    return r0, r1


@pytest.mark.parametrize(
    ("case", "dims"),
    [
        ("fp8_gemm_16x16x128", {"M": 128, "N": 192, "K": 256}),  # 6 workgroups, global->LDS DMA
        ("mxfp8_dot_scaled_16x16x128", None),
        ("fp8_gemm_masked_tail", {"M": 70, "N": 130, "K": 129}),  # exec-masked tails: divergent lanes
        ("softmax_rescale", None),  # DPP, cross-wave LDS exchange, division
        ("bf16_gemm_bf16_out", None),
        ("fp8_cast", {"n": 3000}),
    ],
)
def test_lockstep_matches_one_wave_at_a_time(monkeypatch, case, dims):
    _both(monkeypatch, case, dims)


def test_lockstep_batches_the_hot_instructions(monkeypatch):
    """MFMA, LDS reads, global->LDS loads and elementwise VALU run through their batched handlers."""
    from collections import Counter

    from verifiers.gfx950.emulator.ops import batched as B
    from verifiers.gfx950.emulator.validation.triton_cases import run_case

    calls: Counter = Counter()
    for name in ("v_mfma_f32_16x16x128_f8f6f4", "ds_read_b128", "global_load_lds_dwordx4", "s_waitcnt"):
        per_wave, fn = B.BATCHED[name]

        def counted(waves, ins, fn=fn):  # noqa: ANN001
            ok = fn(waves, ins)
            calls[ins.mnemonic] += ok
            return ok

        monkeypatch.setitem(B.BATCHED, name, (per_wave, counted))
    fresh_programs(monkeypatch)
    monkeypatch.setenv("SKILL_SERVER_EMULATOR_LOCKSTEP", "1")
    r = run_case("fp8_gemm_16x16x128", {"M": 128, "N": 128, "K": 256})
    assert r.ok
    waves = r.report.waves
    for name in ("v_mfma_f32_16x16x128_f8f6f4", "ds_read_b128", "global_load_lds_dwordx4"):
        # every execution of the instruction happened in a batched call over all the waves
        assert calls[name] * waves == r.report.opcode_counts[name], (name, calls[name])
    assert calls["s_waitcnt"] > 0


def test_pure_ops_batch_only_when_rows_agree():
    """An elementwise op written for one 64-lane row (a Python loop over lanes) is not batched."""
    from verifiers.gfx950.emulator.ops.batched import pure_batched

    assert pure_batched("v_add_u32") is not None
    assert pure_batched("v_fma_f32") is not None
    assert pure_batched("v_bcnt_u32_b32") is None  # lane loop: per-wave only

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
    """MFMA, LDS reads, global->LDS loads, ds_bpermute, v_cndmask, v_bitop3, scalar ALU ops and
    elementwise VALU run through their batched handlers."""
    from collections import Counter

    from verifiers.gfx950.emulator.ops import batched as B
    from verifiers.gfx950.emulator.validation.triton_cases import run_case

    calls: Counter = Counter()
    for name in ("v_mfma_f32_16x16x128_f8f6f4", "ds_read_b128", "global_load_lds_dwordx4", "ds_bpermute_b32",
                 "s_waitcnt", "v_cndmask_b32", "v_bitop3_b32", "s_add_i32", "s_cselect_b32", "s_cmp_lt_i32"):
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
    for name in ("v_mfma_f32_16x16x128_f8f6f4", "ds_read_b128", "global_load_lds_dwordx4", "ds_bpermute_b32",
                 "v_cndmask_b32_e32", "v_bitop3_b32", "s_add_i32", "s_cselect_b32", "s_cmp_lt_i32"):
        # every execution of the instruction happened in a batched call over all the waves
        assert calls[name] * waves == r.report.opcode_counts[name], (name, calls[name])
    assert calls["s_waitcnt"] > 0


def test_pure_ops_batch_only_when_rows_agree():
    """An elementwise op written for one 64-lane row (a Python loop over lanes) is not batched."""
    from verifiers.gfx950.emulator.ops.batched import pure_batched

    assert pure_batched("v_add_u32") is not None
    assert pure_batched("v_fma_f32") is not None
    assert pure_batched("v_bcnt_u32_b32") is None  # lane loop: per-wave only


def _blockscale_arm(monkeypatch, lockstep: str, arm: str = "sync_loop"):  # noqa: ANN202
    """The block-scale card's FlyDSL arm ``arm`` on the emulator: (outputs, launch reports)."""
    from verifiers.gfx950.emulator.flydsl_arm import emulated_builder
    from verifiers.gfx950.targets import load_targets
    from verifiers.problem import load_problem

    folder = "flydsl_fp8_blockscale_gemm"
    monkeypatch.setenv("SKILL_SERVER_EMULATOR_LOCKSTEP", lockstep)
    problem = load_problem(folder)
    dims = dict(load_targets(folder).emulated_arm(arm).dims)
    inputs = problem.make_inputs(dims, 0, "cpu")
    outputs = problem.make_outputs(dims, "cpu")
    build = emulated_builder(folder, arm)
    build(inputs, outputs)()
    return outputs, [r for k in build.kernels.values() for r in k.reports]


def test_lockstep_matches_one_wave_on_the_blockscale_flydsl_kernel(monkeypatch):
    """The card's register-staged K loop (the deep-K kernel's structure) and its bf16 cshuffle
    epilogue: bit-identical outputs, counts and hazards in both executors, with the LDS
    sub-dword writes, bf16 packing and the uniform s_waitcnt landing really batched."""
    import torch

    from tests.emulator_support import require_flydsl_toolchain
    from verifiers.gfx950.emulator.ops import batched as B
    from verifiers.gfx950.emulator.ops import flow

    require_flydsl_toolchain()
    fresh_programs(monkeypatch)
    o0, r0 = _blockscale_arm(monkeypatch, "0")
    calls: dict = {}
    for name in ("ds_write_b16", "v_cvt_pk_bf16_f32"):
        per_wave, fn = B.BATCHED[name]

        def counted(waves, ins, fn=fn):  # noqa: ANN001
            ok = fn(waves, ins)
            calls[ins.mnemonic] = calls.get(ins.mnemonic, 0) + ok * len(waves)
            return ok

        monkeypatch.setitem(B.BATCHED, name, (per_wave, counted))
    uniform = flow._uniform_wait
    landed = []

    def counted_wait(waves, vm, lgkm):  # noqa: ANN001, ANN202
        ok = uniform(waves, vm, lgkm)
        landed.append(ok)
        return ok

    monkeypatch.setattr(flow, "_uniform_wait", counted_wait)
    fresh_programs(monkeypatch)
    o1, r1 = _blockscale_arm(monkeypatch, "1")
    for k in o0:
        assert torch.equal(o0[k].view(torch.uint8), o1[k].view(torch.uint8)), f"output {k} differs"
    assert [r.instructions for r in r0] == [r.instructions for r in r1]
    assert [r.opcode_counts for r in r0] == [r.opcode_counts for r in r1]
    assert [sorted((h.kind, h.address) for h in r.hazards) for r in r0] == \
        [sorted((h.kind, h.address) for h in r.hazards) for r in r1]
    counts = r1[0].opcode_counts
    for name in ("ds_write_b16", "v_cvt_pk_bf16_f32"):
        assert counts.get(name) and calls.get(name) == counts[name], (name, calls.get(name), counts.get(name))
    assert any(landed)


def test_lockstep_reports_reads_before_their_wait_as_one_wave_does(monkeypatch):
    """With the GEMM's LDS waits removed, batched instructions read registers whose loads are
    still in flight: the batch's in-flight counts (``state.InFlight``, read by
    ``ops.batched.quiet``) must send them to the per-wave path, which reports each read, in
    the same places as the one-wave-at-a-time executor."""
    from tests.emulator_support import nop_out
    from verifiers.gfx950.emulator.validation import triton_cases

    b = triton_cases.binary("fp8_gemm_16x16x128")
    patched, _ = nop_out(b.hsaco, b.name, lambda i: i.mnemonic == "s_waitcnt" and "lgkmcnt(0)" in i.text)
    found = {}
    for mode in ("0", "1"):
        monkeypatch.setenv("SKILL_SERVER_EMULATOR_LOCKSTEP", mode)
        fresh_programs(monkeypatch)
        r = triton_cases.run_case("fp8_gemm_16x16x128", {"M": 128, "N": 128, "K": 256}, code=patched)
        found[mode] = sorted({(h.kind, h.address) for h in r.report.hazards})
    assert any(kind == "read_before_wait" for kind, _ in found["1"]), found["1"]
    assert found["0"] == found["1"]


def test_in_flight_counts_follow_every_change():
    """``state.InFlight`` counts a register once per wave (a newer load into it does not count
    twice), uncounts it on delete, and refuses the dict methods that would skip the counts."""
    from verifiers.gfx950.emulator.state import InFlight, Pending

    counts: dict = {}
    a, b = InFlight(counts), InFlight(counts)
    p, q = Pending("vm"), Pending("vm")
    a[5] = p
    a[5] = q  # a second load into v5 of the same wave
    b.update({5: p, 6: p})
    assert counts == {5: 2, 6: 1}
    del a[5]
    del b[6]
    assert counts == {5: 1, 6: 0} and dict(b) == {5: p}
    for method in ("pop", "popitem", "clear", "setdefault"):
        with pytest.raises(NotImplementedError):
            getattr(b, method)(5) if method in ("pop", "setdefault") else getattr(b, method)()


def _hazard_rows(report) -> list:  # noqa: ANN001
    return sorted((h.kind, h.address, h.count, h.first_workgroup, h.first_wave, h.detail) for h in report.hazards)


@pytest.mark.parametrize("drop", [None, "s_barrier", "vmcnt"])
def test_batched_dma_lands_as_per_wave_dma(monkeypatch, drop):
    """Global->LDS DMA issued and landed for all waves at once (``ops.ds.dma_issue_batched`` /
    ``dma_landing``) leaves what the per-wave issue and landing leave in the same lockstep
    order: outputs, and every hazard with its count, first wave and detail, also with the
    barriers or the DMA waits removed (races and reads of undelivered LDS to report)."""
    import torch

    from tests.emulator_support import nop_out
    from verifiers.gfx950.emulator.dispatch import launch
    from verifiers.gfx950.emulator.ops import flow, vmem
    from verifiers.gfx950.emulator.validation import triton_cases

    b = triton_cases.binary("fp8_gemm_16x16x128")
    code = b.hsaco
    if drop == "s_barrier":
        code, _ = nop_out(code, b.name, lambda i: i.mnemonic == "s_barrier")
    elif drop == "vmcnt":
        code, _ = nop_out(code, b.name, lambda i: i.mnemonic == "s_waitcnt" and "vmcnt" in i.text)
    monkeypatch.setenv("SKILL_SERVER_EMULATOR_LOCKSTEP", "1")
    landed = []
    plan = flow.dma_landing

    def counted(records):  # noqa: ANN001, ANN202
        got = plan(records)
        landed.append(got is not None)
        return got

    monkeypatch.setattr(flow, "dma_landing", counted)
    runs = []
    for batched in (True, False):
        if not batched:
            monkeypatch.setattr(vmem, "dma_issue_batched", lambda *a: False)
        fresh_programs(monkeypatch)
        c, d = triton_cases.CASES["fp8_gemm_16x16x128"], {"M": 128, "N": 192, "K": 512}
        args, outputs, _ = c.setup(d, 0)
        r = launch(code, b.name, c.grid(d), b.block, args + [None, None], dynamic_lds_bytes=b.shared)
        runs.append((outputs, _hazard_rows(r), r.instructions))
        if batched and drop is None:
            assert not r.hazards and any(landed), landed
    (o1, h1, n1), (o0, h0, n0) = runs
    for k in o0:
        assert torch.equal(o0[k].view(torch.uint8), o1[k].view(torch.uint8)), f"output {k} differs"
    assert h1 == h0 and n1 == n0
    if drop == "s_barrier":
        assert any(kind == "lds_race" for kind, *_ in h1)


def _dma_records(regions: list[list[tuple[int, int]]], lds_bytes: int = 4096):  # noqa: ANN202
    """Batched DMA records of two waves of one workgroup: ``regions[r][j]`` = (LDS byte
    address of lane 0, bytes per lane) of wave ``j`` in record ``r``."""
    import numpy as np

    from verifiers.gfx950.emulator.executor import Workgroup
    from verifiers.gfx950.emulator.memory import LdsBank
    from verifiers.gfx950.emulator.ops.ds import dma_issue_batched
    from verifiers.gfx950.emulator.state import Wave

    class Ins:
        text = "global_load_lds_dwordx4 v1, s[0:1]"

    g = Workgroup((0, 0, 0), lds_bytes, LdsBank(1, lds_bytes), 0)
    g.waves = [Wave(g, j, (1 << 64) - 1, None) for j in range(2)]
    recs = []
    for region in regions:
        size = region[0][1]
        addrs = np.array([[a + size * lane for lane in range(64)] for a, _ in region], dtype=np.int64)
        assert dma_issue_batched(g.waves, Ins, addrs, np.zeros((2, 64, size), dtype=np.uint8))
        recs.append(g.waves[0].pending[-1])
    return g, recs


def test_dma_landing_refuses_what_needs_the_per_wave_order():
    """Two landings into one LDS dword, or a landing racing another wave's read of this epoch,
    depend on the per-wave landing order (which write wins, which race is reported first):
    ``dma_landing`` declines them (the per-wave path lands them); disjoint clean ones land."""
    from verifiers.gfx950.emulator.ops.ds import dma_landing

    _, recs = _dma_records([[(0, 16), (1024, 16)]])
    assert dma_landing(recs) is not None
    _, recs = _dma_records([[(0, 16), (1024, 16)], [(2048, 16), (3072, 4)]])
    assert dma_landing(recs) is not None
    _, recs = _dma_records([[(0, 16), (1024, 16)], [(2048, 16), (2044, 4)]])  # wave 1: dword 511 twice
    assert dma_landing(recs) is None
    g, recs = _dma_records([[(0, 16), (1024, 16)]])
    lds = g.lds
    lds.note_read(lds.dwords(__import__("numpy").array([1024 + 64]), 4), 0, g.epoch)  # wave 0 reads wave 1's target
    assert dma_landing(recs) is None

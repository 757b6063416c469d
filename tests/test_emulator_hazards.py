"""gfx950 emulator: what a silicon run would expose, on real compiler output made wrong.

Each test takes a kernel Triton compiled for gfx950 (hardware-tested codegen), removes
one synchronisation instruction (an ``s_waitcnt``, an ``s_barrier``) or one write, and
checks that the emulator reports the hazard that silicon would turn into wrong or
nondeterministic results; the unpatched kernel reports none.
"""
from __future__ import annotations

import pytest

from tests.emulator_support import S_TRAP_2, instructions, nop_out, patch_words, require_llvm


@pytest.fixture(autouse=True)
def _llvm():
    require_llvm()


def _kinds(report) -> set[str]:
    return {h.kind for h in report.hazards}


def _cast_code():
    from verifiers.gfx950.emulator.validation.triton_cases import binary

    b = binary("fp8_cast")
    return b.hsaco, b.name


def test_unpatched_kernels_are_clean():
    from verifiers.gfx950.emulator.validation.triton_cases import run_case

    for case in ("fp8_cast", "fp8_gemm_16x16x128"):
        r = run_case(case)
        assert r.ok and not r.report.hazards, (case, r.report.hazards)


def test_register_read_before_its_wait_is_reported_and_sees_poison():
    from verifiers.gfx950.emulator.validation.triton_cases import run_case

    code, name = _cast_code()
    patched, _ = nop_out(code, name, lambda i: i.mnemonic == "s_waitcnt" and "vmcnt(0)" in i.text)
    r = run_case("fp8_cast", code=patched)
    assert {"read_before_wait", "poison_store"} <= _kinds(r.report)
    rb = next(h for h in r.report.hazards if h.kind == "read_before_wait")
    assert "v_cvt_scalef32_pk_fp8_f32" in rb.instruction and "s_waitcnt" in rb.detail
    assert not r.ok  # the conversion ran on the registers' old contents


def test_poison_reaching_a_global_store_is_reported():
    from verifiers.gfx950.emulator.validation.triton_cases import run_case

    code, name = _cast_code()
    first_cvt = next(i for i in instructions(code, name) if i.mnemonic == "v_cvt_scalef32_pk_fp8_f32")
    patched = patch_words(code, first_cvt.address, [0xBF800000] * (first_cvt.size // 4))
    r = run_case("fp8_cast", code=patched)
    assert _kinds(r.report) == {"poison_store"}
    h = r.report.hazards[0]
    assert h.instruction.startswith("global_store") and "uninitialised" in h.detail


def test_missing_barrier_is_an_lds_race():
    from verifiers.gfx950.emulator.validation.triton_cases import binary, run_case

    b = binary("fp8_gemm_16x16x128")
    patched, _ = nop_out(b.hsaco, b.name, lambda i: i.mnemonic == "s_barrier")
    r = run_case("fp8_gemm_16x16x128", code=patched)
    assert "lds_race" in _kinds(r.report)
    race = next(h for h in r.report.hazards if h.kind == "lds_race")
    assert "another wave" in race.detail and "s_barrier" in race.detail


def test_lds_read_before_its_dma_completes_is_reported():
    """The GEMM stages A/B with global->LDS DMA; without the s_waitcnt before the barrier,
    other waves read LDS the DMA has not delivered."""
    from verifiers.gfx950.emulator.validation.triton_cases import binary, run_case

    b = binary("fp8_gemm_16x16x128")
    ins = instructions(b.hsaco, b.name)
    waits = [ins[k] for k in range(len(ins) - 1)
             if ins[k].mnemonic == "s_waitcnt" and "vmcnt(0)" in ins[k].text and ins[k + 1].mnemonic == "s_barrier"]
    assert waits
    patched = b.hsaco
    for w in waits:
        patched = patch_words(patched, w.address, [0xBF800000])
    r = run_case("fp8_gemm_16x16x128", code=patched)
    assert "lds_pending_read" in _kinds(r.report)


def test_undersized_lds_allocation_is_reported():
    """Launch the bf16 GEMM with less LDS than its code addresses: the lanes past the end
    are dropped (hardware range check) and reported."""
    import torch

    from verifiers.gfx950.emulator import launch
    from verifiers.gfx950.emulator.validation.triton_cases import CASES, binary

    b = binary("bf16_gemm")
    args, outputs, _ = CASES["bf16_gemm"].setup({"M": 64, "N": 64, "K": 128}, 0)
    r = launch(b.hsaco, b.name, (1, 1), b.block, args + [None, None], dynamic_lds_bytes=b.shared - 256)
    assert "lds_out_of_range" in _kinds(r) and r.lds_oob_writes > 0
    assert torch.isfinite(outputs["c"]).all()


def test_unimplemented_opcode_is_refused_naming_it_and_the_kernel():
    from verifiers.gfx950.emulator import UnimplementedInstruction, launch

    code, name = _cast_code()
    nop = next(i for i in instructions(code, name) if i.mnemonic == "s_nop")
    patched = patch_words(code, nop.address, [S_TRAP_2])
    import torch

    with pytest.raises(UnimplementedInstruction, match=r"kernel 'fp8_cast_kernel'.*'s_trap'.*not implemented"):
        launch(patched, name, 1, 256, [torch.zeros(8), torch.zeros(8, dtype=torch.uint8),
                                       torch.zeros(8, dtype=torch.uint8), 8, None, None])


def test_endless_loop_stops_with_a_clear_error():
    import torch

    from verifiers.gfx950.emulator import ExecutionError, launch

    code, name = _cast_code()
    end = next(i for i in instructions(code, name) if i.mnemonic == "s_endpgm")
    patched = patch_words(code, end.address, [0xBF82FFFF])  # s_branch -1: jump to itself
    with pytest.raises(ExecutionError, match="more than 1000 instructions executed"):
        launch(patched, name, 1, 256, [torch.zeros(8), torch.zeros(8, dtype=torch.uint8),
                                       torch.zeros(8, dtype=torch.uint8), 8, None, None], max_instructions=1000)


def test_a_grid_too_large_to_emulate_stops_at_the_time_budget():
    import torch

    from verifiers.gfx950.emulator import ExecutionError, launch

    code, name = _cast_code()
    n = 1 << 30  # a billion elements: far more workgroups than the budget allows
    with pytest.raises(ExecutionError, match="exceeded its 0.5 s budget"):
        launch(code, name, n // 1024, 256, [torch.zeros(8), torch.zeros(8, dtype=torch.uint8),
                                            torch.zeros(8, dtype=torch.uint8), 8, None, None], max_seconds=0.5)

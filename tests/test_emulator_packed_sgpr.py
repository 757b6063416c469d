"""Packed-f32 VOP3P ops with an SGPR-pair source, on a hand-written gfx950 kernel.

``v_pk_mul_f32 v[4:5], s[4:5], v[2:3] op_sel_hi:[0,1]`` is what LLVM emits to multiply both
halves of a VGPR pair by one scalar (the block-scale 8-wave core's promote does it): the SGPR
source is the 64-bit pair s[4:5], and op_sel / op_sel_hi pick which dword feeds the low and the
high half, so with op_sel_hi 0 only s4 is used and s5 may never have been written. The emulator
once ORed the pair's poison over both halves and reported the stores as uninitialised (seen in
the per-wave executor on ``w8_cluster_deepk``). Ground truth here is arithmetic on the kernel's
arguments (lane ``l`` stores ``(lo * l, hi * (l + 0.5))``), in both executors; reading a really
unwritten s5 must still be reported.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.emulator_support import require_llvm, toolchain_missing

X, Y = 3.0, -7.25  # the kernel's two f32 arguments: s4 and, when loaded, s5

KERNEL = """\
\t.amdgcn_target "amdgcn-amd-amdhsa--gfx950"
\t.text
\t.globl pk_sgpr
\t.p2align 8
\t.type pk_sgpr,@function
pk_sgpr:
\ts_load_dwordx2 s[2:3], s[0:1], 0x0
\t{load}
\ts_waitcnt lgkmcnt(0)
\tv_cvt_f32_u32_e32 v2, v0
\tv_add_f32_e32 v3, 0.5, v2
\tv_pk_mul_f32 v[4:5], s[4:5], v[2:3] {mods}
\tv_lshlrev_b32_e32 v6, 3, v0
\tglobal_store_dwordx2 v6, v[4:5], s[2:3]
\ts_endpgm
.Lend:
\t.size pk_sgpr, .Lend-pk_sgpr
\t.rodata
\t.p2align 6
\t.amdhsa_kernel pk_sgpr
\t\t.amdhsa_user_sgpr_kernarg_segment_ptr 1
\t\t.amdhsa_next_free_vgpr 8
\t\t.amdhsa_next_free_sgpr 8
\t\t.amdhsa_accum_offset 8
\t\t.amdhsa_kernarg_size 16
\t.end_amdhsa_kernel
\t.amdgpu_metadata
---
amdhsa.kernels:
  - .args:
      - {{ .address_space: global, .offset: 0, .size: 8, .value_kind: global_buffer }}
      - {{ .offset: 8, .size: 4, .value_kind: by_value }}
      - {{ .offset: 12, .size: 4, .value_kind: by_value }}
    .group_segment_fixed_size: 0
    .kernarg_segment_align: 8
    .kernarg_segment_size: 16
    .max_flat_workgroup_size: 64
    .name: pk_sgpr
    .private_segment_fixed_size: 0
    .sgpr_count: 8
    .symbol: pk_sgpr.kd
    .vgpr_count: 8
    .wavefront_size: 64
amdhsa.target: amdgcn-amd-amdhsa--gfx950
amdhsa.version: [1, 2]
...
\t.end_amdgpu_metadata
"""
ONLY_S4 = "s_load_dword s4, s[0:1], 0x8"  # s5 is never written
PAIR = "s_load_dwordx2 s[4:5], s[0:1], 0x8"  # s4 = X, s5 = Y


def _assemble(tmp_path: Path, load: str, mods: str) -> Path:
    from verifiers.gfx950.emulator.decoder import find_objdump
    from verifiers.gfx950.env import ToolchainMissing, find_linker

    require_llvm()
    mc = Path(find_objdump()).with_name("llvm-mc")
    if not mc.is_file():
        toolchain_missing(f"no llvm-mc next to {find_objdump()} (llvm-22 ships both)")
    try:
        linker = find_linker().path
    except ToolchainMissing as exc:
        toolchain_missing(str(exc))
    src, obj, hsaco = tmp_path / "k.s", tmp_path / "k.o", tmp_path / "k.hsaco"
    src.write_text(KERNEL.format(load=load, mods=mods))
    subprocess.run([str(mc), "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx950", "-filetype=obj", str(src), "-o", str(obj)],
                   check=True, capture_output=True, timeout=60)
    subprocess.run([str(linker), "-shared", str(obj), "-o", str(hsaco)], check=True, capture_output=True, timeout=60)
    return hsaco


def _run(hsaco: Path):  # noqa: ANN202
    import torch

    from verifiers.gfx950.emulator import launch

    out = torch.zeros(64, 2)
    report = launch(hsaco, "pk_sgpr", grid=(1,), block=(64,), args=[out, X, Y])
    return out.numpy(), report


def _expect(lo: float, hi: float) -> np.ndarray:
    lane = np.arange(64, dtype=np.float32)
    return np.stack([np.float32(lo) * lane, np.float32(hi) * (lane + np.float32(0.5))], axis=1)


@pytest.fixture(params=["1", "0"], ids=["lockstep", "per_wave"])
def executor(request, monkeypatch):
    monkeypatch.setenv("SKILL_SERVER_EMULATOR_LOCKSTEP", request.param)
    return request.param


@pytest.mark.parametrize(("load", "mods", "lo", "hi"), [
    (ONLY_S4, "op_sel_hi:[0,1]", X, X),  # LLVM's broadcast: s5 unwritten and unused
    (PAIR, "op_sel_hi:[0,1]", X, X),  # s5 written but still not selected
    (PAIR, "op_sel_hi:[1,1]", X, Y),  # the pair: lo from s4, hi from s5
    (PAIR, "op_sel:[1,0] op_sel_hi:[1,1]", Y, Y),  # lo from s5 too
], ids=["broadcast_s5_unwritten", "broadcast_s5_written", "pair", "high_dword_only"])
def test_packed_f32_sgpr_pair_source_follows_op_sel(tmp_path, executor, load, mods, lo, hi):
    out, report = _run(_assemble(tmp_path, load, mods))
    assert not report.hazards, report.hazards
    assert np.array_equal(out, _expect(lo, hi)), out[:3]


def test_a_selected_unwritten_high_dword_is_still_reported(tmp_path, executor):
    """The check is not switched off: op_sel_hi 1 really reads the never-written s5."""
    _, report = _run(_assemble(tmp_path, ONLY_S4, "op_sel_hi:[1,1]"))
    assert [h.kind for h in report.hazards] == ["poison_store"], report.hazards


def test_the_old_semantics_fail_the_ground_truth(tmp_path, monkeypatch):
    """Mutation: the pair's poison ORed over both halves (the defect) reports LLVM's broadcast
    form as an uninitialised store, so the broadcast case above catches it."""
    from verifiers.gfx950.emulator import state

    def ored(self, op, ins, ftype="b32", dwords=1):  # noqa: ANN001, ANN202 - the pre-fix vread_parts for SGPRs
        vals, p = self.vread(op, ins, ftype, dwords)
        if isinstance(op, state.Reg) and op.file == "v":
            return vals, self.vp[op.index: op.index + dwords].copy()
        return vals, np.broadcast_to(p, (dwords, state.LANES))

    monkeypatch.setenv("SKILL_SERVER_EMULATOR_LOCKSTEP", "0")
    monkeypatch.setattr(state.Wave, "vread_parts", ored)
    _, report = _run(_assemble(tmp_path, ONLY_S4, "op_sel_hi:[0,1]"))
    assert [h.kind for h in report.hazards] == ["poison_store"]

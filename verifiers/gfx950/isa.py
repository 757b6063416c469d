"""Parse gfx950 ISA (``22_final_isa.s``) and LLVM IR (``21_llvm_ir.ll``) text.

Pure functions over strings: no FlyDSL, no files. What they extract:

- ``parse_resources(isa)``: the ``.amdhsa_*`` directives (vgpr, agpr, accum_offset,
  sgpr, scratch and LDS bytes) plus the spill counts from the metadata block.
- ``instructions(isa)`` / ``histogram(isa)``: instruction lines and mnemonic counts.
- ``mfma_kinds(isa)``: which MFMA mnemonics occur and how often.
- ``scaled_mfma_calls(ir)``: each ``llvm.amdgcn.mfma.scale.*`` call with its two scale
  operands classified as pinned-to-1.0 (E8M0 0x7F in every byte the op_sel picks, i.e.
  i32 0x7F7F7F7F = 2139062143), another constant, or a real (non-constant) value.
- ``scratch_instructions(isa)``: ``scratch_*`` / ``buffer_* ... offen`` spill traffic lines.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class KernelResources(BaseModel):
    """Resource figures of one compiled kernel (from the ISA directives / metadata)."""

    model_config = ConfigDict(frozen=True)

    kernel: str
    vgpr: int  # architected VGPRs used (.vgpr_count, or accum_offset when absent)
    agpr: int  # AccVGPRs used (.agpr_count)
    accum_offset: int  # .amdhsa_accum_offset: first AGPR index in the unified file
    next_free_vgpr: int  # .amdhsa_next_free_vgpr (unified file: accum_offset + agpr)
    sgpr: int  # .amdhsa_next_free_sgpr
    scratch_bytes: int  # .amdhsa_private_segment_fixed_size (non-zero: spills / stack)
    lds_bytes: int  # .amdhsa_group_segment_fixed_size (static LDS per workgroup)
    vgpr_spill: int = 0  # .vgpr_spill_count
    sgpr_spill: int = 0  # .sgpr_spill_count
    workgroup_size: int | None = None  # threads per workgroup (.max_flat_workgroup_size)
    wavefront_size: int = 64


class ScaledMfmaCall(BaseModel):
    """One ``llvm.amdgcn.mfma.scale.*`` call in the LLVM IR."""

    model_config = ConfigDict(frozen=True)

    line: str
    scale_a: str  # operand text as written in the IR
    scale_b: str
    scale_a_kind: str  # 'pinned' | 'constant' | 'real'
    scale_b_kind: str


class KernelArtifacts(BaseModel):
    """What one compiled kernel leaves behind: its ISA, its LLVM IR and resources."""

    kernel: str
    isa: str
    llvm_ir: str = ""
    resources: KernelResources

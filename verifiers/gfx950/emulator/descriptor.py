"""The 64-byte AMDHSA kernel descriptor (``<kernel>.kd``) of a gfx9 code object.

Field layout from LLVM's AMDGPUUsage "Kernel Descriptor" tables (code object v4/v5):
the register-initialisation enables (user SGPRs, workgroup-id SGPRs, workitem-id
VGPRs), the entry offset, the register budgets and AccVGPR offset.
"""
from __future__ import annotations

import struct

from pydantic import BaseModel, ConfigDict

from verifiers.gfx950.emulator.errors import CodeObjectError

DESCRIPTOR_BYTES = 64


def _bits(value: int, lo: int, width: int) -> int:
    return (value >> lo) & ((1 << width) - 1)


class KernelDescriptor(BaseModel):
    model_config = ConfigDict(frozen=True)

    group_segment_fixed_size: int
    private_segment_fixed_size: int
    kernarg_size: int
    entry_offset: int  # kernel_code_entry_byte_offset, relative to the descriptor's address
    pgm_rsrc1: int
    pgm_rsrc2: int
    pgm_rsrc3: int
    code_properties: int
    kernarg_preload: int

    # --- rsrc2 / code properties, decoded
    @property
    def user_sgpr_count(self) -> int:
        return _bits(self.pgm_rsrc2, 1, 5)

    @property
    def enable_private_segment(self) -> bool:
        return bool(_bits(self.pgm_rsrc2, 0, 1))

    @property
    def workgroup_id_enables(self) -> tuple[bool, bool, bool]:
        return bool(_bits(self.pgm_rsrc2, 7, 1)), bool(_bits(self.pgm_rsrc2, 8, 1)), bool(_bits(self.pgm_rsrc2, 9, 1))

    @property
    def enable_workgroup_info(self) -> bool:
        return bool(_bits(self.pgm_rsrc2, 10, 1))

    @property
    def workitem_id_vgprs(self) -> int:
        """0: x only, 1: x and y, 2: x, y and z (packed into v0 on gfx90a and later)."""
        return _bits(self.pgm_rsrc2, 11, 2)

    @property
    def user_sgpr_enables(self) -> dict[str, bool]:
        names = ("private_segment_buffer", "dispatch_ptr", "queue_ptr", "kernarg_segment_ptr", "dispatch_id",
                 "flat_scratch_init", "private_segment_size")
        return {n: bool(_bits(self.code_properties, i, 1)) for i, n in enumerate(names)}

    @property
    def wavefront_size32(self) -> bool:
        return bool(_bits(self.code_properties, 10, 1))

    @property
    def kernarg_preload_dwords(self) -> int:
        return _bits(self.kernarg_preload, 0, 7)

    @property
    def kernarg_preload_offset(self) -> int:
        return _bits(self.kernarg_preload, 7, 9)

    @property
    def accum_offset(self) -> int:
        """First AccVGPR index in the unified register file (gfx90a+: rsrc3 bits 5:0)."""
        return (_bits(self.pgm_rsrc3, 0, 6) + 1) * 4

    @property
    def vgpr_granules(self) -> int:
        return _bits(self.pgm_rsrc1, 0, 6)

    @property
    def fp_denorm_mode_32(self) -> int:
        return _bits(self.pgm_rsrc1, 16, 2)


def parse_descriptor(raw: bytes, origin: str) -> KernelDescriptor:
    if len(raw) != DESCRIPTOR_BYTES:
        raise CodeObjectError(f"{origin}: kernel descriptor is {len(raw)} bytes, expected {DESCRIPTOR_BYTES}")
    group, private, kernarg = struct.unpack_from("<III", raw, 0)
    entry = struct.unpack_from("<q", raw, 16)[0]
    rsrc3, rsrc1, rsrc2 = struct.unpack_from("<III", raw, 44)
    props, preload = struct.unpack_from("<HH", raw, 56)
    return KernelDescriptor(
        group_segment_fixed_size=group,
        private_segment_fixed_size=private,
        kernarg_size=kernarg,
        entry_offset=entry,
        pgm_rsrc1=rsrc1,
        pgm_rsrc2=rsrc2,
        pgm_rsrc3=rsrc3,
        code_properties=props,
        kernarg_preload=preload,
    )

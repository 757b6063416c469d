"""The typed result of one emulated launch: what ran, how long, what a silicon run would expose."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

HazardKind = Literal[
    "read_before_wait",  # a register read while the load that writes it is still outstanding
    "write_before_wait",  # a register overwritten while a load into it is still outstanding
    "lds_race",  # LDS written by one wave and read/written by another with no barrier between
    "lds_pending_read",  # LDS read while a buffer->LDS DMA into it is still outstanding
    "poison_store",  # an uninitialised (poisoned) value reached a global store
    "poison_branch",  # a branch, exec mask or address computed from an uninitialised value
    "lds_out_of_range",  # some lanes of one LDS access fall past the workgroup's allocation
]


class Hazard(BaseModel):
    """One kind of hazard at one instruction (repeats are counted, not listed)."""

    kind: HazardKind
    kernel: str
    address: int
    instruction: str
    detail: str
    count: int = 1
    first_workgroup: tuple[int, int, int]
    first_wave: int


class EmulatedLaunch(BaseModel):
    kernel: str
    code_object: str  # origin (path or 'bytes') and digest prefix
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    workgroups: int
    waves: int
    instructions: int  # executed, all waves
    opcode_counts: dict[str, int]
    hazards: list[Hazard] = []
    seconds: float
    decode_seconds: float
    buffer_oob_loads: int = 0  # lanes whose buffer load was out of range (read 0), as hardware does
    buffer_oob_stores: int = 0  # lanes whose buffer store was dropped
    lds_oob_reads: int = 0  # lane accesses outside the LDS allocation: read 0 (hardware range check)
    lds_oob_writes: int = 0  # ... dropped

    @property
    def clean(self) -> bool:
        return not self.hazards

    def summary(self) -> str:
        hz = ", ".join(f"{h.kind}@0x{h.address:x}x{h.count}" for h in self.hazards) or "none"
        return (f"{self.kernel}: {self.workgroups} workgroups, {self.waves} waves, {self.instructions} instructions "
                f"in {self.seconds:.2f} s; hazards: {hz}")

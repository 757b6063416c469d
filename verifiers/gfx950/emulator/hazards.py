"""Collects hazards during a launch, deduplicated by (kind, instruction address)."""
from __future__ import annotations

from verifiers.gfx950.emulator.report import Hazard

MAX_KINDS = 200  # distinct (kind, address) pairs kept; the rest are counted in the last entry


class HazardLog:
    def __init__(self, kernel: str) -> None:
        self.kernel = kernel
        self._by_key: dict[tuple[str, int], Hazard] = {}

    def add(self, kind: str, wave, ins, detail: str) -> None:  # noqa: ANN001 - Wave, Instruction
        key = (kind, ins.address)
        h = self._by_key.get(key)
        if h is not None:
            h.count += 1
            return
        if len(self._by_key) >= MAX_KINDS:
            return
        self._by_key[key] = Hazard(kind=kind, kernel=self.kernel, address=ins.address, instruction=ins.text,
                                   detail=detail, first_workgroup=wave.group.id, first_wave=wave.index)

    def hazards(self) -> list[Hazard]:
        return sorted(self._by_key.values(), key=lambda h: (h.kind, h.address))

"""Cache layouts of AMD GPUs that a device query does not fully report.

``torch.cuda.get_device_properties(i).L2_cache_size`` on ROCm gives one XCD's L2; the parts
below spread a launch over several XCDs (each with its own L2) and put a memory-attached
last-level cache (MALL, "Infinity Cache") in front of HBM. The flush rule and the twin's
grouping both read this table; the doctor prints it beside what the device reported.
"""
from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20


@dataclass(frozen=True)
class AmdCacheLayout:
    l2_per_xcd_bytes: int
    xcds: int
    mall_bytes: int
    source: str

    @property
    def total_bytes(self) -> int:
        """Every byte of cache a write-only flush must push out: all L2s plus the MALL."""
        return self.l2_per_xcd_bytes * self.xcds + self.mall_bytes


KNOWN: dict[str, AmdCacheLayout] = {
    "gfx950": AmdCacheLayout(4 * MIB, 8, 256 * MIB, "MI355X: 4 MiB L2 per XCD, 8 XCDs, 256 MiB MALL"),
    "gfx942": AmdCacheLayout(4 * MIB, 8, 256 * MIB, "MI300X: 4 MiB L2 per XCD, 8 XCDs, 256 MiB MALL"),
}


def layout_for(arch: str | None) -> AmdCacheLayout | None:
    """The layout for a ``gcnArchName`` such as ``gfx950:sramecc+:xnack-``, or None."""
    return KNOWN.get((arch or "").split(":")[0].strip())

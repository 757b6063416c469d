"""What the doctor's checks share inside one check process: earlier results, torch, the device.

The checks run in order in a child process (``skill_server.doctor.child``); later checks
read what earlier ones found (the device check's build, the caches check's figures) and
reuse the imported torch and the opened device instead of paying for them again.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from skill_server.doctor import seams as doctor_seams
from skill_server.doctor.result import CheckResult

if TYPE_CHECKING:  # pragma: no cover
    from verifiers.hw.device import Device

Build = Literal["rocm", "cuda", "cpu"]


def module_present(name: str) -> bool:
    """Whether ``name`` can be found for import (a finder that refuses it counts as absent)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def build_of(torch: Any) -> Build:
    if getattr(torch.version, "hip", None):
        return "rocm"
    if getattr(torch.version, "cuda", None):
        return "cuda"
    return "cpu"


@dataclass
class CheckContext:
    skills_dir: Path | None = None
    results: dict[str, CheckResult] = field(default_factory=dict)
    _device: "Device | None" = None
    _cpu: "Device | None" = None

    def torch(self) -> Any:
        import torch

        return torch

    def build(self) -> Build:
        return build_of(self.torch())

    def gpu_ready(self) -> bool:
        """The device check found a usable GPU."""
        dev = self.results.get("device")
        return dev is not None and dev.status in ("ok", "warn")

    def gpu_device(self) -> "Device":
        """The first GPU, opened once through the verifier's own ``open_device``."""
        if self._device is None:
            self._device = doctor_seams.open_device("cuda")
        return self._device

    def timing_device(self) -> "Device":
        """The GPU when there is one, else the CPU (what a verification here would time on)."""
        if self.gpu_ready():
            return self.gpu_device()
        if self._cpu is None:
            self._cpu = doctor_seams.open_device("cpu")
        return self._cpu

    def details_of(self, check_id: str) -> Any:
        found = self.results.get(check_id)
        return found.details if found is not None else None

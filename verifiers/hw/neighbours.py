"""Other processes with a context on the GPU under test.

While the arms are timed, a process outside the judge's tree that holds a context on
the device (a helper the candidate started some other way, another user's job) can slow
one arm and not the other; the timing is then INCONCLUSIVE, naming the process. NVIDIA:
NVML (``pynvml`` / ``nvidia-ml-py``); AMD: ``amdsmi``. When neither library is present
the watch is ``unavailable`` and the report says so.

NVML reports host PIDs; inside a PID namespace those need not match the judge's view.
When none of the judge's own processes appear among the PIDs the device reports, the
watch counts contexts instead: more contexts than the judge's processes hold means a
neighbour it cannot name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Neighbour:
    pid: int
    name: str
    used_memory_bytes: int | None = None

    def describe(self) -> str:
        mem = f", {self.used_memory_bytes / 2**20:.0f} MiB" if self.used_memory_bytes else ""
        return f"pid {self.pid} ({self.name}{mem})"


@dataclass
class NeighbourWatch:
    backend: str  # nvml | amdsmi | unavailable | cpu
    reason: str = ""
    _handle: Any = None
    _lib: Any = None
    seen: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, platform: str, device_index: int | None, uuid: str | None = None) -> "NeighbourWatch":
        if platform == "cpu":
            return cls("cpu", "no GPU: other processes are not watched on CPU")
        errors = []
        if platform == "cuda":
            try:
                import pynvml

                pynvml.nvmlInit()
                handle = None
                for form in ([uuid, f"GPU-{uuid}"] if uuid else []):  # torch prints it without NVML's prefix
                    try:
                        handle = pynvml.nvmlDeviceGetHandleByUUID(form)
                        break
                    except Exception:
                        continue
                if handle is None:  # NVML's index ignores CUDA_VISIBLE_DEVICES: a fallback only
                    handle = pynvml.nvmlDeviceGetHandleByIndex(device_index or 0)
                return cls("nvml", "", handle, pynvml)
            except Exception as exc:  # ImportError, NVMLError
                errors.append(f"NVML: {type(exc).__name__}: {exc}")
        if platform == "rocm":
            try:
                import amdsmi

                amdsmi.amdsmi_init()
                handles = amdsmi.amdsmi_get_processor_handles()
                return cls("amdsmi", "", handles[device_index or 0], amdsmi)
            except Exception as exc:
                errors.append(f"amdsmi: {type(exc).__name__}: {exc}")
        return cls("unavailable", "; ".join(errors) or f"no GPU process library for {platform}")

    def _pids(self) -> dict[int, int | None]:
        if self.backend == "nvml":
            lib = self._lib
            procs = list(lib.nvmlDeviceGetComputeRunningProcesses(self._handle))
            try:
                procs += list(lib.nvmlDeviceGetGraphicsRunningProcesses(self._handle))
            except Exception:
                pass
            return {int(p.pid): getattr(p, "usedGpuMemory", None) for p in procs}
        if self.backend == "amdsmi":
            out: dict[int, int | None] = {}
            for p in self._lib.amdsmi_get_gpu_process_list(self._handle):
                info = p if isinstance(p, dict) else self._lib.amdsmi_get_gpu_process_info(self._handle, p)
                pid = int(info.get("pid", 0))
                if pid:
                    mem = info.get("mem") or (info.get("memory_usage") or {}).get("vram_mem")
                    out[pid] = int(mem) if isinstance(mem, (int, float)) else None
            return out
        return {}

    def foreign(self, ours: set[int]) -> list[Neighbour]:
        """Processes with a context on the device that are not ``ours`` (empty when unwatched)."""
        if self.backend not in ("nvml", "amdsmi"):
            return []
        try:
            pids = self._pids()
        except Exception as exc:
            return [Neighbour(0, f"the {self.backend} process query failed: {type(exc).__name__}: {exc}")]
        if not pids:
            # the judge itself holds a context: an empty list means the library cannot see any
            self.reason = f"{self.backend} lists no process on the device, not even the judge's: neighbours cannot be seen"
            return []
        if not (set(pids) & ours):
            # another PID namespace: count contexts instead of naming them
            extra = len(pids) - len(ours)
            return [Neighbour(0, f"{extra} unidentified process(es) (PIDs from another namespace)")] if extra > 0 else []
        return [Neighbour(pid, _comm(pid), mem) for pid, mem in sorted(pids.items()) if pid not in ours]


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "not visible from here"

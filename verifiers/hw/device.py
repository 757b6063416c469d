"""The device under test, as the judge sees it: platform, synchronisation, cache flush.

One code path for CUDA and ROCm (``torch.cuda`` is HIP on ROCm). The judge opens the
device in its own process (no candidate code ever runs there), flushes the caches before
every call with its own buffer, and measures the copy bandwidth for the physical bound.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal

from verifiers.hw.amd_caches import layout_for

if TYPE_CHECKING:  # pragma: no cover
    import torch

Platform = Literal["cuda", "rocm", "cpu", "gfx950-emulated"]
#: FlyDSL arms' gfx950 code objects run on CPU tensors through the emulator: parity only
EMULATED = "gfx950-emulated"

MIB = 1 << 20
# MI300X / MI355X carry a 256 MiB Infinity Cache that torch does not report as L2; a known
# arch's whole layout (verifiers/hw/amd_caches.py) raises the flush above this floor.
ROCM_FLUSH_FLOOR = 512 * MIB
# 256 MiB is what KernelBench / do_bench flush; Hopper's L2 (50-60 MiB) is far below it.
CUDA_FLUSH_FLOOR = 256 * MIB
CPU_LLC_FALLBACK = 32 * MIB

_perf_counter_ns = time.perf_counter_ns  # taken at harness import, before any candidate
_process_time_ns = time.process_time_ns


@dataclass
class Device:
    torch_device: "torch.device"
    platform: Platform
    name: str
    llc_bytes: int
    properties: dict[str, Any] = field(default_factory=dict)
    sync: Callable[[], None] = lambda: None
    event_cls: Any = None
    event_record: Callable[[Any], None] | None = None
    event_elapsed_ms: Callable[[Any, Any], float] | None = None
    perf_counter_ns: Callable[[], int] = _perf_counter_ns
    # CPU platform: the timed figure is the CPU time of the whole process (every thread),
    # which a loaded CI box's preemption does not inflate; wall time is kept beside it
    cpu_timer: Literal["process_time", "perf_counter"] = "process_time"

    @property
    def is_gpu(self) -> bool:
        return self.platform in ("cuda", "rocm")

    def default_flush_bytes(self) -> int:
        if self.platform == "rocm":

            known = layout_for(str(self.properties.get("gcnArchName") or ""))
            return max(2 * self.llc_bytes, 2 * known.total_bytes if known else 0, ROCM_FLUSH_FLOOR)
        if self.platform == "cuda":
            return max(2 * self.llc_bytes, CUDA_FLUSH_FLOOR)
        return 2 * self.llc_bytes


def open_device(choice: str = "auto") -> Device:
    """Resolve ``auto`` / ``cpu`` / ``cuda`` / ``cuda:N`` and capture sync + timer references."""
    import torch

    choice = (choice or "auto").strip().lower()
    if choice == EMULATED:  # CPU tensors; the arms run gfx950 code on the emulator
        return Device(
            torch_device=torch.device("cpu"),
            platform=EMULATED,
            name=f"gfx950 emulator on CPU ({cpu_name()})",
            llc_bytes=_cpu_llc_bytes(),
            properties={"threads": torch.get_num_threads(), "emulated_arch": "gfx950"},
        )
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    if choice in ("rocm", "hip"):
        choice = "cuda"
    if choice == "cpu":
        return Device(
            torch_device=torch.device("cpu"),
            platform="cpu",
            name=cpu_name(),
            llc_bytes=_cpu_llc_bytes(),
            properties={"threads": torch.get_num_threads()},
        )
    if not choice.startswith("cuda"):
        raise ValueError(f"device {choice!r}: expected auto, cpu, cuda, cuda:N or {EMULATED}")
    if not torch.cuda.is_available():
        raise RuntimeError(f"device {choice!r} requested but torch.cuda is not available (torch {torch.__version__})")
    dev = torch.device(choice)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    torch.cuda.set_device(index)
    dev = torch.device("cuda", index)
    props = torch.cuda.get_device_properties(index)
    platform: Platform = "rocm" if getattr(torch.version, "hip", None) else "cuda"
    properties: dict[str, Any] = {
        "index": index,
        "total_memory": int(props.total_memory),
        "multi_processor_count": int(props.multi_processor_count),
        "L2_cache_size": int(getattr(props, "L2_cache_size", 0)),
        "capability": f"{props.major}.{props.minor}",
    }
    if platform == "rocm":
        properties["gcnArchName"] = getattr(props, "gcnArchName", "")
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        properties["uuid"] = str(uuid)
    try:  # best effort: needs pynvml / amdsmi
        properties["clock_rate_mhz"] = int(torch.cuda.clock_rate(index))
    except Exception:
        pass
    raw_sync = torch._C._cuda_synchronize  # device-wide: waits for every stream

    def sync() -> None:
        raw_sync()

    torch.cuda.init()
    return Device(
        torch_device=dev,
        platform=platform,
        name=props.name,
        llc_bytes=int(getattr(props, "L2_cache_size", 0)) or 64 * MIB,
        properties=properties,
        sync=sync,
        event_cls=torch.cuda.Event,
        # unbound methods captured now: patching the Event class later changes nothing here
        event_record=torch.cuda.Event.record,
        event_elapsed_ms=torch.cuda.Event.elapsed_time,
    )


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "cpu"


def _cpu_llc_bytes() -> int:
    best = 0
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for index in base.glob("index*"):
            size = (index / "size").read_text().strip().upper()
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
            value = int(size.rstrip("KMG")) * mult
            best = max(best, value)
    except (OSError, ValueError):
        pass
    return best or CPU_LLC_FALLBACK


class Flusher:
    """Writes a buffer larger than twice the last-level cache before every timed call."""

    def __init__(self, device: Device, nbytes: int | None = None) -> None:
        import torch

        self.nbytes = int(nbytes if nbytes is not None else device.default_flush_bytes())
        self.required_bytes = device.default_flush_bytes()
        self._buf = torch.empty(max(1, self.nbytes // 4), dtype=torch.int32, device=device.torch_device)
        self._value = 0

    def flush(self) -> None:
        # a different value each time so no layer can elide the write
        self._value = (self._value + 1) & 0x7FFF
        self._buf.fill_(self._value)


class CallTimer:
    """Times single calls: device events on GPU (end recorded after a device-wide
    synchronise, so work on any stream counts); on CPU the process's CPU time (or
    ``perf_counter_ns`` with ``cpu_timer="perf_counter"``). Every call also records host
    wall time (``perf_counter_ns``) for the cross-check."""

    def __init__(self, device: Device, capacity: int) -> None:
        self.device = device
        self._ns = device.perf_counter_ns
        self._host: list[int] = []
        self._pairs: list[tuple[Any, Any]] = []
        self._cpu: list[int] = []
        if device.is_gpu:
            cls = device.event_cls
            self._pool = [(cls(enable_timing=True), cls(enable_timing=True)) for _ in range(capacity)]
        else:
            self._pool = []

    def time_call(self, launch: Callable[[], None]) -> None:
        ns = self._ns
        if self.device.is_gpu:
            start, end = self._pool[len(self._pairs)]
            record = self.device.event_record
            h0 = ns()
            record(start)
            launch()
            self.device.sync()
            h1 = ns()
            record(end)
            self._pairs.append((start, end))
            self._host.append(h1 - h0)
        else:
            cpu = _process_time_ns if self.device.cpu_timer == "process_time" else ns
            c0, h0 = cpu(), ns()
            launch()
            h1, c1 = ns(), cpu()
            self._cpu.append(c1 - c0)
            self._host.append(h1 - h0)

    def results_ms(self) -> tuple[list[float], list[float]]:
        """(device-or-cpu times, host wall times) in ms for the calls timed so far."""
        if self.device.is_gpu:
            self.device.sync()
            elapsed = self.device.event_elapsed_ms
            dev = [float(elapsed(s, e)) for s, e in self._pairs]
        else:
            dev = [v / 1e6 for v in self._cpu]
        return dev, [v / 1e6 for v in self._host]


def measure_copy_bandwidth(device: Device, nbytes: int | None = None, repeats: int = 5) -> float:
    """Device-to-device copy bandwidth in bytes/s (bytes read + written), best of ``repeats``."""
    import torch

    if nbytes is None:
        nbytes = 1 << 30 if device.is_gpu else 64 * MIB
    n = max(1, nbytes // 8)
    src = torch.empty(n, dtype=torch.float64, device=device.torch_device).fill_(1.0)
    dst = torch.empty_like(src)
    timer = CallTimer(device, repeats + 1)
    dst.copy_(src)
    device.sync()
    for _ in range(repeats):
        timer.time_call(lambda: dst.copy_(src))
    times, _ = timer.results_ms()
    best = min(times)
    del src, dst
    return 2 * n * 8 / (best / 1e3) if best > 0 else float("inf")


def set_cpu_threads(n: int | None) -> None:
    if n:
        import torch

        torch.set_num_threads(n)
        os.environ.setdefault("OMP_NUM_THREADS", str(n))

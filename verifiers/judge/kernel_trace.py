"""Device kernels of a profiled run, from torch.profiler or a rocprofv3 kernel-trace CSV.

Both files are read by ``trace_readers`` (the project's one reader per format); this module
interprets them for the verifier.

Both sources become a list of ``KernelRecord``: name, start, duration, stream, and which
window launched it (``call`` / ``flush`` / None) with the iteration number.

torch.profiler (CUDA, ROCm): every profiled call runs inside a ``record_function`` range
named ``verifier::call::<i>`` (its flush inside ``verifier::flush::<i>``). A device kernel
is attributed to the range that contains the host API call which launched it (matched by
correlation id), so kernels on side streams count for the call that launched them, and a
kernel launched outside every range (a helper thread, deferred work) is left unattributed.
On CPU the "kernels" are the leaf aten ops (metadata-only ops such as views dropped).

On CPU, a ``record_function`` range that is not one of the verifier's own (the MoE
problem wraps each Triton-interpreter kernel in one named after the kernel) is reported
as one kernel under that name, in place of the aten ops inside it.

rocprofv3 ``--kernel-trace`` CSV (from ``python -m verifiers.arms.rocprof_run`` under
``rocprofv3``): no host ranges. Each iteration starts with the run's own marker kernel
``verifier_cache_flush`` (it also flushes the caches); kernels before the first marker
(input set-up, build-time kernels, warm-up calls, poison fills) belong to no iteration,
and no other fill kernel counts as a marker.

Kernel names are normalised before any pattern sees them: ROCm's code-object symbols carry
a ``.kd`` suffix (Triton, FlyDSL: ``moe2_gemm_bf16.kd``) or `` [clone .kd]`` (C++), which
anchored patterns (``^moe2_gemm_bf16$``) would otherwise miss. ``raw_name`` keeps the
name as the profiler wrote it.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from trace_readers import read_trace
from verifiers.settings import verifier_settings

CALL_PREFIX = "verifier::call::"
FLUSH_PREFIX = "verifier::flush::"
_RANGE = re.compile(r"^verifier::(call|flush)::(\d+)$")

# CPU ops that move no data and compute nothing; they are not "kernels"
CPU_NON_KERNELS = re.compile(
    r"^aten::(empty\w*|as_strided\w*|view\w*|reshape|_reshape_alias|_unsafe_view|unsqueeze\w*|squeeze\w*|"
    r"expand\w*|t|transpose\w*|permute|slice|select|detach\w*|alias|resolve_conj|resolve_neg|lift_fresh\w*|"
    r"result_type|broadcast_tensors|resize_|numpy_T|unflatten|flatten|split\w*|chunk|narrow|unbind|"
    r"contiguous|_has_compatible_shallow_copy_type|is_nonzero|size|stride|dim|_to_copy_noop)$"
)

FLUSH_MARKER = "verifier_cache_flush"
_HSA_SUFFIX = re.compile(r"(?:\s*\[clone \.kd\]|\.kd)$")


def normalise_name(name: str) -> str:
    """The kernel's name without ROCm's code-object suffix (``.kd``, `` [clone .kd]``)."""
    name = name.strip()
    while True:
        stripped = _HSA_SUFFIX.sub("", name)
        if stripped == name:
            return name
        name = stripped


class KernelRecord(BaseModel):
    name: str  # normalised (see ``normalise_name``)
    start_us: float
    dur_us: float
    stream: str | None = None
    window: Literal["call", "flush"] | None = None  # None: launched outside every verifier range
    iteration: int | None = None
    source: str = "torch.profiler"
    raw_name: str | None = None  # as the profiler wrote it, when that differs

    @classmethod
    def named(cls, name: str, **fields: Any) -> "KernelRecord":
        clean = normalise_name(name)
        return cls(name=clean, raw_name=None if clean == name else name, **fields)

    def normalised(self) -> "KernelRecord":
        clean = normalise_name(self.name)
        if clean == self.name:
            return self
        return self.model_copy(update={"name": clean, "raw_name": self.raw_name or self.name})


def _read(trace: Any, format: str, detail: bool = False) -> Any:
    """The one reader of each format (``trace_readers``): a path, JSON/CSV text, or (torch
    traces, as tests build them) the parsed document."""

    limit = verifier_settings().profile_max_bytes  # trace_readers reads no environment: the setting goes in
    if isinstance(trace, (str, Path)) and not (isinstance(trace, str) and trace.lstrip()[:1] in ("{", "[")):
        return read_trace(path=trace, format=format, detail=detail, max_bytes=limit)
    content = trace if isinstance(trace, (str, bytes)) else json.dumps(trace)
    return read_trace(content=content, format=format, detail=detail, max_bytes=limit)


def _window(ranges: tuple[str, ...]) -> tuple[Any, Any]:
    """The innermost verifier range among ``ranges`` (outermost first), as (window, iteration)."""
    for name in reversed(ranges):
        m = _RANGE.match(name)
        if m:
            return m.group(1), int(m.group(2))
    return None, None


def from_chrome_trace(trace: dict[str, Any] | str | Path, cpu: bool = False) -> list[KernelRecord]:
    """Kernel records of a torch.profiler Chrome trace (a path, its text, or the parsed
    document): device kernels attributed to the verifier range around their launch, or on
    CPU (``cpu=True``) the leaf compute ops."""
    read = _read(trace, "torch_trace", detail=True)
    if cpu:
        return _cpu_kernels(read.cpu_events or [])
    device_ranges = []
    for r in read.device_ranges or []:
        m = _RANGE.match(r.name)
        if m:
            device_ranges.append((r.start_ns, r.end_ns, m.group(1), int(m.group(2))))
    records = []
    for d in read.dispatches:  # kernels only (memcpy / memset are not launches a signature names)
        window, iteration = _window(d.launch.ranges) if d.launch is not None else (None, None)
        if window is None:  # no host link: the device-side range around the kernel, if any
            for lo, hi, kind, it in device_ranges:
                if lo <= d.start_ns <= hi:
                    window, iteration = kind, it
                    break
        records.append(KernelRecord.named(
            d.name, start_us=d.start_ns / 1e3, dur_us=d.dur_ns / 1e3,
            stream=None if d.stream is None else str(d.stream), window=window, iteration=iteration))
    records.sort(key=lambda r: r.start_us)
    return records


def _cpu_kernels(events: list[Any]) -> list[KernelRecord]:
    """On CPU the "kernels" are the leaf compute ops: a ``cpu_op`` none of whose descendants
    is a compute op (``aten::mm`` stays one although it calls ``aten::resolve_conj``). A leaf
    inside a ``record_function`` range that is not the verifier's (the MoE problem wraps each
    Triton-interpreter kernel in one named after the kernel) is reported once, as that range."""
    compute = [e.cat == "cpu_op" and not CPU_NON_KERNELS.match(e.name) for e in events]
    has_compute_child = [False] * len(events)
    for i, e in enumerate(events):
        if compute[i]:
            p = e.parent
            while p is not None:
                has_compute_child[p] = True
                p = events[p].parent

    def ranges(i: int | None) -> tuple[str, ...]:
        names = []
        while i is not None:
            if events[i].cat == "user_annotation":
                names.append(events[i].name)
            i = events[i].parent
        return tuple(reversed(names))

    def holder(i: int) -> int | None:
        p = events[i].parent
        while p is not None:
            if events[p].cat == "user_annotation" and not _RANGE.match(events[p].name):
                return p
            p = events[p].parent
        return None

    records, claimed = [], set()
    for i, e in enumerate(events):
        if not compute[i] or has_compute_child[i]:
            continue
        h = holder(i)
        if h is not None:  # reported once, as the named range
            if h not in claimed:
                claimed.add(h)
                window, iteration = _window(ranges(events[h].parent))
                he = events[h]
                records.append(KernelRecord.named(
                    he.name, start_us=he.start_ns / 1e3, dur_us=(he.end_ns - he.start_ns) / 1e3,
                    stream=f"cpu-thread-{he.thread[1]}", window=window, iteration=iteration))
            continue
        window, iteration = _window(ranges(e.parent))
        records.append(KernelRecord.named(
            e.name, start_us=e.start_ns / 1e3, dur_us=(e.end_ns - e.start_ns) / 1e3,
            stream=f"cpu-thread-{e.thread[1]}", window=window, iteration=iteration))
    records.sort(key=lambda r: r.start_us)
    return records


def from_rocprofv3_csv(path: str | Path, marker: str = FLUSH_MARKER) -> list[KernelRecord]:
    """A rocprofv3 ``--kernel-trace`` CSV (``*_kernel_trace.csv``) of a verifier profile run,
    read by ``trace_readers`` (KERNEL_DISPATCH rows only): one iteration per ``marker``
    kernel, set-up before the first marker excluded. Raises ``ValueError``
    (``TraceReadError``) naming the file, line and column of anything unreadable."""
    read = _read(Path(path), "rocprofv3_kernel_trace")
    flush = re.compile(marker)
    records = []
    iteration = -1
    for d in sorted(read.dispatches, key=lambda d: (d.start_ns, d.order)):
        name = normalise_name(d.name)
        window: Literal["call", "flush"] | None
        if flush.search(name):
            iteration += 1
            window = "flush"
        else:
            window = "call" if iteration >= 0 else None  # before the first marker: set-up, not a call
        stream = d.stream if d.stream is not None else d.queue
        records.append(KernelRecord(
            name=name, raw_name=None if name == d.name else d.name, start_us=d.start_ns / 1e3,
            dur_us=d.dur_ns / 1e3, stream=None if stream is None else str(stream), window=window,
            iteration=iteration if iteration >= 0 else None, source="rocprofv3"))
    return records

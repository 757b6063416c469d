"""Device kernels of a profiled run, from torch.profiler or a rocprofv3 kernel-trace CSV.

Both sources become a list of ``KernelRecord``: name, start, duration, stream, and which
window launched it (``call`` / ``flush`` / None) with the iteration number.

torch.profiler (CUDA, ROCm): every profiled call runs inside a ``record_function`` range
named ``verifier::call::<i>`` (its flush inside ``verifier::flush::<i>``). A device kernel
is attributed to the range that contains the host API call which launched it (matched by
correlation id), so kernels on side streams count for the call that launched them, and a
kernel launched outside every range (a helper thread, deferred work) is left unattributed.
On CPU the "kernels" are the leaf aten ops (metadata-only ops such as views dropped).

rocprofv3 ``--kernel-trace`` CSV: no host ranges; kernels matching the segment's flush
pattern split the trace into iterations (each flush starts one).
"""
from __future__ import annotations

import csv
import json
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from verifiers.device import Device, Flusher

CALL_PREFIX = "verifier::call::"
FLUSH_PREFIX = "verifier::flush::"
_RANGE = re.compile(r"^verifier::(call|flush)::(\d+)$")

DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
HOST_LAUNCH_CATEGORIES = {
    "cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver", "privateuse1_runtime", "privateuse1_driver",
}
# CPU ops that move no data and compute nothing; they are not "kernels"
CPU_NON_KERNELS = re.compile(
    r"^aten::(empty\w*|as_strided\w*|view\w*|reshape|_reshape_alias|_unsafe_view|unsqueeze\w*|squeeze\w*|"
    r"expand\w*|t|transpose\w*|permute|slice|select|detach\w*|alias|resolve_conj|resolve_neg|lift_fresh\w*|"
    r"result_type|broadcast_tensors|resize_|numpy_T|unflatten|flatten|split\w*|chunk|narrow|unbind|"
    r"contiguous|_has_compatible_shallow_copy_type|is_nonzero|size|stride|dim|_to_copy_noop)$"
)

ROCPROF_COLUMNS = ("Kernel_Name", "Start_Timestamp", "End_Timestamp")


class KernelRecord(BaseModel):
    name: str
    start_us: float
    dur_us: float
    stream: str | None = None
    window: Literal["call", "flush"] | None = None  # None: launched outside every verifier range
    iteration: int | None = None
    source: str = "torch.profiler"


def from_chrome_trace(trace: dict[str, Any], cpu: bool = False) -> list[KernelRecord]:
    events = [e for e in trace.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"]
    ranges = _ranges(events)
    if cpu:
        return _cpu_kernels(events, ranges)
    launches: dict[Any, tuple[float, Any]] = {}
    host_ops: dict[Any, tuple[float, Any]] = {}  # External id -> the cpu_op that launched
    device_ranges: list[tuple[float, float, str, int]] = []
    for e in events:
        cat = e.get("cat")
        if cat in HOST_LAUNCH_CATEGORIES:
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                launches[corr] = (float(e["ts"]), e.get("tid"))
        elif cat == "cpu_op":
            ext = (e.get("args") or {}).get("External id")
            if ext is not None:
                host_ops.setdefault(ext, (float(e["ts"]), e.get("tid")))
        elif cat == "gpu_user_annotation":
            m = _RANGE.match(str(e.get("name", "")))
            if m:
                device_ranges.append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), m.group(1), int(m.group(2))))
    records = []
    for e in events:
        if e.get("cat") not in DEVICE_CATEGORIES:
            continue
        args = e.get("args") or {}
        window = iteration = None
        host = launches.get(args.get("correlation"))
        if host is None:  # no runtime record: the aten op with the same External id
            host = host_ops.get(args.get("External id"))
        if host is not None:
            window, iteration = _lookup(ranges, host[1], host[0])
        if window is None:
            ts = float(e["ts"])
            for lo, hi, kind, it in device_ranges:
                if lo <= ts <= hi:
                    window, iteration = kind, it
                    break
        records.append(
            KernelRecord(
                name=str(e.get("name", "")), start_us=float(e["ts"]), dur_us=float(e.get("dur", 0.0)),
                stream=None if args.get("stream") is None else str(args.get("stream")),
                window=window, iteration=iteration,
            )
        )
    records.sort(key=lambda r: r.start_us)
    return records


def _ranges(events: list[dict[str, Any]]) -> dict[Any, list[tuple[float, float, str, int]]]:
    by_tid: dict[Any, list[tuple[float, float, str, int]]] = {}
    for e in events:
        if e.get("cat") != "user_annotation":
            continue
        m = _RANGE.match(str(e.get("name", "")))
        if m:
            ts = float(e["ts"])
            by_tid.setdefault(e.get("tid"), []).append((ts, ts + float(e.get("dur", 0.0)), m.group(1), int(m.group(2))))
    return by_tid


def _lookup(ranges: dict[Any, list[tuple[float, float, str, int]]], tid: Any, ts: float) -> tuple[Any, Any]:
    for lo, hi, kind, it in ranges.get(tid, ()):
        if lo <= ts <= hi:
            return kind, it
    return None, None


def _cpu_kernels(events: list[dict[str, Any]], ranges: dict[Any, list[tuple[float, float, str, int]]]) -> list[KernelRecord]:
    ops_by_tid: dict[Any, list[dict[str, Any]]] = {}
    for e in events:
        if e.get("cat") == "cpu_op":
            ops_by_tid.setdefault(e.get("tid"), []).append(e)
    records = []
    for tid, ops in ops_by_tid.items():
        ops.sort(key=lambda e: (float(e["ts"]), -float(e.get("dur", 0.0))))
        # a "kernel" is a compute op none of whose descendants is a compute op
        # (aten::mm stays a kernel although it calls aten::resolve_conj)
        compute = [not CPU_NON_KERNELS.match(str(e.get("name", ""))) for e in ops]
        has_compute_child = [False] * len(ops)
        stack: list[int] = []
        for i, e in enumerate(ops):
            ts = float(e["ts"])
            while stack and float(ops[stack[-1]]["ts"]) + float(ops[stack[-1]].get("dur", 0.0)) < ts:
                stack.pop()
            if compute[i]:
                for j in stack:
                    has_compute_child[j] = True
            stack.append(i)
        for i, e in enumerate(ops):
            name = str(e.get("name", ""))
            if not compute[i] or has_compute_child[i]:
                continue
            window, iteration = _lookup(ranges, tid, float(e["ts"]))
            records.append(
                KernelRecord(
                    name=name, start_us=float(e["ts"]), dur_us=float(e.get("dur", 0.0)),
                    stream=f"cpu-thread-{tid}", window=window, iteration=iteration,
                )
            )
    records.sort(key=lambda r: r.start_us)
    return records


def from_rocprofv3_csv(path: str | Path, flush_pattern: str) -> list[KernelRecord]:
    """Parse a rocprofv3 ``--kernel-trace`` CSV (``*_kernel_trace.csv``)."""
    path = Path(path)
    try:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in ROCPROF_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise ValueError(
                    f"{path}: not a rocprofv3 kernel-trace CSV; missing columns {missing} "
                    f"(found {reader.fieldnames})"
                )
            rows = list(reader)
    except OSError as exc:
        raise ValueError(f"cannot read rocprofv3 trace {path}: {exc}") from exc
    flush = re.compile(flush_pattern)
    rows.sort(key=lambda r: int(r["Start_Timestamp"]))
    records = []
    iteration = -1
    for line, r in enumerate(rows, start=2):
        try:
            start, end = int(r["Start_Timestamp"]), int(r["End_Timestamp"])
        except ValueError:
            raise ValueError(f"{path}: row {line}: timestamps must be integers (ns)") from None
        name = r["Kernel_Name"]
        if flush.search(name):
            iteration += 1
            window: Literal["call", "flush"] | None = "flush"
        else:
            window = "call"
        records.append(
            KernelRecord(
                name=name, start_us=start / 1e3, dur_us=(end - start) / 1e3,
                stream=r.get("Stream_Id") or r.get("Queue_Id"), window=window,
                iteration=max(iteration, 0), source="rocprofv3",
            )
        )
    return records


def profile_launches(
    launches: Sequence[Callable[[], None]], device: Device, flusher: Flusher, calls: int = 3
) -> list[KernelRecord]:
    """Profile ``calls`` flush+launch iterations (rotating over ``launches``) with torch.profiler."""
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU]
    if device.is_gpu:
        activities.append(ProfilerActivity.CUDA)
    device.sync()
    with profile(activities=activities) as prof:
        for i in range(calls):
            with record_function(f"{FLUSH_PREFIX}{i}"):
                flusher.flush()
            with record_function(f"{CALL_PREFIX}{i}"):
                launches[i % len(launches)]()
            device.sync()
    with tempfile.TemporaryDirectory(prefix="verifier-trace-") as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    return from_chrome_trace(trace, cpu=not device.is_gpu)

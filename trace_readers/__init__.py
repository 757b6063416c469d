"""One reader per profiler format, shared by the server and the verifier.

No torch, no pydantic, and no import of ``skill_server`` or ``verifiers`` (both import
this package; ``verifiers/`` never imports ``skill_server``). numpy is imported on first
use by the bulk paths (kernel-trace CSV blocks, aggregation), never at import time.

Reading::

    from trace_readers import read_trace, TraceReadError

    trace = read_trace("run/1234_results.db")         # or content=bytes/str, format=..., max_bytes=...
    trace.format        # rocprofv3_kernel_trace | rocprofv3_kernel_stats | rocprofv3_json | rocpd | torch_trace
    trace.dispatches    # list[KernelDispatch], file order (empty for kernel_stats)
    trace.totals        # list[KernelTotals] (kernel_stats only)
    trace.device_names  # e.g. ["AMD Instinct MI355X (gfx950)"], ["NVIDIA H200"]
    trace.skipped       # rows/events that are not kernel dispatches, by kind (MEMORY_COPY, gpu_memcpy, ...)

``KernelDispatch`` (one per launch): ``name`` (as the profiler wrote it), ``start_ns``,
``end_ns``, ``dur_ns``, ``agent`` / ``queue`` / ``stream`` (rocprofv3 ids; a torch
trace's device pid and stream tid), ``lane`` = (agent, queue, stream),
``correlation_id``, ``dispatch_id``, ``kind`` (always ``KERNEL_DISPATCH``: other rocprofv3
kinds are filtered out and counted in ``skipped``), ``order`` (position in the input),
``resources`` (``Resources``: VGPR/AccVGPR/SGPR, registers per thread, scratch, LDS,
workgroup size where recorded) and, for torch traces, ``launch``
(``LaunchContext``: ``op`` = the launching CPU op as an ``OpCall`` with its recorded
``input_dims`` / ``input_types`` / ``concrete_inputs``, ``scope`` / ``scope_name`` = the
segment scope instance, ``ranges`` = every ``record_function`` name around the launch,
outermost first).

For the verifier (``verifiers/judge/kernel_trace.py`` reads every trace through these readers):
``read_trace(path, format="rocprofv3_kernel_trace")`` gives the KERNEL_DISPATCH rows of a
kernel trace (timestamps in ns; ``stream`` is Stream_Id, ``queue`` Queue_Id); for a
torch trace, ``d.launch.ranges`` holds ``verifier::call::<i>`` / ``verifier::flush::<i>``
when the launch happened inside those ``record_function`` ranges (the host-side
attribution the verifier uses). ``read_trace(..., detail=True)`` also keeps the host events
(``Trace.cpu_events``: ``CpuEvent`` with its enclosing ``parent``) and the device-side
ranges (``Trace.device_ranges``), and accepts a trace with no kernels. What stays
verifier-side is interpretation: the CPU-only mode that treats leaf aten ops as kernels,
the device-range fallback, and the flush-marker iteration split of kernel traces.

Aggregating::

    from trace_readers import aggregate
    profile = aggregate(trace, stages=None)  # stages[i]: optional tag per dispatch (MoE stage)
    profile.kernels     # list[KernelSummary] ranked by total time: name, calls, total/min/max ns,
                        # resources (max), variants (GEMM shape / op / stage groups), launch_ops,
                        # scopes, mates (kernels of the same segment)
    profile.segment_rule, profile.segment_known

``gemm_ops.op_gemm(op_call, stage)`` reads (M, N, K), A's dtype and the operand scale
format from a recorded GEMM op; ``kernel_names.short_name`` / ``demangle`` give readable
kernel names; ``aggregate.ordered_runs`` yields launch sequences (scope instances, or lane
runs between idle gaps).
"""
from trace_readers.aggregate import KernelSummary, Profile, Variant, aggregate, ordered_runs
from trace_readers.errors import TraceReadError
from trace_readers.gemm_ops import OpGemm, op_gemm
from trace_readers.read import FORMAT_ALIASES, FORMATS, format_name, read_trace
from trace_readers.records import (
    CpuEvent, DeviceRange, KernelDispatch, KernelTotals, LaunchContext, OpCall, Resources, Trace,
)
from trace_readers.source import DEFAULT_MAX_BYTES, MAX_BYTES_ENV

__all__ = [
    "CpuEvent",
    "DEFAULT_MAX_BYTES",
    "DeviceRange",
    "FORMATS",
    "FORMAT_ALIASES",
    "MAX_BYTES_ENV",
    "KernelDispatch",
    "KernelSummary",
    "KernelTotals",
    "LaunchContext",
    "OpCall",
    "OpGemm",
    "Profile",
    "Resources",
    "Trace",
    "TraceReadError",
    "Variant",
    "aggregate",
    "format_name",
    "op_gemm",
    "ordered_runs",
    "read_trace",
]

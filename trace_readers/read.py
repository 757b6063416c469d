"""``read_trace``: any supported input in, a ``Trace`` of typed records out."""
from __future__ import annotations

import csv
import gc
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from trace_readers import rocpd, rocprof_csv, rocprof_json, torch_trace
from trace_readers.errors import TraceReadError
from trace_readers.records import Trace
from trace_readers.source import (
    CONVERT_HINT, READ_ERRORS, SizeLimitExceeded, Source, binary_error, open_source, read_error,
)

READERS: dict[str, Callable[[Source], Trace]] = {
    rocprof_csv.KERNEL_TRACE: rocprof_csv.read_kernel_trace,
    rocprof_csv.KERNEL_STATS: rocprof_csv.read_kernel_stats,
    rocprof_json.FORMAT: rocprof_json.read_rocprof_json,
    rocpd.FORMAT: rocpd.read_rocpd,
    torch_trace.FORMAT: torch_trace.read_torch_trace,
}
FORMATS: tuple[str, ...] = tuple(READERS)
FORMAT_ALIASES: dict[str, str] = {
    "kernel_trace": rocprof_csv.KERNEL_TRACE,
    "rocprof_kernel_trace": rocprof_csv.KERNEL_TRACE,
    "rocprof_trace": rocprof_csv.KERNEL_TRACE,
    "kernel_stats": rocprof_csv.KERNEL_STATS,
    "rocprof_kernel_stats": rocprof_csv.KERNEL_STATS,
    "rocprof_stats": rocprof_csv.KERNEL_STATS,
    "stats": rocprof_csv.KERNEL_STATS,
    "rocprof_json": rocprof_json.FORMAT,
    "rocprofv3_results_json": rocprof_json.FORMAT,
    "rocpd_db": rocpd.FORMAT,
    "rocprofv3_db": rocpd.FORMAT,
    "sqlite": rocpd.FORMAT,
    "torch": torch_trace.FORMAT,
    "torch_profiler": torch_trace.FORMAT,
    "chrome_trace": torch_trace.FORMAT,
}
_KIND_OF_FORMAT = {rocprof_csv.KERNEL_TRACE: "csv", rocprof_csv.KERNEL_STATS: "csv", rocprof_json.FORMAT: "json",
                   torch_trace.FORMAT: "json", rocpd.FORMAT: "sqlite"}
_FIRST_KEY = re.compile(r'\s*\{\s*"((?:[^"\\]|\\.){0,200})"')
EXPECTED_INPUTS = ("a rocprofv3 kernel_trace.csv (Kernel_Name, Start_Timestamp, End_Timestamp, ...), "
                   "a kernel_stats.csv (Name, Calls, TotalDurationNs, ...), a rocpd results.db, "
                   "a rocprofv3 results.json or a torch.profiler Chrome-trace JSON; pass format= to force one")

# other rocprofv3 CSV outputs: (columns that identify it, what to pass instead)
_OTHER_ROCPROF_CSV = (
    ({"Counter_Name", "Counter_Value"}, "a counter_collection.csv (no kernel timestamps): rerun rocprofv3 with "
     "--kernel-trace and pass kernel_trace.csv"),
    ({"Domain", "Function"}, "an API trace (hip_api_trace.csv / hsa_api_trace.csv), which has no kernel durations: "
     "pass kernel_trace.csv from the same run (rocprofv3 --kernel-trace)"),
    ({"Direction", "Source_Agent_Id"}, "a memory_copy_trace.csv: pass kernel_trace.csv from the same run"),
    ({"Agent_Type", "Node_Id"}, "agent_info.csv: pass kernel_trace.csv from the same run"),
)


def format_name(format: str | None) -> str | None:
    """The canonical format for a name or alias (None: detect)."""
    if format is None:
        return None
    key = format.strip().lower().replace("-", "_") if isinstance(format, str) else None
    name = FORMAT_ALIASES.get(key, key) if key else None
    if name not in READERS:
        raise TraceReadError(
            f"unknown format {str(format)[:40]!r}", where="format",
            expected=f"one of {', '.join(FORMATS)} (or an alias: {', '.join(sorted(FORMAT_ALIASES))}), "
            "or None to detect it from the content",
        )
    return name


def _sniff_json(source: Source) -> str:
    head = "".join(source.head or [])
    if len(head) < 4096:
        head += source.stream.read(4096)
    source.head = [head]
    first = _FIRST_KEY.match(head)
    return rocprof_json.FORMAT if first and first.group(1) == rocprof_json.TOOL_KEY else torch_trace.FORMAT


def _detect(source: Source) -> str:
    if source.kind == "empty":
        raise TraceReadError("empty file", file=source.label, expected=EXPECTED_INPUTS)
    if source.kind == "binary":
        raise binary_error(source)
    if source.kind == "sqlite":
        return rocpd.FORMAT
    if source.kind == "json":
        return _sniff_json(source)
    first = next((line for line in source.head or [] if line.strip()), "")
    try:
        header = [h.strip() for h in next(csv.reader([first]), [])]
    except csv.Error:
        header = []
    if rocprof_csv.looks_like_kernel_trace(header):
        return rocprof_csv.KERNEL_TRACE
    if rocprof_csv.looks_like_kernel_stats(header):
        return rocprof_csv.KERNEL_STATS
    for columns, advice in _OTHER_ROCPROF_CSV:
        if columns.issubset(header):
            raise TraceReadError(f"this is {advice}", file=source.label, line=len(source.head or []),
                                 expected=EXPECTED_INPUTS)
    # the first line is not echoed: the input may be any file the caller can name
    raise TraceReadError(
        f"unrecognised profile; the first line has {len(header)} comma-separated field(s) and none of the "
        f"expected columns", file=source.label, line=len(source.head or []), expected=EXPECTED_INPUTS)


def read_trace(
    path: str | Path | None = None,
    content: str | bytes | None = None,
    format: str | None = None,
    *,
    max_bytes: int | None = None,
    detail: bool = False,
) -> Trace:
    """Read a profile or trace into typed per-dispatch records.

    Give ``path`` (a file; ``.gz`` or not) or ``content`` (its text or bytes; gzip'd bytes
    and SQLite bytes accepted). The format is detected from the content unless ``format``
    names it (``FORMATS`` or an alias). Inputs over ``max_bytes`` (default: 512 MiB, also
    applied to the decompressed size; the application passes its setting) are refused. ``detail`` (torch traces): also keep host events and device-side ranges
    (``Trace.cpu_events`` / ``device_ranges``), and accept a trace with no device kernels.
    Every problem with the input raises ``TraceReadError``."""
    forced = format_name(format)
    source = open_source(path, content, max_bytes)
    with paused_gc():
        return _read(source, forced, detail)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic collector: reading builds millions of small objects and no cycles,
    and every collection would walk them all again (a third of a 1 M-row read)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _read(source: Source, forced: str | None, detail: bool = False) -> Trace:
    try:
        if forced is not None:
            if source.kind == "binary":
                raise binary_error(source)
            if source.kind == "empty":
                raise TraceReadError("empty file", file=source.label, expected=EXPECTED_INPUTS)
            kind = _KIND_OF_FORMAT[forced]
            if kind != source.kind and not (kind == "json" and source.kind == "csv"):
                shown = {"csv": "text that is not JSON", "json": "JSON", "sqlite": "a SQLite database"}[source.kind]
                raise TraceReadError(f"format {forced} was forced but the input is {shown}", file=source.label,
                                     where="format", expected=f"{kind} input for {forced}, or no format to detect it")
        fmt = forced or _detect(source)
        if fmt == torch_trace.FORMAT:
            return torch_trace.read_torch_trace(source, detail=detail)
        return READERS[fmt](source)
    except TraceReadError:
        raise
    except READ_ERRORS + (SizeLimitExceeded,) as exc:
        raise read_error(exc, source.label) from None
    except RecursionError:
        raise TraceReadError("input nested too deeply", file=source.label) from None
    finally:
        source.close()


__all__ = ["CONVERT_HINT", "FORMATS", "FORMAT_ALIASES", "READERS", "format_name", "paused_gc", "read_trace"]

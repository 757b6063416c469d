"""rocprofv3 CSV: ``--kernel-trace`` (``<pid>_kernel_trace.csv``, one row per dispatch) and
``--stats`` (``<pid>_kernel_stats.csv`` / older ``results.stats.csv``, one row per kernel).

Kernel trace columns (ROCm 6.2+)::

    Kind, Agent_Id, Queue_Id, Stream_Id, Thread_Id, Dispatch_Id, Kernel_Id, Kernel_Name,
    Correlation_Id, Start_Timestamp, End_Timestamp, LDS_Block_Size, Scratch_Size,
    VGPR_Count, Accum_VGPR_Count, SGPR_Count, Workgroup_Size_X/Y/Z, Grid_Size_X/Y/Z

Timestamps are ns. Older releases write ``Private_Segment_Size`` / ``Group_Segment_Size``
instead of ``Scratch_Size`` / ``LDS_Block_Size``, ``Arch_VGPR_Count`` for ``VGPR_Count``,
and may lack ``Stream_Id`` and the register columns; ROCm 7 adds columns and may write
agents as ``"Agent 4"``. Only ``Kernel_Name``, ``Start_Timestamp`` and ``End_Timestamp``
are required. Rows whose ``Kind`` is not ``KERNEL_DISPATCH`` (a merged or converted
trace can mix in memory copies) are counted in ``skipped`` and otherwise ignored.

Stats columns: ``Name, Calls, TotalDurationNs, AverageNs, Percentage, MinNs, MaxNs,
StdDev`` (numbers possibly written as floats such as ``2.920e-03``). Only ``Name``,
``Calls`` and ``TotalDurationNs`` are required; shares are recomputed from the totals.
``hip_api_stats.csv`` and ``domain_stats.csv`` share this header; a file whose every name
is a HIP/HSA API call or an upper-case domain is refused rather than ranked as kernels.
"""
from __future__ import annotations

import csv
import re
from collections import Counter

from trace_readers.csv_table import CsvTable
from trace_readers.errors import TraceReadError
from trace_readers.records import KERNEL_DISPATCH, KernelDispatch, KernelTotals, Resources, Trace
from trace_readers.source import READ_ERRORS, SizeLimitExceeded, Source, read_error

KERNEL_TRACE = "rocprofv3_kernel_trace"
KERNEL_STATS = "rocprofv3_kernel_stats"
TRACE_REQUIRED = ("Kernel_Name", "Start_Timestamp", "End_Timestamp")
STATS_REQUIRED = ("Name", "Calls", "TotalDurationNs")

# our field -> rocprofv3 column names, newest first
_RESOURCE_COLUMNS = {
    "vgpr_count": ("VGPR_Count", "Arch_VGPR_Count"),
    "accum_vgpr_count": ("Accum_VGPR_Count",),
    "sgpr_count": ("SGPR_Count",),
    "scratch_bytes": ("Scratch_Size", "Private_Segment_Size"),
    "lds_bytes": ("LDS_Block_Size", "Group_Segment_Size", "LDS_Size"),
}
_WORKGROUP = ("Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z")
_GRID = ("Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z")
_NOT_KERNELS = re.compile(r"^(?:hip|hsa_|__hip|roctx|rccl|nccl)|^[A-Z][A-Z0-9_]*$")


def looks_like_kernel_trace(header: list[str]) -> bool:
    return set(TRACE_REQUIRED).issubset(h.strip() for h in header)


def looks_like_kernel_stats(header: list[str]) -> bool:
    return set(STATS_REQUIRED).issubset(h.strip() for h in header)


def _optional_int(text: str) -> int | None:
    try:
        value = int(text)
    except ValueError:
        return None
    return value


class _ResourceCells:
    """Turns a row's resource cells into an interned ``Resources`` (checked once per distinct set)."""

    def __init__(self, table: CsvTable) -> None:
        self.table = table
        self.fields = [
            (name, col, table.col(col))
            for name, names in _RESOURCE_COLUMNS.items()
            if (col := table.first_present(*names)) is not None
        ]
        self.workgroup = [table.col(c) for c in _WORKGROUP]
        self.grid = [table.col(c) for c in _GRID]
        self.has_workgroup = all(i is not None for i in self.workgroup)
        self.has_grid = all(i is not None for i in self.grid)
        self.indexes = [i for _, _, i in self.fields] + (self.workgroup if self.has_workgroup else []) + (
            self.grid if self.has_grid else [])
        self._seen: dict[tuple, Resources | None] = {}

    def of(self, row: list[str], line: int) -> Resources | None:
        cells = tuple(row[i] for i in self.indexes)
        known = self._seen.get(cells, False)
        if known is not False:
            return known  # type: ignore[return-value]
        t = self.table
        values = {name: t.integer(row[i], col, line, optional=True) for name, col, i in self.fields}
        for key, idx, cols in (("workgroup_size", self.workgroup, _WORKGROUP), ("grid_size", self.grid, _GRID)):
            if (self.has_workgroup if key == "workgroup_size" else self.has_grid):
                dims = [t.integer(row[i], c, line, optional=True) for i, c in zip(idx, cols)]
                if all(v is not None for v in dims):
                    values[key] = tuple(dims)
        res = Resources(**values) if any(v is not None for v in values.values()) else None
        self._seen[cells] = res
        return res


def read_kernel_trace(source: Source) -> Trace:
    """Every KERNEL_DISPATCH row as a ``KernelDispatch``, in file order."""
    table = CsvTable(source, what="a rocprofv3 kernel_trace.csv")
    table.require(TRACE_REQUIRED)
    i_name, i_start, i_end = (table.col(c) for c in TRACE_REQUIRED)
    i_kind = table.col("Kind")
    i_agent, i_queue, i_stream = table.col("Agent_Id"), table.col("Queue_Id"), table.col("Stream_Id")
    i_corr, i_disp = table.col("Correlation_Id"), table.col("Dispatch_Id")
    resources = _ResourceCells(table)
    width = len(table.header)
    reader = table.reader
    label = table.label

    dispatches: list[KernelDispatch] = []
    append = dispatches.append
    skipped: Counter = Counter()
    # Kernel names repeat on every row and can be kilobytes long: keep one copy of each.
    # Lane cells repeat too. Resource cells are parsed once per distinct combination.
    names: dict[str, str] = {}
    lane_values: dict[str, str] = {}
    last_line = reader.line_num
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise TraceReadError(f"malformed CSV ({exc}); the file may be truncated", file=label,
                                 line=last_line + 1) from None
        except READ_ERRORS + (SizeLimitExceeded,) as exc:
            raise read_error(exc, label, line=last_line + 1) from None
        line = last_line + 1
        last_line = reader.line_num
        if len(row) != width:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # blank line
            raise TraceReadError(
                f"row has {len(row)} fields but the header has {width}"
                + ("; the file looks truncated" if len(row) < width else ""),
                file=label, line=line, expected=f"{width} comma-separated fields per row",
            )
        if i_kind is not None:
            kind = row[i_kind]
            if kind != KERNEL_DISPATCH:
                kind = kind.strip()
                if kind != KERNEL_DISPATCH:
                    skipped[kind or "(empty Kind)"] += 1
                    continue
        name = row[i_name]
        interned = names.get(name)
        if interned is None:
            stripped = name.strip()
            if not stripped:
                raise TraceReadError("empty kernel name", file=label, line=line, where="column Kernel_Name",
                                     expected="the dispatched kernel's name")
            interned = names[name] = names.setdefault(stripped, stripped)
        try:
            start = int(row[i_start])
            end = int(row[i_end])
            if start < 0 or end < 0:
                raise ValueError
        except ValueError:
            start = table.integer(row[i_start], "Start_Timestamp", line)
            end = table.integer(row[i_end], "End_Timestamp", line)
        if end < start:
            raise TraceReadError(f"End_Timestamp {end} is before Start_Timestamp {start}", file=label, line=line,
                                 expected="End_Timestamp >= Start_Timestamp (ns)")
        agent = lane_values.setdefault(row[i_agent], row[i_agent]) if i_agent is not None else None
        queue = lane_values.setdefault(row[i_queue], row[i_queue]) if i_queue is not None else None
        stream = lane_values.setdefault(row[i_stream], row[i_stream]) if i_stream is not None else None
        corr = _optional_int(row[i_corr]) if i_corr is not None else None
        disp = _optional_int(row[i_disp]) if i_disp is not None else None
        res = resources.of(row, line) if resources.indexes else None
        append(KernelDispatch(interned, start, end, len(dispatches), agent, queue, stream, corr, disp,
                              KERNEL_DISPATCH, res, None))
    if not dispatches:
        kinds = f" (only {', '.join(f'{n} {k}' for k, n in skipped.items())} rows)" if skipped else ""
        raise TraceReadError(f"no KERNEL_DISPATCH rows{kinds}", file=label,
                             expected="a kernel trace from rocprofv3 --kernel-trace with at least one dispatch")
    return Trace(format=KERNEL_TRACE, source=label, dispatches=dispatches, skipped=dict(skipped))


def read_kernel_stats(source: Source) -> Trace:
    """One ``KernelTotals`` per row of a ``--stats`` kernel summary."""
    table = CsvTable(source, what="a rocprofv3 kernel_stats.csv")
    table.require(STATS_REQUIRED)
    i_name, i_calls, i_total = (table.col(c) for c in STATS_REQUIRED)
    i_min, i_max = table.col("MinNs"), table.col("MaxNs")
    totals: list[KernelTotals] = []
    for line, row in table.rows():
        name = row[i_name].strip()
        if not name:
            raise TraceReadError("empty kernel name", file=table.label, line=line, where="column Name",
                                 expected="a kernel name")
        calls = table.integer(row[i_calls], "Calls", line)
        if calls == 0:
            raise TraceReadError("Calls is 0", file=table.label, line=line, where="column Calls",
                                 expected="at least one call per listed kernel")
        total = table.number(row[i_total], "TotalDurationNs", line)
        lo = table.number(row[i_min], "MinNs", line, optional=True) if i_min is not None else None
        hi = table.number(row[i_max], "MaxNs", line, optional=True) if i_max is not None else None
        totals.append(KernelTotals(name=name, calls=calls, total_ns=round(total),
                                   min_ns=None if lo is None else round(lo), max_ns=None if hi is None else round(hi)))
    if not totals:
        raise TraceReadError("no kernel rows", file=table.label, expected="a kernel_stats.csv with at least one kernel")
    if all(_NOT_KERNELS.search(t.name) for t in totals):
        raise TraceReadError(
            "every name is an API call or a domain (e.g. hipLaunchKernel, KERNEL_DISPATCH): this looks like "
            "hip_api_stats.csv or domain_stats.csv", file=table.label,
            expected="kernel_stats.csv (rocprofv3 --kernel-trace --stats)",
        )
    return Trace(format=KERNEL_STATS, source=table.label, totals=totals)

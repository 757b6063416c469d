"""rocprofv3 ``--kernel-trace`` CSV (``<pid>_kernel_trace.csv``): one row per kernel dispatch.

Columns (ROCm 6.2+)::

    Kind, Agent_Id, Queue_Id, Stream_Id, Thread_Id, Dispatch_Id, Kernel_Id, Kernel_Name,
    Correlation_Id, Start_Timestamp, End_Timestamp, LDS_Block_Size, Scratch_Size,
    VGPR_Count, Accum_VGPR_Count, SGPR_Count, Workgroup_Size_X/Y/Z, Grid_Size_X/Y/Z

Timestamps are ns. Older releases write ``Private_Segment_Size`` / ``Group_Segment_Size``
instead of ``Scratch_Size`` / ``LDS_Block_Size``, ``Arch_VGPR_Count`` for ``VGPR_Count``,
and may lack ``Stream_Id`` and the register columns; those are read when present.
Only ``Kernel_Name``, ``Start_Timestamp`` and ``End_Timestamp`` are required. Rows whose
``Kind`` is not ``KERNEL_DISPATCH`` (a merged or converted trace can mix in memory copies)
are counted in ``skipped`` and otherwise ignored.
"""
from __future__ import annotations

from collections import Counter

from skill_server.profiles.aggregate import SEGMENT_MAX_GAP_NS, SEGMENT_WINDOW, Dispatch, summarize, window_segments
from skill_server.profiles.csv_rows import CsvTable
from skill_server.profiles.errors import ProfileError
from skill_server.profiles.models import ProfileSummary
from skill_server.profiles.reading import OpenedProfile

FORMAT = "rocprofv3_kernel_trace"
REQUIRED = ("Kernel_Name", "Start_Timestamp", "End_Timestamp")
SIGNATURE = frozenset(REQUIRED)
SEGMENT_RULE = (
    f"kernel trace: the kernels within {SEGMENT_WINDOW} dispatches before/after on the same agent/queue/stream "
    f"in start order, stopping at an idle gap over {SEGMENT_MAX_GAP_NS} ns"
)

# our field -> rocprofv3 column names, newest first
_RESOURCE_COLUMNS = {
    "vgpr_count": ("VGPR_Count", "Arch_VGPR_Count"),
    "accum_vgpr_count": ("Accum_VGPR_Count",),
    "sgpr_count": ("SGPR_Count",),
    "scratch_bytes": ("Scratch_Size", "Private_Segment_Size"),
    "lds_bytes": ("LDS_Block_Size", "Group_Segment_Size", "LDS_Size"),
}
_LANE_COLUMNS = ("Agent_Id", "Queue_Id", "Stream_Id")
_WORKGROUP = ("Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z")


def looks_like(header: list[str]) -> bool:
    return SIGNATURE.issubset(h.strip() for h in header)


def parse(opened: OpenedProfile, *, top: int, min_pct: float) -> ProfileSummary:
    table = CsvTable(opened, what="a rocprofv3 kernel_trace.csv")
    table.require(REQUIRED)
    i_name, i_start, i_end = (table.col(c) for c in REQUIRED)
    i_kind = table.col("Kind")
    i_dispatch = table.col("Dispatch_Id")
    lanes = [i for i in (table.col(c) for c in _LANE_COLUMNS) if i is not None]
    # (our field, column name, index) for the resource columns this file has
    resource_cols = [
        (field, col, table.col(col))
        for field, names in _RESOURCE_COLUMNS.items()
        if (col := table.first_present(*names)) is not None
    ]
    workgroup = [table.col(c) for c in _WORKGROUP]
    has_workgroup = all(i is not None for i in workgroup)
    resource_idx = [i for _, _, i in resource_cols] + (workgroup if has_workgroup else [])

    dispatches: list[Dispatch] = []
    skipped: Counter = Counter()
    # Kernel names repeat on every row and can be kilobytes long: keep one copy of each. A
    # kernel's resource cells rarely change, so they are parsed (and passed on to the
    # aggregate, which keeps the maximum) only when they differ from its previous row's.
    names: dict[str, str] = {}
    last_cells: dict[str, tuple] = {}
    for line, row in table.rows():
        if i_kind is not None:
            kind = row[i_kind].strip()
            if kind != "KERNEL_DISPATCH":
                skipped[kind or "(empty Kind)"] += 1
                continue
        name = row[i_name].strip()
        if not name:
            raise ProfileError("empty kernel name", file=table.label, line=line, where="column Kernel_Name",
                               expected="the dispatched kernel's name")
        name = names.setdefault(name, name)
        start = table.integer(row[i_start], "Start_Timestamp", line)
        end = table.integer(row[i_end], "End_Timestamp", line)
        if end < start:
            raise ProfileError(f"End_Timestamp {end} is before Start_Timestamp {start}", file=table.label, line=line,
                               expected="End_Timestamp >= Start_Timestamp (ns)")
        resources = None
        cells = tuple(row[i] for i in resource_idx)
        if last_cells.get(name) != cells:
            last_cells[name] = cells
            resources = {field: table.integer(row[i], col, line, optional=True) for field, col, i in resource_cols}
            if has_workgroup:
                wg = [table.integer(row[i], c, line, optional=True) for i, c in zip(workgroup, _WORKGROUP)]
                if all(v is not None for v in wg):
                    resources["workgroup_size"] = wg
        order = table.integer(row[i_dispatch], "Dispatch_Id", line, optional=True) if i_dispatch is not None else None
        dispatches.append(
            Dispatch(
                name=name,
                dur_ns=end - start,
                start_ns=start,
                order=order if order is not None else len(dispatches),
                lane=tuple(row[i] for i in lanes),
                resources=resources,
            )
        )
    if not dispatches:
        kinds = f" (only {', '.join(f'{n} {k}' for k, n in skipped.items())} rows)" if skipped else ""
        raise ProfileError(f"no KERNEL_DISPATCH rows{kinds}", file=table.label,
                           expected="a kernel trace from rocprofv3 --kernel-trace with at least one dispatch")
    return summarize(
        fmt=FORMAT,
        label=table.label,
        dispatches=dispatches,
        segments=window_segments(dispatches),
        segment_rule=SEGMENT_RULE,
        top=top,
        min_pct=min_pct,
        skipped=dict(skipped),
    )

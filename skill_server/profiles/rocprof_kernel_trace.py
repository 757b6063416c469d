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
    resource_cols = {field: table.first_present(*names) for field, names in _RESOURCE_COLUMNS.items()}
    lane_cols = [c for c in _LANE_COLUMNS if c in table.header]
    has_kind = "Kind" in table.header
    has_dispatch_id = "Dispatch_Id" in table.header
    has_workgroup = all(c in table.header for c in _WORKGROUP)

    dispatches: list[Dispatch] = []
    skipped: Counter = Counter()
    for line, row in table.rows():
        if has_kind:
            kind = row["Kind"].strip()
            if kind != "KERNEL_DISPATCH":
                skipped[kind or "(empty Kind)"] += 1
                continue
        name = row["Kernel_Name"].strip()
        if not name:
            raise ProfileError("empty kernel name", file=table.label, line=line, where="column Kernel_Name",
                               expected="the dispatched kernel's name")
        start = table.integer(row, "Start_Timestamp", line)
        end = table.integer(row, "End_Timestamp", line)
        if end < start:
            raise ProfileError(f"End_Timestamp {end} is before Start_Timestamp {start}", file=table.label, line=line,
                               expected="End_Timestamp >= Start_Timestamp (ns)")
        resources = {
            field: table.integer(row, col, line, optional=True) for field, col in resource_cols.items() if col
        }
        if has_workgroup:
            wg = [table.integer(row, c, line, optional=True) for c in _WORKGROUP]
            if all(v is not None for v in wg):
                resources["workgroup_size"] = wg
        order = table.integer(row, "Dispatch_Id", line, optional=True) if has_dispatch_id else None
        dispatches.append(
            Dispatch(
                name=name,
                dur_ns=end - start,
                start_ns=start,
                order=order if order is not None else len(dispatches),
                lane=tuple(row[c].strip() for c in lane_cols),
                resources=resources or None,
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

"""rocprofv3 ``--stats`` kernel summary (``<pid>_kernel_stats.csv``): one row per kernel.

Columns: ``Name, Calls, TotalDurationNs, AverageNs, Percentage, MinNs, MaxNs, StdDev``
(durations in ns, numbers possibly written as floats such as ``2.920e-03``). Only
``Name``, ``Calls`` and ``TotalDurationNs`` are required; shares are recomputed from the
totals rather than trusted from the rounded ``Percentage`` column. The file has no
ordering, so no segment can be formed (``segment_known`` is False).

``hip_api_stats.csv`` and ``domain_stats.csv`` share this header; a file whose every name
is a HIP/HSA API call or an upper-case domain is refused rather than ranked as kernels.
"""
from __future__ import annotations

import re

from skill_server.profiles.aggregate import KernelTotals, summarize
from skill_server.profiles.csv_rows import CsvTable
from skill_server.profiles.errors import ProfileError
from skill_server.profiles.models import ProfileSummary
from skill_server.profiles.reading import OpenedProfile

FORMAT = "rocprofv3_kernel_stats"
REQUIRED = ("Name", "Calls", "TotalDurationNs")
SIGNATURE = frozenset(REQUIRED)
SEGMENT_RULE = "kernel stats: none (the file has no dispatch order or scope)"
_NOT_KERNELS = re.compile(r"^(?:hip|hsa_|__hip|roctx|rccl|nccl)|^[A-Z][A-Z0-9_]*$")


def looks_like(header: list[str]) -> bool:
    return SIGNATURE.issubset(h.strip() for h in header)


def parse(opened: OpenedProfile, *, top: int, min_pct: float) -> ProfileSummary:
    table = CsvTable(opened, what="a rocprofv3 kernel_stats.csv")
    table.require(REQUIRED)
    i_name, i_calls, i_total = (table.col(c) for c in REQUIRED)
    i_min, i_max = table.col("MinNs"), table.col("MaxNs")
    totals: list[KernelTotals] = []
    for line, row in table.rows():
        name = row[i_name].strip()
        if not name:
            raise ProfileError("empty kernel name", file=table.label, line=line, where="column Name",
                               expected="a kernel name")
        calls = table.integer(row[i_calls], "Calls", line)
        if calls == 0:
            raise ProfileError("Calls is 0", file=table.label, line=line, where="column Calls",
                               expected="at least one call per listed kernel")
        total = table.number(row[i_total], "TotalDurationNs", line)
        lo = table.number(row[i_min], "MinNs", line, optional=True) if i_min is not None else None
        hi = table.number(row[i_max], "MaxNs", line, optional=True) if i_max is not None else None
        totals.append(KernelTotals(
            name=name, calls=calls, total_ns=round(total),
            min_ns=None if lo is None else round(lo), max_ns=None if hi is None else round(hi),
        ))
    if not totals:
        raise ProfileError("no kernel rows", file=table.label, expected="a kernel_stats.csv with at least one kernel")
    if all(_NOT_KERNELS.search(t.name) for t in totals):
        raise ProfileError(
            "every name is an API call or a domain (e.g. hipLaunchKernel, KERNEL_DISPATCH): this looks like "
            "hip_api_stats.csv or domain_stats.csv", file=table.label,
            expected="kernel_stats.csv (rocprofv3 --kernel-trace --stats)",
        )
    return summarize(
        fmt=FORMAT,
        label=table.label,
        totals=totals,
        segments=None,
        segment_rule=SEGMENT_RULE,
        top=top,
        min_pct=min_pct,
    )

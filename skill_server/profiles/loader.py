"""``load_profile``: any supported profile in, ranked hotspots out."""
from __future__ import annotations

import csv
import math
from pathlib import Path

from skill_server.profiles import rocprof_kernel_stats, rocprof_kernel_trace, torch_trace
from skill_server.profiles.errors import ProfileError
from skill_server.profiles.models import PROFILE_FORMATS, ProfileSummary
from skill_server.profiles.reading import READ_ERRORS, OpenedProfile, SizeLimitExceeded, open_profile, read_error

_PARSERS = {
    rocprof_kernel_trace.FORMAT: rocprof_kernel_trace.parse,
    rocprof_kernel_stats.FORMAT: rocprof_kernel_stats.parse,
    torch_trace.FORMAT: torch_trace.parse,
}
FORMAT_ALIASES: dict[str, str] = {
    "kernel_trace": rocprof_kernel_trace.FORMAT,
    "rocprof_kernel_trace": rocprof_kernel_trace.FORMAT,
    "kernel_stats": rocprof_kernel_stats.FORMAT,
    "rocprof_kernel_stats": rocprof_kernel_stats.FORMAT,
    "stats": rocprof_kernel_stats.FORMAT,
    "torch": torch_trace.FORMAT,
    "torch_profiler": torch_trace.FORMAT,
    "chrome_trace": torch_trace.FORMAT,
}


def _format_name(format: str | None) -> str | None:
    if format is None:
        return None
    key = format.strip().lower().replace("-", "_") if isinstance(format, str) else None
    name = FORMAT_ALIASES.get(key, key) if key else None
    if name not in _PARSERS:
        raise ProfileError(
            f"unknown format {format!r}", where="format",
            expected=f"one of {', '.join(PROFILE_FORMATS)} (or an alias: {', '.join(sorted(FORMAT_ALIASES))}), "
            "or None to detect it from the content",
        )
    return name


def _detect(opened: OpenedProfile) -> str:
    if opened.kind == "empty":
        raise ProfileError("empty file", file=opened.label,
                           expected="a rocprofv3 kernel_trace.csv / kernel_stats.csv or a torch.profiler trace JSON")
    if opened.kind == "json":
        return torch_trace.FORMAT
    first = next((line for line in opened.head if line.strip()), "")
    try:
        header = next(csv.reader([first]), [])
    except csv.Error:
        header = []
    if rocprof_kernel_trace.looks_like(header):
        return rocprof_kernel_trace.FORMAT
    if rocprof_kernel_stats.looks_like(header):
        return rocprof_kernel_stats.FORMAT
    shown = first.strip()[:160]
    raise ProfileError(
        f"unrecognised profile; the first line is {shown!r}", file=opened.label, line=len(opened.head),
        expected="a rocprofv3 kernel_trace.csv (Kernel_Name, Start_Timestamp, End_Timestamp, ...), "
        "a kernel_stats.csv (Name, Calls, TotalDurationNs, ...) or a torch.profiler Chrome-trace JSON; "
        "pass format= to force one",
    )


def _check_limits(top: int, min_pct: float) -> None:
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ProfileError(f"top={top!r}", where="top", expected="an integer >= 1")
    if (isinstance(min_pct, bool) or not isinstance(min_pct, (int, float)) or not math.isfinite(min_pct)
            or not 0.0 <= min_pct <= 100.0):
        raise ProfileError(f"min_pct={min_pct!r}", where="min_pct", expected="a percentage between 0 and 100")


def load_profile(
    path: str | Path | None = None,
    content: str | bytes | None = None,
    format: str | None = None,
    top: int = 20,
    min_pct: float = 0.0,
    *,
    max_bytes: int | None = None,
) -> ProfileSummary:
    """Read a profile and rank its kernels by share of GPU time.

    Give ``path`` (a file; ``.gz`` or not) or ``content`` (its text or bytes, gzip'd bytes
    accepted). The format is detected from the content unless ``format`` names it:
    ``rocprofv3_kernel_trace``, ``rocprofv3_kernel_stats`` or ``torch_trace``. Kernels are
    aggregated by full name and ranked by total time; those under ``min_pct`` percent of
    GPU time are dropped, and at most ``top`` are returned. Inputs over ``max_bytes``
    (default: ``$SKILL_SERVER_PROFILE_MAX_BYTES`` or 512 MiB, also applied to the
    decompressed size) are refused. Every problem with the input raises ``ProfileError``.
    """
    _check_limits(top, min_pct)
    forced = _format_name(format)
    opened = open_profile(path, content, max_bytes)
    try:
        fmt = forced or _detect(opened)
        return _PARSERS[fmt](opened, top=top, min_pct=float(min_pct))
    except ProfileError:
        raise
    except READ_ERRORS + (SizeLimitExceeded,) as exc:
        raise read_error(exc, opened.label) from None
    except RecursionError:
        raise ProfileError("input nested too deeply", file=opened.label) from None
    finally:
        opened.close()

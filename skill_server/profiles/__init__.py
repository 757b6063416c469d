"""Profile ingestion: profiler output -> hotspots ranked by share of GPU time.

Formats (one module each): rocprofv3 kernel-trace CSV (``rocprof_kernel_trace``),
rocprofv3 ``--stats`` kernel_stats.csv (``rocprof_kernel_stats``) and torch.profiler
Chrome-trace JSON (``torch_trace``). ``load_profile`` detects the format, parses, and
returns a ``ProfileSummary`` whose ``hotspots[i].hotspot`` is the matcher's input.
Nothing here imports torch.
"""
from skill_server.profiles.errors import ProfileError
from skill_server.profiles.loader import FORMAT_ALIASES, load_profile
from skill_server.profiles.models import (
    PROFILE_FORMATS,
    KernelResources,
    LaunchOp,
    ProfiledHotspot,
    ProfileFormat,
    ProfileSummary,
    ShapeVariant,
)
from skill_server.profiles.reading import DEFAULT_MAX_BYTES, MAX_BYTES_ENV

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FORMAT_ALIASES",
    "MAX_BYTES_ENV",
    "PROFILE_FORMATS",
    "KernelResources",
    "LaunchOp",
    "ProfileError",
    "ProfileFormat",
    "ProfileSummary",
    "ProfiledHotspot",
    "ShapeVariant",
    "load_profile",
]

"""Profile ingestion: profiler output -> hotspots ranked by share of GPU time.

The formats are read by ``trace_readers`` (one reader per format, shared with the
verifier): rocprofv3 kernel-trace CSV, ``--stats`` kernel_stats.csv, rocprofv3 JSON, the
rocpd SQLite database and torch.profiler Chrome-trace JSON. ``load_profile`` reads,
infers each MoE dispatch's stage from its launch sequence, aggregates, and returns a
``ProfileSummary`` whose ``hotspots[i].hotspot`` is the matcher's input. Nothing here
imports torch.
"""
from trace_readers import FORMAT_ALIASES
from trace_readers.source import DEFAULT_MAX_BYTES, MAX_BYTES_ENV

from skill_server.profiles.errors import ProfileError
from skill_server.profiles.loader import device_generation, load_profile
from skill_server.profiles.models import (
    PROFILE_FORMATS,
    KernelResources,
    KernelVariant,
    LaunchOp,
    ProfiledHotspot,
    ProfileFormat,
    ProfileSummary,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FORMAT_ALIASES",
    "MAX_BYTES_ENV",
    "PROFILE_FORMATS",
    "KernelResources",
    "KernelVariant",
    "LaunchOp",
    "ProfileError",
    "ProfileFormat",
    "ProfileSummary",
    "ProfiledHotspot",
    "device_generation",
    "load_profile",
]

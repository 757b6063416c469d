"""The one exception profile ingestion raises: the readers' error, under the server's name."""
from __future__ import annotations

from trace_readers.errors import TraceReadError as ProfileError

__all__ = ["ProfileError"]

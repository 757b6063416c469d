"""Opening a profile: path or in-memory content, gzip, a size limit, and format sniffing.

Text is streamed: CSV rows are parsed as they are read, so a kernel trace never sits in
memory whole. JSON has no streaming parser in the standard library, so a trace is read
whole (up to the limit) and parsed once.
"""
from __future__ import annotations

import csv
import gzip
import io
import itertools
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from skill_server.profiles.errors import ProfileError

DEFAULT_MAX_BYTES = 512 * 1024 * 1024
MAX_BYTES_ENV = "SKILL_SERVER_PROFILE_MAX_BYTES"
CONTENT_LABEL = "<content>"
_GZIP_MAGIC = b"\x1f\x8b"

# Exceptions that reading a (possibly gzip'd) stream can raise part-way through.
READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error, UnicodeDecodeError)


class SizeLimitExceeded(Exception):
    """Raised inside the byte stream; turned into a ProfileError by ``read_error``."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


def resolve_max_bytes(max_bytes: int | None) -> int:
    """The size limit: the argument, else the environment variable, else 512 MiB."""
    if max_bytes is not None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
            raise ProfileError(f"max_bytes={max_bytes!r} is not allowed", where="max_bytes", expected="a positive integer")
        return max_bytes
    raw = os.environ.get(MAX_BYTES_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_MAX_BYTES
    try:
        value = int(raw.strip())
    except ValueError:
        value = -1
    if value <= 0:
        raise ProfileError(f"{MAX_BYTES_ENV}={raw!r} is not allowed", where=MAX_BYTES_ENV, expected="a positive integer byte count")
    return value


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


def too_big(label: str, limit: int, size: int | None = None, *, decompressed: bool = False) -> ProfileError:
    what = "decompressed content" if decompressed else "file"
    seen = f" is {size} bytes ({_mib(size)})" if size is not None else " exceeds the limit"
    return ProfileError(
        f"{what}{seen}, over the profile size limit of {limit} bytes ({_mib(limit)}); raise it with "
        f"load_profile(..., max_bytes=N) or the {MAX_BYTES_ENV} environment variable, "
        "or trim the profile (fewer iterations, a kernel filter)",
        file=label,
    )


def read_error(exc: BaseException, label: str, line: int | None = None) -> ProfileError:
    """A ProfileError for an exception raised while reading the byte/text stream."""
    if isinstance(exc, SizeLimitExceeded):
        return too_big(label, exc.limit, decompressed=True)
    if isinstance(exc, UnicodeDecodeError):
        return ProfileError(
            f"not UTF-8 text (byte {exc.start} of a chunk: {exc.reason})", file=label, line=line,
            expected="a UTF-8 CSV or JSON profile, optionally gzip'd",
        )
    if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
        return ProfileError(f"gzip stream is corrupt or truncated ({exc})", file=label, line=line,
                            expected="a complete .gz file")
    return ProfileError(f"cannot read: {exc}", file=label, line=line)


class _LimitedReader(io.RawIOBase):
    """Counts bytes coming out of ``inner`` and stops past ``limit`` (also bounds gunzip)."""

    def __init__(self, inner: IO[bytes], limit: int) -> None:
        self._inner = inner
        self._limit = limit
        self._seen = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        data = self._inner.read(len(buffer))
        n = len(data)
        self._seen += n
        if self._seen > self._limit:
            raise SizeLimitExceeded(self._limit)
        buffer[:n] = data
        return n

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            super().close()


@dataclass
class OpenedProfile:
    """A text stream positioned at the start, plus what sniffing saw."""

    label: str
    stream: IO[str]
    head: list[str]  # lines already read from ``stream`` while sniffing (non-blank first line last)
    kind: str  # "json", "csv" or "empty"

    def csv_reader(self) -> Any:
        """A ``csv.reader`` over the whole text (its ``line_num`` counts physical lines)."""
        return csv.reader(itertools.chain(self.head, self.stream))

    def read_all(self) -> str:
        return "".join(self.head) + self.stream.read()

    def close(self) -> None:
        self.stream.close()


def _open_binary(path: str | Path | None, content: str | bytes | None, limit: int) -> tuple[str, IO[bytes] | IO[str]]:
    if (path is None) == (content is None):
        raise ProfileError("pass exactly one of path= or content=", where="load_profile arguments",
                           expected="a profile file path, or its content as str/bytes")
    if content is not None:
        if isinstance(content, str):
            if len(content) > limit:  # characters <= bytes, so this never rejects a fitting text wrongly by much
                raise too_big(CONTENT_LABEL, limit, len(content.encode("utf-8")))
            return CONTENT_LABEL, io.StringIO(content, newline="")
        if isinstance(content, (bytes, bytearray, memoryview)):
            data = bytes(content)
            if len(data) > limit:
                raise too_big(CONTENT_LABEL, limit, len(data))
            return CONTENT_LABEL, io.BytesIO(data)
        raise ProfileError(f"content of type {type(content).__name__}", where="content", expected="str or bytes")
    if not isinstance(path, (str, Path)):
        raise ProfileError(f"path of type {type(path).__name__}", where="path", expected="str or pathlib.Path")
    p = Path(path).expanduser()
    label = str(p)
    if p.is_dir():
        found = sorted(
            q.name for q in p.iterdir()
            if q.name.endswith(("kernel_trace.csv", "kernel_stats.csv", ".pt.trace.json", ".pt.trace.json.gz", ".json", ".json.gz"))
        )
        hint = f"; candidates here: {', '.join(found[:8])}" if found else ""
        raise ProfileError(f"is a directory{hint}", file=label,
                           expected="one profile file: kernel_trace.csv, kernel_stats.csv or a torch trace .json[.gz]")
    try:
        size = p.stat().st_size
        if size > limit:
            raise too_big(label, limit, size)
        return label, p.open("rb")
    except ProfileError:
        raise
    except FileNotFoundError:
        raise ProfileError("no such file", file=label) from None
    except OSError as exc:
        raise ProfileError(f"cannot open: {exc.strerror or exc}", file=label) from None


def open_profile(path: str | Path | None, content: str | bytes | None, max_bytes: int | None) -> OpenedProfile:
    """Open the input as text (gunzipping if needed) and sniff JSON vs CSV from its first line."""
    limit = resolve_max_bytes(max_bytes)
    label, raw = _open_binary(path, content, limit)
    head: list[str] = []
    try:
        if isinstance(raw, io.StringIO):
            text: IO[str] = raw
        else:
            magic = raw.read(2)
            raw.seek(0)
            inner: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if magic == _GZIP_MAGIC else raw
            buffered = io.BufferedReader(_LimitedReader(inner, limit), buffer_size=1 << 20)
            text = io.TextIOWrapper(buffered, encoding="utf-8-sig", newline="")
        first = ""
        while True:
            line = text.readline()
            if not line:
                break
            head.append(line)
            if line.strip():
                first = line.lstrip()
                break
    except ProfileError:
        raw.close()
        raise
    except READ_ERRORS + (SizeLimitExceeded,) as exc:
        raw.close()
        raise read_error(exc, label, line=len(head) + 1) from None
    if head and head[0].startswith("\ufeff"):  # a BOM in str content (bytes lose it in decoding)
        head[0] = head[0][1:]
        first = first.lstrip("\ufeff")
    kind = "empty" if not first else ("json" if first[0] in "{[" else "csv")
    return OpenedProfile(label=label, stream=text, head=head, kind=kind)

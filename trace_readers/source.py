"""Opening an input: a path or in-memory content, gzip, a size limit, and what kind it is.

Text is streamed: CSV rows and torch-trace events are parsed as they are read, so a large
trace never sits in memory whole. The first bytes (after gunzip) decide the kind:
``sqlite`` (the rocpd database ROCm 7's rocprofv3 writes by default), ``json``, ``csv``,
``empty``, or ``binary`` for anything that is not UTF-8 text (Perfetto, OTF2, nsys
reports), which is refused with the converter to run.
"""
from __future__ import annotations

import codecs
import csv
import gzip
import io
import itertools
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from trace_readers.errors import TraceReadError

DEFAULT_MAX_BYTES = 512 * 1024 * 1024
# The application's name for the limit, for messages only: this package reads no environment
# (its callers pass the setting in as ``max_bytes``; see skill_server.settings).
MAX_BYTES_ENV = "SKILL_SERVER_PROFILE_MAX_BYTES"
CONTENT_LABEL = "<content>"
_GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
_SNIFF_BYTES = 64 * 1024
PROFILE_SUFFIXES = ("kernel_trace.csv", "kernel_stats.csv", "results.db", ".db", ".pt.trace.json",
                    ".pt.trace.json.gz", "results.json", ".json", ".json.gz")

# Exceptions that reading a (possibly gzip'd) stream can raise part-way through.
READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error, UnicodeDecodeError)

CONVERT_HINT = ("convert it first: `rocpd convert -i <run>_results.db --output-format csv` writes a kernel trace CSV "
                "(or rerun rocprofv3 with --output-format csv)")


class SizeLimitExceeded(Exception):
    """Raised inside the byte stream; turned into a TraceReadError by ``read_error``."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


def resolve_max_bytes(max_bytes: int | None) -> int:
    """The size limit: the argument (the caller's setting), else 512 MiB."""
    if max_bytes is None:
        return DEFAULT_MAX_BYTES
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
        raise TraceReadError(f"max_bytes={max_bytes!r} is not allowed", where="max_bytes",
                             expected="a positive integer")
    return max_bytes


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


def too_big(label: str, limit: int, size: int | None = None, *, decompressed: bool = False) -> TraceReadError:
    what = "decompressed content" if decompressed else "file"
    seen = f" is {size} bytes ({_mib(size)})" if size is not None else " exceeds the limit"
    return TraceReadError(
        f"{what}{seen}, over the profile size limit of {limit} bytes ({_mib(limit)}); raise it with "
        f"load_profile(..., max_bytes=N) or the {MAX_BYTES_ENV} environment variable, "
        "or trim the profile (fewer iterations, a kernel filter)",
        file=label,
    )


def read_error(exc: BaseException, label: str, line: int | None = None) -> TraceReadError:
    """A TraceReadError for an exception raised while reading the byte/text stream."""
    if isinstance(exc, SizeLimitExceeded):
        return too_big(label, exc.limit, decompressed=True)
    if isinstance(exc, UnicodeDecodeError):
        return TraceReadError(
            f"not UTF-8 text (byte {exc.start} of a chunk: {exc.reason})", file=label, line=line,
            expected="a UTF-8 CSV or JSON profile, optionally gzip'd",
        )
    if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
        return TraceReadError(f"gzip stream is corrupt or truncated ({exc})", file=label, line=line,
                              expected="a complete .gz file")
    return TraceReadError(f"cannot read: {exc}", file=label, line=line)


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
class Source:
    """An opened input, positioned at its start, plus what sniffing saw.

    ``kind`` is ``csv``, ``json``, ``empty``, ``binary`` or ``sqlite``. Text kinds carry
    ``stream`` and ``head`` (lines already read while sniffing, the first non-blank one
    last); ``sqlite`` carries ``sqlite_path`` (a plain file) or ``sqlite_bytes``."""

    label: str
    kind: str
    stream: IO[str] | None = None
    head: list[str] | None = None
    sqlite_path: Path | None = None
    sqlite_bytes: bytes | None = None
    magic: bytes = b""

    def lines(self) -> Any:
        """The text's lines from the start (the head first), as one iterator."""
        return itertools.chain(self.head or [], self.stream)

    def csv_reader(self) -> Any:
        """A ``csv.reader`` over the whole text (its ``line_num`` counts physical lines)."""
        return csv.reader(self.lines())

    def text_chunks(self, size: int = 1 << 20):
        """The text from the start, in chunks (the head first)."""
        if self.head:
            yield "".join(self.head)
        while True:
            chunk = self.stream.read(size)
            if not chunk:
                return
            yield chunk

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()


def _open_binary(path: str | Path | None, content: str | bytes | None, limit: int) -> tuple[str, IO[bytes] | IO[str], Path | None]:
    if (path is None) == (content is None):
        raise TraceReadError("pass exactly one of path= or content=", where="load_profile arguments",
                             expected="a profile file path, or its content as str/bytes")
    if content is not None:
        if isinstance(content, str):
            if len(content) > limit:  # characters <= bytes, so this never rejects a fitting text wrongly by much
                raise too_big(CONTENT_LABEL, limit, len(content.encode("utf-8")))
            return CONTENT_LABEL, io.StringIO(content, newline=""), None
        if isinstance(content, (bytes, bytearray, memoryview)):
            data = bytes(content)
            if len(data) > limit:
                raise too_big(CONTENT_LABEL, limit, len(data))
            return CONTENT_LABEL, io.BytesIO(data), None
        raise TraceReadError(f"content of type {type(content).__name__}", where="content", expected="str or bytes")
    if not isinstance(path, (str, Path)):
        raise TraceReadError(f"path of type {type(path).__name__}", where="path", expected="str or pathlib.Path")
    p = Path(path).expanduser()
    label = str(p)
    if p.is_dir():
        found = sorted(q.name for q in p.iterdir() if q.name.endswith(PROFILE_SUFFIXES))
        hint = f"; candidates here: {', '.join(found[:8])}" if found else ""
        raise TraceReadError(f"is a directory{hint}", file=label,
                             expected="one profile file: kernel_trace.csv, kernel_stats.csv, a rocpd .db, "
                             "a rocprofv3 results.json or a torch trace .json[.gz]")
    try:
        size = p.stat().st_size
        if size > limit:
            raise too_big(label, limit, size)
        return label, p.open("rb"), p
    except TraceReadError:
        raise
    except FileNotFoundError:
        raise TraceReadError("no such file", file=label) from None
    except OSError as exc:
        raise TraceReadError(f"cannot open: {exc.strerror or exc}", file=label) from None


def _is_text(prefix: bytes) -> bool:
    """Text when the first line is UTF-8 without NUL bytes (bad bytes further on are a
    read error with a line number, not a format question)."""
    body = prefix.lstrip(b" \t\r\n")
    end = body.find(b"\n")
    first = body if end < 0 else body[:end]
    if b"\x00" in first:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(first, final=end >= 0)
    except UnicodeDecodeError:
        return False
    return True


def open_source(path: str | Path | None, content: str | bytes | None, max_bytes: int | None) -> Source:
    """Open the input (gunzipping if needed) and decide its kind from the first bytes."""
    limit = resolve_max_bytes(max_bytes)
    label, raw, file_path = _open_binary(path, content, limit)
    head: list[str] = []
    try:
        if isinstance(raw, io.StringIO):
            text: IO[str] = raw
        else:
            magic = raw.read(2)
            raw.seek(0)
            gzipped = magic == _GZIP_MAGIC
            inner: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if gzipped else raw
            buffered = io.BufferedReader(_LimitedReader(inner, limit), buffer_size=1 << 20)
            prefix = buffered.peek(_SNIFF_BYTES)[:_SNIFF_BYTES]
            if prefix.startswith(SQLITE_MAGIC):
                if file_path is not None and not gzipped:
                    buffered.close()
                    return Source(label=label, kind="sqlite", sqlite_path=file_path, magic=prefix[:16])
                data = buffered.read()
                buffered.close()
                return Source(label=label, kind="sqlite", sqlite_bytes=data, magic=prefix[:16])
            if prefix and not _is_text(prefix):
                buffered.close()
                return Source(label=label, kind="binary", magic=prefix[:16])
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
    except TraceReadError:
        raw.close()
        raise
    except READ_ERRORS + (SizeLimitExceeded,) as exc:
        raw.close()
        raise read_error(exc, label, line=len(head) + 1) from None
    if head and head[0].startswith("\ufeff"):  # a BOM in str content (bytes lose it in decoding)
        head[0] = head[0][1:]
        first = first.lstrip("\ufeff")
    kind = "empty" if not first else ("json" if first[0] in "{[" else "csv")
    return Source(label=label, kind=kind, stream=text, head=head)


def binary_error(source: Source) -> TraceReadError:
    """The refusal for a binary input, naming what it looks like and the converter."""
    magic = source.magic
    if magic.startswith(b"PK"):
        what = "a zip archive (an nsys report or zipped profiles?)"
    elif magic[:1] == b"\x0a":
        what = "binary data, probably a Perfetto trace (rocprofv3 --output-format pftrace)"
    else:
        what = "binary data, not a UTF-8 CSV or JSON profile (an OTF2 or Perfetto trace?)"
    return TraceReadError(
        f"cannot read {what}; {CONVERT_HINT}, or export a torch.profiler trace with export_chrome_trace",
        file=source.label, expected="a rocprofv3 kernel_trace.csv / kernel_stats.csv / results.json, a rocpd .db, "
        "or a torch.profiler trace JSON (optionally gzip'd)",
    )

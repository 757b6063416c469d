"""Shared CSV plumbing for the rocprofv3 formats: header checks, guarded rows, typed cells."""
from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Sequence

from trace_readers.errors import TraceReadError
from trace_readers.source import READ_ERRORS, SizeLimitExceeded, Source, read_error


class CsvTable:
    """A CSV with a header: rows come as (line number, {column: cell}); every read error,
    short row and bad cell becomes a TraceReadError naming the file and line."""

    def __init__(self, opened: Source, *, what: str) -> None:
        self.label = opened.label
        self.what = what
        self.lines = opened.lines()  # raw lines after the header, for readers with a fast path
        self.reader = csv.reader(self.lines)
        try:
            header = next(self.reader, None)
        except csv.Error as exc:
            raise TraceReadError(f"unreadable CSV header: {exc}", file=self.label, line=1) from None
        except READ_ERRORS + (SizeLimitExceeded,) as exc:
            raise read_error(exc, self.label, line=1) from None
        if not header:
            raise TraceReadError("empty file", file=self.label, expected=what)
        self.header = [h.strip() for h in header]
        self.header_line = self.reader.line_num

    def require(self, columns: Sequence[str]) -> None:
        missing = [c for c in columns if c not in self.header]
        if missing:
            raise TraceReadError(
                # the header's own text is never echoed: the file may be one a client named
                f"missing column(s) {', '.join(missing)}; the header has {len(self.header)} column(s)",
                file=self.label, line=self.header_line, expected=f"{self.what} with columns {', '.join(columns)}",
            )

    def col(self, column: str) -> int | None:
        """The position of ``column`` in the header, or None."""
        try:
            return self.header.index(column)
        except ValueError:
            return None

    def rows(self) -> Iterator[tuple[int, list[str]]]:
        """(line number where the row starts, cells) per data row; blank lines are skipped."""
        width = len(self.header)
        reader = self.reader
        while True:
            line = reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise TraceReadError(f"malformed CSV ({exc}); the file may be truncated", file=self.label,
                                   line=line) from None
            except READ_ERRORS + (SizeLimitExceeded,) as exc:
                raise read_error(exc, self.label, line=line) from None
            if len(row) != width:
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue  # blank line
                raise TraceReadError(
                    f"row has {len(row)} fields but the header has {width}"
                    + ("; the file looks truncated" if len(row) < width else ""),
                    file=self.label, line=line, expected=f"{width} comma-separated fields per row",
                )
            yield line, row

    def integer(self, cell: str, column: str, line: int, *, optional: bool = False) -> int | None:
        """A non-negative integer cell (float text with no fraction is accepted)."""
        try:
            value = int(cell)
            if value >= 0:
                return value
        except ValueError:
            pass
        text = cell.strip()
        if not text:
            if optional:
                return None
            raise TraceReadError("empty cell", file=self.label, line=line, where=f"column {column}",
                               expected="a non-negative integer")
        number = _float(text)
        if number is None or not number.is_integer():
            raise TraceReadError(f"{text[:40]!r} is not an integer", file=self.label, line=line,
                               where=f"column {column}", expected="a non-negative integer")
        if number < 0:
            raise TraceReadError(f"negative value {text[:40]}", file=self.label, line=line, where=f"column {column}",
                               expected="a non-negative integer")
        return int(number)

    def number(self, cell: str, column: str, line: int, *, optional: bool = False) -> float | None:
        """A non-negative finite number cell."""
        text = cell.strip()
        if not text:
            if optional:
                return None
            raise TraceReadError("empty cell", file=self.label, line=line, where=f"column {column}",
                               expected="a non-negative number")
        value = _float(text)
        if value is None or value < 0:
            raise TraceReadError(f"{text[:40]!r} is not a non-negative number", file=self.label, line=line,
                               where=f"column {column}", expected="a non-negative number")
        return value

    def first_present(self, *columns: str) -> str | None:
        return next((c for c in columns if c in self.header), None)


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


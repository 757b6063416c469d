"""Shared CSV plumbing for the rocprofv3 formats: header checks, guarded rows, typed cells."""
from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Sequence

from skill_server.profiles.errors import ProfileError
from skill_server.profiles.reading import READ_ERRORS, OpenedProfile, SizeLimitExceeded, read_error


class CsvTable:
    """A CSV with a header: rows come as (line number, {column: cell}); every read error,
    short row and bad cell becomes a ProfileError naming the file and line."""

    def __init__(self, opened: OpenedProfile, *, what: str) -> None:
        self.label = opened.label
        self.what = what
        self._reader = opened.csv_reader()
        try:
            header = next(self._reader, None)
        except csv.Error as exc:
            raise ProfileError(f"unreadable CSV header: {exc}", file=self.label, line=1) from None
        except READ_ERRORS + (SizeLimitExceeded,) as exc:
            raise read_error(exc, self.label, line=1) from None
        if not header:
            raise ProfileError("empty file", file=self.label, expected=what)
        self.header = [h.strip() for h in header]
        self.header_line = self._reader.line_num

    def require(self, columns: Sequence[str]) -> None:
        missing = [c for c in columns if c not in self.header]
        if missing:
            raise ProfileError(
                f"missing column(s) {', '.join(missing)}; the header has {', '.join(self.header[:30])}",
                file=self.label, line=self.header_line, expected=f"{self.what} with columns {', '.join(columns)}",
            )

    def rows(self) -> Iterator[tuple[int, dict[str, str]]]:
        width = len(self.header)
        while True:
            try:
                row = next(self._reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise ProfileError(f"malformed CSV ({exc}); the file may be truncated", file=self.label,
                                   line=self._reader.line_num) from None
            except READ_ERRORS + (SizeLimitExceeded,) as exc:
                raise read_error(exc, self.label, line=self._reader.line_num) from None
            line = self._reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # blank line
            if len(row) != width:
                raise ProfileError(
                    f"row has {len(row)} fields but the header has {width}"
                    + ("; the file looks truncated" if len(row) < width else ""),
                    file=self.label, line=line, expected=f"{width} comma-separated fields per row",
                )
            yield line, dict(zip(self.header, row))

    def integer(self, row: dict[str, str], column: str, line: int, *, optional: bool = False) -> int | None:
        """A non-negative integer cell (float text with no fraction is accepted)."""
        cell = row.get(column)
        if cell is None or not cell.strip():
            if optional:
                return None
            raise ProfileError("empty cell", file=self.label, line=line, where=f"column {column}",
                               expected="a non-negative integer")
        text = cell.strip()
        try:
            value = int(text)
        except ValueError:
            number = _float(text)
            if number is None or not number.is_integer():
                raise ProfileError(f"{text[:40]!r} is not an integer", file=self.label, line=line,
                                   where=f"column {column}", expected="a non-negative integer") from None
            value = int(number)
        if value < 0:
            raise ProfileError(f"negative value {value}", file=self.label, line=line, where=f"column {column}",
                               expected="a non-negative integer")
        return value

    def number(self, row: dict[str, str], column: str, line: int, *, optional: bool = False) -> float | None:
        """A non-negative finite number cell."""
        cell = row.get(column)
        if cell is None or not cell.strip():
            if optional:
                return None
            raise ProfileError("empty cell", file=self.label, line=line, where=f"column {column}",
                               expected="a non-negative number")
        value = _float(cell.strip())
        if value is None or value < 0:
            raise ProfileError(f"{cell.strip()[:40]!r} is not a non-negative number", file=self.label, line=line,
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


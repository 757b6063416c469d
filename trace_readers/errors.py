"""The one exception the readers raise for anything wrong with their input."""
from __future__ import annotations

from typing import Any


class TraceReadError(ValueError):
    """A profile or trace that cannot be read, parsed or trusted.

    Carries where the problem is (``file``, ``line`` for text formats, ``where`` for a
    column, JSON path or argument) and what was ``expected``, so a caller can show one
    actionable sentence instead of a traceback.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        where: str | None = None,
        expected: str | None = None,
    ) -> None:
        self.reason = message
        self.file = file
        self.line = line
        self.where = where
        self.expected = expected
        super().__init__(self._render())

    def _render(self) -> str:
        place = ""
        if self.file:
            place = self.file if self.line is None else f"{self.file}:{self.line}"
        elif self.line is not None:
            place = f"line {self.line}"
        text = f"{place}: {self.reason}" if place else self.reason
        if self.where:
            text += f" (at {self.where})"
        if self.expected:
            text += f"; expected {self.expected}"
        return text

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form for service and CLI error payloads."""
        return {
            "error": "profile_error",
            "message": str(self),
            "reason": self.reason,
            "file": self.file,
            "line": self.line,
            "where": self.where,
            "expected": self.expected,
        }

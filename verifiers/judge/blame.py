"""Whose fault a failed step is: the candidate's (FAIL) or a trusted arm's, the problem's or the
harness's (ERROR). Every stage raises it; it imports nothing of the judge so that any stage can."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from verifiers.judge.session import Arm


class Blame(Exception):
    """Something went wrong that is someone's fault: the candidate (FAIL), or a trusted
    arm, the problem or the harness (ERROR)."""

    def __init__(self, reason: str, arm: Arm | None = None, candidate: bool | None = None) -> None:
        super().__init__(reason)
        self.reason, self.arm = reason, arm
        self.candidate = candidate if candidate is not None else (arm is not None and not arm.trusted)

    @property
    def status(self) -> str:
        return "FAIL" if self.candidate else "ERROR"

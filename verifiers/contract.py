"""The candidate contract and the two kinds of fault it distinguishes.

``build(inputs, outputs) -> launch``: ``build`` gets the problem's input tensors and
preallocated outputs (memory the judge owns and shares with the arm's process), does all
compilation once, and returns a zero-argument ``launch`` that writes every element of
every output in place on the current stream, reading its inputs at call time and
modifying none of them. The judge enforces all of it from its own process: it reads the
outputs and inputs back from the shared memory, so replacing a dict entry, a tensor's
class or the arm's own checks changes nothing it reads.
"""
from __future__ import annotations

from collections.abc import Callable

Builder = Callable[[dict, dict], Callable[[], None]]


class CandidateError(Exception):
    """The arm raised or returned something outside the contract (not a harness bug)."""


class ProblemError(Exception):
    """The problem (inputs, outputs, oracle, baseline arm), not the candidate, is at fault."""

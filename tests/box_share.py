"""Sharing the box between pytest-xdist workers (``make test`` runs two).

A test marked ``alone`` runs while no test of another worker runs: it measures time or the
box's load, or plants a file in the checkout that another worker's processes would import.
Every other test holds a shared lock on a file of this test run for its setup, call and
teardown; an ``alone`` test holds it exclusively. A turnstile lock, taken by every test
before the box lock and held by an ``alone`` test until it ends, lets a waiting ``alone``
test go before any test that starts later (else two workers passing a shared lock back and
forth could keep it waiting).
"""
from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def holding(folder: Path, alone: bool) -> Iterator[None]:
    with open(folder / "turnstile.lock", "a") as gate, open(folder / "box.lock", "a") as box:
        fcntl.flock(gate, fcntl.LOCK_EX)
        if alone:
            fcntl.flock(box, fcntl.LOCK_EX)  # waits for the test another worker is running
        else:
            fcntl.flock(gate, fcntl.LOCK_UN)
            fcntl.flock(box, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(box, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)

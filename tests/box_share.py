"""Sharing the box between pytest-xdist workers (``make test`` runs two).

A test marked ``alone`` runs while no test of another worker runs: it measures time or the
box's load, or plants a file in the checkout that another worker's processes would import.
Every other test holds a shared lock on a file of this test run for its setup, call and
teardown; an ``alone`` test holds it exclusively. A turnstile lock, taken by every test
before the box lock and held by an ``alone`` test until it ends, lets a waiting ``alone``
test go before any test that starts later (else two workers passing a shared lock back and
forth could keep it waiting). The ``alone`` tests run on one worker, one after the other
(tests/conftest.py), and keep the box from one to the next: the other worker waits once.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO


class BoxShare:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._held: tuple[IO, IO] | None = None
        self._alone = False

    @contextlib.contextmanager
    def test(self, alone: bool, next_alone: bool) -> Iterator[None]:
        """Hold the box for one test (``next_alone``: this worker's next test is ``alone`` too)."""
        if not (alone and self._alone and self._held):
            self._acquire(alone)
        try:
            yield
        finally:
            if not (alone and next_alone):
                self._release()

    def _acquire(self, alone: bool) -> None:
        gate, box = open(self.folder / "turnstile.lock", "a"), open(self.folder / "box.lock", "a")
        fcntl.flock(gate, fcntl.LOCK_EX)
        if alone:
            fcntl.flock(box, fcntl.LOCK_EX)  # waits for the test another worker is running
        else:
            fcntl.flock(gate, fcntl.LOCK_UN)
            fcntl.flock(box, fcntl.LOCK_SH)
        self._held, self._alone = (gate, box), alone

    def _release(self) -> None:
        if self._held is not None:
            for f in reversed(self._held):  # the box, then the turnstile
                fcntl.flock(f, fcntl.LOCK_UN)
                f.close()
        self._held, self._alone = None, False


# ---------------------------------------------------------------- which tests run together
GROUPS = "groups.json"


def write_groups(folder: Path, groups: dict[str, str]) -> None:
    """Each worker writes the same map (node id -> group) after collecting, before the controller schedules."""
    tmp = folder / f"{GROUPS}.{os.getpid()}"
    tmp.write_text(json.dumps(groups))
    os.replace(tmp, folder / GROUPS)


def grouped_scheduler(config, log, folder: Path):  # noqa: ANN001, ANN201 - xdist's types
    """xdist's load-by-scope scheduler whose scope of a test is its group (else the test itself):
    a group goes to one worker as one unit of work."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupedScheduling(LoadScopeScheduling):
        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:  # read once the workers have collected (scheduling starts then)
                self._groups = json.loads((folder / GROUPS).read_text())
            group = self._groups.get(nodeid)
            return f"group:{group}" if group else nodeid

    return GroupedScheduling(config, log)

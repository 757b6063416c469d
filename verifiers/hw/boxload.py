"""How busy the box was with work that is not the verifier's, while the arms were timed.

A loaded box is not a cheating candidate: two busy processes on a two-core machine stretch
every process's calls, the clocks' disagreement and the baseline's drift, for every arm, by
amounts no rule can tell from a small cheat. The judge measures the load itself -- the
CPU time the whole box spent (``/proc/stat``) minus what the verifier's own processes spent
(the judge's tree and its parent, reaped children included) -- and names the busiest
processes outside it. A timing check that fails by an amount load can explain then gives
INCONCLUSIVE naming the box instead of FAIL (``verifiers.judge.timing``). What the candidate
does cannot raise this figure: every process it starts is in the judge's tree (and fails the
run on its own), and its own threads count as the verifier's.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

#: foreign CPU use (in cores, averaged over the timed window) above which the box counts as loaded
LOADED_CORES = 0.5


class BoxLoadReading(BaseModel):
    seconds: float
    cores: int
    foreign_cores: float  # CPU time of processes outside the verifier / wall time
    loaded: bool
    busiest: list[str] = []  # "pid N (comm): X cores"

    def describe(self) -> str:
        who = f" ({'; '.join(self.busiest[:3])})" if self.busiest else ""
        return (f"the box was loaded by other processes: {self.foreign_cores:.2f} of {self.cores} cores busy outside "
                f"the verifier over {self.seconds:.1f} s{who}")


def _ticks(fields: list[str]) -> tuple[int, int, int]:
    """(own utime + stime, reaped children's, ppid) from the fields after ``comm``."""
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14]), int(fields[1])


def _scan() -> dict[int, tuple[int, int, int, str]]:
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        lo, hi = raw.find("("), raw.rfind(")")
        try:
            own, reaped, ppid = _ticks(raw[hi + 2:].split())
        except (IndexError, ValueError):
            continue
        out[int(entry)] = (own, reaped, ppid, raw[lo + 1:hi])
    return out


def _busy_ticks() -> int | None:
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if first[0] != "cpu":
        return None
    v = [int(x) for x in first[1:9]]  # user nice system idle iowait irq softirq steal
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7]


def _tree(table: dict[int, tuple[int, int, int, str]], roots: set[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (_, _, ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    seen, stack = set(), [r for r in roots if r in table]
    while stack:
        pid = stack.pop()
        if pid not in seen:
            seen.add(pid)
            stack.extend(children.get(pid, ()))
    return seen


@dataclass
class BoxLoad:
    """``start()`` then ``report()``: foreign CPU use between the two (Linux; elsewhere None)."""

    roots: set[int] = field(default_factory=lambda: {os.getpid(), os.getppid()})
    _t0: float = 0.0
    _busy0: int | None = None
    _table0: dict[int, tuple[int, int, int, str]] = field(default_factory=dict)

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._busy0 = _busy_ticks()
        self._table0 = _scan()

    def reading(self) -> BoxLoadReading | None:
        busy1, table1 = _busy_ticks(), _scan()
        seconds = time.monotonic() - self._t0
        if self._busy0 is None or busy1 is None or seconds <= 0:
            return None
        hz = os.sysconf("SC_CLK_TCK")
        ours = _tree(table1, self.roots)
        ours0 = _tree(self._table0, self.roots) | ours

        def spent(table: dict[int, tuple[int, int, int, str]], pids: set[int]) -> int:
            return sum(table[p][0] + table[p][1] for p in pids if p in table)

        # a process of ours that was reaped in the window moved its time into its parent's
        # ``reaped`` field, which is in ``spent`` at the end; one new in the window started at 0
        ours_ticks = spent(table1, ours) - spent(self._table0, ours0 & set(self._table0))
        foreign = max(0.0, (busy1 - self._busy0) - max(ours_ticks, 0)) / hz / seconds
        deltas = []
        for pid, (own, _, _, comm) in table1.items():
            if pid in ours or pid not in self._table0:
                continue
            d = (own - self._table0[pid][0]) / hz / seconds
            if d >= 0.05:
                deltas.append((d, f"pid {pid} ({comm}): {d:.2f} cores"))
        deltas.sort(reverse=True)
        cores = os.cpu_count() or 1
        return BoxLoadReading(seconds=round(seconds, 2), cores=cores, foreign_cores=round(foreign, 3),
                             loaded=foreign >= LOADED_CORES, busiest=[text for _, text in deltas[:5]])

"""What answers show about a card's claims, kept in memory for the match path.

One snapshot of the ledger per change: the latest *verified* re-verification status per
(card, platform) and the newest figure per (card, shape, platform, level), each with its
evidence level checked. ``get()`` stats the ledger at most every ``check_interval``
seconds and reloads when another process committed; writes through this process call
``invalidate()`` and are visible at once. A ledger that cannot be read must not take the
match path down: it shows as empty.
"""
from __future__ import annotations

import sqlite3
import time
from collections.abc import Hashable
from dataclasses import dataclass, field

from skill_server.reverify.claims import Figure, PlatformStatus
from skill_server.ledger.results import Ledger
from skill_server.ledger.models import LedgerError, StoredResult


@dataclass(frozen=True)
class LedgerSnapshot:
    statuses: dict[str, list[PlatformStatus]] = field(default_factory=dict)
    figures: dict[str, list[Figure]] = field(default_factory=dict)


def figure_of(r: StoredResult) -> Figure:
    return Figure(level=r.evidence.level, speedup=r.speedup, interval=r.interval, verdict=r.verdict,
                  shape=r.shape_text, scope=r.scope, platform=r.platform.key,
                  date=r.recorded_at.date().isoformat(), source=f"ledger #{r.id}")


class ClaimsCache:
    def __init__(self, ledger: Ledger, check_interval: float = 1.0):
        self.ledger = ledger
        self.check_interval = check_interval
        self._value: LedgerSnapshot | None = None
        self._token: Hashable | None = None
        self._checked_at = 0.0

    def invalidate(self) -> None:
        self._value = None

    def get(self) -> LedgerSnapshot:
        now = time.monotonic()
        value = self._value
        if value is not None and now - self._checked_at < self.check_interval:
            return value
        token = self.ledger.change_token()
        self._checked_at = now
        if value is not None and token == self._token:
            return value
        value = self._load()
        self._value, self._token = value, token
        return value

    def _load(self) -> LedgerSnapshot:
        try:
            statuses = self.ledger.latest_statuses()
            results = self.ledger.latest_results()
        except (sqlite3.Error, LedgerError, OSError, ValueError):
            return LedgerSnapshot()
        figures: dict[str, list[Figure]] = {}
        for r in results:
            figures.setdefault(r.card_id, []).append(figure_of(r))
        return LedgerSnapshot(statuses=statuses, figures=figures)

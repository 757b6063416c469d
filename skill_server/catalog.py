"""The loaded set of cards: one immutable snapshot per load.

A bad card never takes the catalog down: it is left out and its problems are kept
(``Catalog.problems``) for lint and for the server's health output. Reloading builds a
new snapshot and swaps it in one assignment, so requests in flight keep the snapshot
they started with and none is dropped.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .cards import CardParseError, CardProblem, ParsedCard, parse_card_file
from .matching import CardIndex

CARD_FILE = "SKILL.md"


def fingerprint(skills_dir: Path) -> tuple[tuple[str, int, int], ...]:
    """What changes when any card or artifact changes (path, mtime, size)."""
    entries = []
    try:
        for path in skills_dir.glob("*/*"):
            if path.suffix in {".md", ".yaml", ".yml"}:
                st = path.stat()
                entries.append((str(path), st.st_mtime_ns, st.st_size))
    except OSError:
        pass
    return tuple(sorted(entries))


@dataclass(frozen=True)
class Catalog:
    skills_dir: Path
    cards: dict[str, ParsedCard]
    problems: list[CardProblem]
    index: CardIndex
    loaded_at: float
    fingerprint: tuple[tuple[str, int, int], ...] = field(repr=False)

    @classmethod
    def load(cls, skills_dir: Path) -> "Catalog":
        skills_dir = Path(skills_dir)
        fp = fingerprint(skills_dir)
        cards: dict[str, ParsedCard] = {}
        problems: list[CardProblem] = []
        if not skills_dir.is_dir():
            problems.append(CardProblem(file=str(skills_dir), message="skills folder does not exist"))
        for card_file in sorted(skills_dir.glob(f"*/{CARD_FILE}")):
            try:
                parsed = parse_card_file(card_file)
            except CardParseError as exc:
                problems += exc.problems
                continue
            cid = parsed.card.id
            if cid in cards:
                problems.append(CardProblem(
                    file=str(card_file), line=parsed.line_of("id"), field="id",
                    message=f"duplicate card id {cid!r}, also in {cards[cid].path}; the first one is kept"))
                continue
            cards[cid] = parsed
        index = CardIndex(p.card for p in cards.values())
        return cls(skills_dir, cards, problems, index, time.time(), fp)

    def get(self, card_id: str) -> ParsedCard:
        try:
            return self.cards[card_id]
        except KeyError:
            known = ", ".join(sorted(self.cards)) or "none"
            raise KeyError(f"unknown card {card_id!r}; known cards: {known}") from None


class CatalogHolder:
    """Holds the current snapshot; reloads when files changed (checked at most every
    ``check_interval`` seconds) or on request."""

    def __init__(self, skills_dir: Path, check_interval: float = 1.0):
        self.skills_dir = Path(skills_dir)
        self.check_interval = check_interval
        self._lock = threading.Lock()
        self._catalog = Catalog.load(self.skills_dir)
        self._checked_at = time.monotonic()

    def current(self) -> Catalog:
        now = time.monotonic()
        if now - self._checked_at >= self.check_interval:
            self._checked_at = now
            if fingerprint(self.skills_dir) != self._catalog.fingerprint:
                self.reload()
        return self._catalog

    def reload(self) -> Catalog:
        with self._lock:
            self._catalog = Catalog.load(self.skills_dir)  # one assignment: readers see old or new
            self._checked_at = time.monotonic()
            return self._catalog

"""The loaded set of cards: one immutable snapshot per load.

A bad card never takes the catalog down: it is left out and its problems are kept
(``Catalog.problems``) for lint and for the server's health output. Reloading builds a
new snapshot and swaps it in one assignment, so requests in flight keep the snapshot
they started with and none is dropped.
"""
from __future__ import annotations

import gc
import hashlib
import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from skill_server import cache_dir
from skill_server.cards import schema
from skill_server.cards.schema import Card, CardParseError, CardProblem, ParsedCard, parse_card_file
from skill_server.matching import regex_literals
from skill_server.matching.matcher import CardIndex

CARD_FILE = "SKILL.md"


def fingerprint(skills_dir: Path) -> tuple[tuple[str, int, int], ...]:
    """What changes when any card or artifact changes (path, mtime, size).

    Only what lies inside the skills folder counts: a card folder that is a symlink to
    somewhere else, and a file that is a symlink out of its card folder, are neither
    listed nor loaded (so never served). os.scandir, not Path.glob: at 10,000 cards the
    pathlib objects cost more than the I/O; symlinks (rare) alone pay for realpath."""
    entries = []
    real_root = os.path.realpath(skills_dir)
    try:
        with os.scandir(skills_dir) as folders:
            for folder in folders:
                if not folder.is_dir():
                    continue
                real_folder = os.path.join(real_root, folder.name)
                if folder.is_symlink():
                    real_folder = os.path.realpath(folder.path)
                    if os.path.dirname(real_folder) != real_root:
                        continue
                try:
                    with os.scandir(folder.path) as files:
                        for f in files:
                            if f.name.endswith((".md", ".yaml", ".yml")) and f.is_file():
                                if f.is_symlink() and os.path.dirname(os.path.realpath(f.path)) != real_folder:
                                    continue
                                st = f.stat()
                                entries.append((f.path, st.st_mtime_ns, st.st_size))
                except OSError:
                    continue
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
    def load(cls, skills_dir: Path, use_cache: bool = True) -> "Catalog":
        # Bulk-building tens of thousands of small objects triggers repeated full garbage
        # collections; none of them can free anything here, so pause the collector.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            catalog = cls._load(Path(skills_dir), use_cache)
        finally:
            if was_enabled:
                gc.enable()
        if was_enabled:
            # long-lived snapshot: keep the collector from re-walking it on every full
            # collection (those walks were the p99 of match latency at 10,000 cards)
            gc.freeze()
        return catalog

    @classmethod
    def _load(cls, skills_dir: Path, use_cache: bool) -> "Catalog":
        skills_dir = Path(skills_dir)
        fp = fingerprint(skills_dir)
        cards: dict[str, ParsedCard] = {}
        problems: list[CardProblem] = []
        if not skills_dir.is_dir():
            problems.append(CardProblem(file=str(skills_dir), message="skills folder does not exist"))
        cache = ParseCache(skills_dir) if use_cache else None
        cached = cache.load({p: (m, z) for p, m, z in fp}) if cache else {}
        fresh: dict[str, ParsedCard] = {}
        card_files = [Path(p) for p, _, _ in fp if os.path.basename(p) == CARD_FILE]
        for card_file in card_files:
            parsed = cached.get(str(card_file))
            if parsed is None:
                try:
                    parsed = parse_card_file(card_file)
                except CardParseError as exc:
                    problems += exc.problems
                    continue
                fresh[str(card_file)] = parsed
            cid = parsed.card.id
            if cid in cards:
                problems.append(CardProblem(
                    file=str(card_file), line=parsed.line_of("id"), field="id",
                    message=f"duplicate card id {cid!r}, also in {cards[cid].path}; the first one is kept"))
                continue
            cards[cid] = parsed
        index = CardIndex((p.card for p in cards.values()), known_literals=cache.literals if cache else None)
        if cache is not None and (fresh or len(cached) != len(cards)):
            cache.save(list(cards.values()), index.literals())
        return cls(skills_dir, cards, problems, index, time.time(), fp)

    def get(self, card_id: str) -> ParsedCard:
        try:
            return self.cards[card_id]
        except KeyError:
            known = ", ".join(sorted(self.cards)) or "none"
            raise KeyError(f"unknown card {card_id!r}; known cards: {known}") from None


class ParseCache:
    """Validated cards kept as JSON between runs, keyed by file path, mtime and size.

    Parsing YAML in Python costs milliseconds per card; re-validating cached JSON costs
    a fraction of that (regexes were checked when first parsed, so they are not
    recompiled). A card whose file changed is parsed again; a stale or unreadable
    cache is ignored, never trusted.
    """

    _cards = TypeAdapter(list[Card])

    def __init__(self, skills_dir: Path):
        base = cache_dir()
        key = hashlib.sha1(str(skills_dir.resolve()).encode()).hexdigest()[:12]
        self.path = base / "catalog" / f"{key}.json"
        # the schema and the literal scanner both shape what is cached
        src = b"".join(Path(m.__file__).read_bytes() for m in (schema, regex_literals))
        self.version = hashlib.sha1(src).hexdigest()[:16]
        self.literals: dict[str, list[list[str]] | None] = {}

    def load(self, current: dict[str, tuple[int, int]]) -> dict[str, ParsedCard]:
        """Cached cards whose file still has the recorded (mtime, size) in ``current``."""
        try:
            data = json.loads(self.path.read_text())
            if data.get("version") != self.version:
                return {}
            files = data["files"]
            cards = self._cards.validate_python(data["cards"], context={"trusted": True})
            self.literals = {k: v for k, v in data.get("literals", {}).items()}
        except (OSError, ValueError, KeyError, TypeError, ValidationError):
            return {}
        out: dict[str, ParsedCard] = {}
        for meta, card in zip(files, cards):
            if current.get(meta["path"]) != (meta["mtime_ns"], meta["size"]):
                continue
            out[meta["path"]] = ParsedCard(card=card, path=Path(meta["path"]), body=meta["body"], body_start_line=meta["body_line"],
                                           fm_line=meta["fm_line"], fm_text=meta["fm_text"])
        return out

    def save(self, parsed: list[ParsedCard], literals: dict | None = None) -> None:
        files, cards = [], []
        for p in parsed:
            try:
                st = p.path.stat()
            except OSError:
                continue
            files.append({"path": str(p.path), "mtime_ns": st.st_mtime_ns, "size": st.st_size, "body": p.body,
                          "body_line": p.body_start_line, "fm_line": p.fm_line, "fm_text": p.fm_text})
            cards.append(p.card.model_dump(mode="json", exclude_unset=True))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".catalog-")
            with os.fdopen(fd, "w") as fh:
                json.dump({"version": self.version, "files": files, "cards": cards, "literals": literals or {}}, fh)
            os.replace(tmp, self.path)  # readers see the old or the new cache, never half
        except OSError:
            pass  # a read-only cache location only costs speed


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

"""What every service of one server shares: the project's folders, the loaded catalog and
the ledger (with its claims cache). Built once by the facade and handed to each service."""
from __future__ import annotations

from pathlib import Path

from skill_server import DEFAULT_SKILLS_DIR
from skill_server.cards.catalog import Catalog, CatalogHolder
from skill_server.cards.schema import ParsedCard
from skill_server.drafts.drafting import default_drafts_dir
from skill_server.ledger.results import Ledger, default_ledger_path
from skill_server.reverify.claims_cache import ClaimsCache
from skill_server.service.errors import ServiceError
from skill_server.settings import settings


class Workspace:
    def __init__(self, skills_dir: Path | str | None = None, check_interval: float = 1.0,
                 ledger_path: Path | str | None = None, key_path: Path | str | None = None,
                 drafts_dir: Path | str | None = None):
        self.skills_dir = Path(skills_dir or settings().skills_dir or DEFAULT_SKILLS_DIR)
        self.holder = CatalogHolder(self.skills_dir, check_interval=check_interval)
        # the project is the folder holding skills/ (and kernels/, var/, drafts/)
        self.project_root = self.skills_dir.resolve().parent
        self.drafts_dir = Path(drafts_dir).resolve() if drafts_dir else default_drafts_dir(self.project_root)
        # the ledger opens lazily: read-only commands never create the file (nor the key)
        self.ledger = Ledger(default_ledger_path(self.project_root, ledger_path), key_path=key_path)
        self.claims = ClaimsCache(self.ledger, check_interval=min(check_interval, 1.0))

    @property
    def catalog(self) -> Catalog:
        return self.holder.current()

    def card(self, card_id: str) -> ParsedCard:
        try:
            return self.catalog.get(card_id)
        except KeyError as exc:
            raise ServiceError(exc.args[0]) from None

    def cards(self, card_id: str | None) -> list[ParsedCard]:
        """One card, or every card of the catalog in id order."""
        cat = self.catalog
        return [self.card(card_id)] if card_id else [cat.cards[c] for c in sorted(cat.cards)]

    def writable(self) -> None:
        problem = self.ledger.write_problem()
        if problem:
            raise ServiceError(f"writes are refused: {problem}")

"""Drafts: ledger records -> a card skeleton in the drafts area, listed, and promoted by a person."""
from __future__ import annotations

from skill_server import embedded_write_problem
from skill_server.drafts.drafting import DraftResult, DraftSummary, PromoteResult, draft_from_records, list_drafts, promote
from skill_server.ledger.models import LedgerError
from skill_server.service.errors import ServiceError
from skill_server.service.workspace import Workspace


class DraftService:
    def __init__(self, ws: Workspace):
        self.ws = ws

    def draft_card(self, new_id: str, from_card: str | None = None, record_ids: list[int] | None = None,
                   shape: str | None = None, platform: str | None = None, gens: list[str] | None = None,
                   title: str | None = None) -> DraftResult:
        """Turn ledger records into a card skeleton (status experimental, TODO prose) in the
        drafts area: not served by matching or listing until a person promotes it."""
        cat = self.ws.catalog
        if from_card is None and not record_ids:
            raise ServiceError("select the records: from_card (with optional shape / platform) and/or record_ids")
        if from_card is not None:
            self.ws.card(from_card)
        try:
            results = self.ws.ledger.history(card_id=from_card, shape=shape, platform=platform, ids=record_ids, limit=500)
            if record_ids:
                missing = sorted(set(record_ids) - {r.id for r in results})
                if missing:
                    raise LedgerError(f"no ledger record(s) {missing}" + (f" for card {from_card!r}" if from_card else ""))
            return draft_from_records(new_id, results, cat, self.ws.project_root, self.ws.drafts_dir,
                                      self.ws.ledger.store.location, gens=gens, title=title)
        except (LedgerError, ValueError) as exc:
            raise ServiceError(str(exc)) from None

    def list_drafts(self) -> list[DraftSummary]:
        return list_drafts(self.ws.drafts_dir, self.ws.catalog, self.ws.project_root)

    def promote_draft(self, draft_id: str) -> PromoteResult:
        if why := embedded_write_problem(self.ws.skills_dir):
            raise ServiceError(why)
        try:
            result = promote(draft_id, self.ws.drafts_dir, self.ws.skills_dir, self.ws.catalog, self.ws.project_root)
        except (LedgerError, ValueError) as exc:
            raise ServiceError(str(exc)) from None
        self.ws.holder.reload()
        return result

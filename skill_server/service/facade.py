"""The one facade the adapters (MCP tools, CLI) call: small services composed over one workspace.

Each behaviour lives once, in the service that owns it; the facade builds them and exposes
their methods under one name space, so an adapter is one call and holds no logic.

==================  =====================  ==========================================
service             module                 owns
==================  =====================  ==========================================
``catalog``         ``service.catalog``    list, match, match a profile, recipe, lint,
                                           overlap, doctor, reload
``evidence``        ``service.evidence``   records, reports, history, export; the one
                                           path from a report to the ledger
``verification``    ``service.verification``  run the verifier on a card, record it
``reverification``  ``service.reverification``  re-verify here or on a Ray fleet
``drafts``          ``service.drafts``     draft, list and promote cards
==================  =====================  ==========================================
"""
from __future__ import annotations

from pathlib import Path

from skill_server.cards.catalog import Catalog
from skill_server.service.catalog import (MAX_PAGE, CatalogService, ProfileMatchResult, RecipeView, ReloadResult,
                                          SkillList, SkillSummary)
from skill_server.service.drafts import DraftService
from skill_server.service.errors import ServiceError
from skill_server.service.evidence import EvidenceService, ExportResult, RecordReceipt, ReportView, ValidationHistory
from skill_server.service.reverification import ReverifyService
from skill_server.service.verification import VerificationService, VerifyOutcome
from skill_server.service.workspace import Workspace

__all__ = ["ExportResult", "MAX_PAGE", "ProfileMatchResult", "RecipeView", "RecordReceipt", "ReloadResult",
           "ReportView", "ServiceError", "SkillList", "SkillService", "SkillSummary", "ValidationHistory",
           "VerifyOutcome"]


class SkillService:
    def __init__(self, skills_dir: Path | str | None = None, check_interval: float = 1.0,
                 ledger_path: Path | str | None = None, key_path: Path | str | None = None,
                 drafts_dir: Path | str | None = None):
        ws = self.workspace = Workspace(skills_dir, check_interval, ledger_path, key_path, drafts_dir)
        self.evidence = EvidenceService(ws)
        self.catalog_service = CatalogService(ws, self.evidence)
        self.verification = VerificationService(ws, self.evidence)
        self.reverification = ReverifyService(ws, self.evidence)
        self.drafts = DraftService(ws)
        # the adapters' vocabulary: one name per behaviour, bound to the service that owns it
        self.card, self.reload = ws.card, self.catalog_service.reload
        c = self.catalog_service
        self.list_skills, self.match_skill, self.match_profile = c.list_skills, c.match_skill, c.match_profile
        self.get_recipe, self.lint, self.check_overlap, self.doctor = c.get_recipe, c.lint, c.check_overlap, c.doctor
        e = self.evidence
        self.evidence_for, self.record_result, self.get_report = e.evidence_for, e.record_result, e.get_report
        self.get_validation_history, self.export_validation = e.get_validation_history, e.export_validation
        self.signed_envelope, self.record_card_run = e.signed_envelope, e.record_card_run
        self.problem_of, self.binding_of = self.verification.problem_of, self.verification.binding_of
        self.verify = self.verification.verify
        self.reverify, self.reverify_on_fleet = self.reverification.reverify, self.reverification.reverify_on_fleet
        self.draft_card, self.list_drafts, self.promote_draft = (self.drafts.draft_card, self.drafts.list_drafts,
                                                                 self.drafts.promote_draft)

    @property
    def catalog(self) -> Catalog:
        return self.workspace.catalog

    @property
    def skills_dir(self) -> Path:
        return self.workspace.skills_dir

    @property
    def project_root(self) -> Path:
        return self.workspace.project_root

    @property
    def drafts_dir(self) -> Path:
        return self.workspace.drafts_dir

    @property
    def ledger(self):  # noqa: ANN201 - skill_server.ledger.results.Ledger
        return self.workspace.ledger

"""Evidence: what the ledger holds about each card, and the one path that stores it.

Evidence levels (``ledger.signing``) are decided here and only here:
- a report this server's verifier just produced (``verify``, ``reverify``) is
  ``verified``; recorded at once, or kept in memory (``report://{id}``) and recorded
  later by id;
- a report a client hands back is ``verified`` only when its digest matches its content
  and the server's signature over that digest checks; otherwise ``reported``;
- records a client builds are ``reported``.
"""
from __future__ import annotations

import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from skill_server import embedded_write_problem
from skill_server.cards.artifacts import figures_of, parse_artifact
from skill_server.ledger.results import Ledger
from skill_server.ledger.export import DEFAULT_EXPORT_NAME, artifact_from_results, write_artifact
from skill_server.ledger.models import (LedgerError, PlatformInfo, ResultRecord, ReverificationRow, StoredResult,
                                        StoredReverification, default_recorder, validate_record)
from skill_server.ledger.report_records import (SignedReport, bind_report, derive_records, envelope_json,
                                                parse_submitted_report, report_digest, sign_fresh, stored_report)
from skill_server.ledger.signing import EvidenceLevel
from skill_server.reverify.claims import NEVER_REVERIFIED, Figure, Reverification, select_figures, summarise
from skill_server.reverify.run import CardRun
from skill_server.service.errors import ServiceError
from skill_server.service.workspace import Workspace
from verifiers.report import VerificationReport

REPORT_CACHE_SIZE = 32


# ------------------------------------------------------------------------- models
class RecordReceipt(BaseModel):
    ledger: str = Field(description="the ledger file written")
    ids: list[int] = Field(description="ids of the stored records")
    card_ids: list[str]
    level: EvidenceLevel = Field(description="verified: this server's verifier made the report; reported: submitted")
    report_id: str | None = Field(None, description="the verifier report the records come from (report://{id})")
    skipped: list[str] = Field(default_factory=list, description="shapes of the report not recorded, with the reason")
    note: str | None = None


class ValidationHistory(BaseModel):
    card_id: str
    ledger: str
    results: list[StoredResult] = Field(description="newest first, each with its evidence level")
    reverifications: list[StoredReverification] = Field(description="newest first")
    reverification: Reverification = Field(description="latest verified status per platform, and the figures")


class ExportResult(BaseModel):
    card_id: str
    path: str
    measurements: int
    replaced: bool = Field(description="True when an earlier ledger export was replaced (force)")


class ReportView(BaseModel):
    report_id: str
    level: EvidenceLevel
    recorded: bool
    result_ids: list[int] = Field(default_factory=list)
    envelope_json: str = Field(description="the SignedReport JSON: report, digest and (when recorded) signature")


class _Held(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    signed: SignedReport
    card_id: str


class EvidenceService:
    """Records, reports, history and export over the workspace's ledger."""

    def __init__(self, ws: Workspace):
        self.ws = ws
        self._reports: OrderedDict[str, _Held] = OrderedDict()
        self._reports_lock = threading.Lock()
        self._transcribed_cache: dict[str, tuple[Any, list[Figure]]] = {}

    @property
    def ledger(self) -> Ledger:
        return self.ws.ledger

    @property
    def project_root(self) -> Path:
        return self.ws.project_root

    # -- what answers show -------------------------------------------------------
    def evidence_for(self, card_id: str, shape: str | None = None, limit: int = 6) -> Reverification:
        """The card's latest verified status per platform and its figures (verified first,
        then transcribed, then reported; those at ``shape`` first)."""
        snap = self.ws.claims.get()
        figures = snap.figures.get(card_id, []) + self._transcribed(card_id)
        statuses = snap.statuses.get(card_id, [])
        if not figures and not statuses:
            return NEVER_REVERIFIED
        return summarise(card_id, statuses, select_figures(figures, shape, limit))

    def _transcribed(self, card_id: str) -> list[Figure]:
        """The card's artifact figures, parsed once per catalog snapshot."""
        catalog = self.ws.catalog
        cached = self._transcribed_cache.get(card_id)
        if cached is not None and cached[0] is catalog:
            return cached[1]
        parsed = catalog.cards.get(card_id)
        figures: list[Figure] = []
        if parsed is not None:
            for path in sorted(parsed.folder.glob("*.y*ml")):
                artifact, _ = parse_artifact(path)
                if artifact is not None and artifact.card_id == card_id:
                    figures += figures_of(artifact, path.name)
        self._transcribed_cache[card_id] = (catalog, figures)
        return figures

    def signed_envelope(self, report: VerificationReport) -> SignedReport:
        """A SignedReport of a report this server's verifier produced, signed with the key
        (created when missing): for ``skill-server verify --report``."""
        try:
            sig = self.ws.ledger.sign_report(report_digest(report))
        except LedgerError as exc:
            raise ServiceError(str(exc)) from None
        return sign_fresh(report, sig)

    def hold(self, signed: SignedReport, card_id: str) -> None:
        with self._reports_lock:
            self._reports[signed.report_id] = _Held(signed=signed, card_id=card_id)
            self._reports.move_to_end(signed.report_id)
            while len(self._reports) > REPORT_CACHE_SIZE:
                self._reports.popitem(last=False)

    def get_report(self, report_id: str) -> ReportView:
        """A verifier report by id: recorded ones from the ledger, recent unrecorded runs
        of this server from memory."""
        if not re.fullmatch(r"[0-9a-f]{16}", report_id or ""):
            raise ServiceError(f"report id {report_id!r}: expected 16 hex characters (from run_verifier)")
        with self._reports_lock:
            held = self._reports.get(report_id)
        if held is not None:
            return ReportView(report_id=report_id, level="verified", recorded=False,
                              envelope_json=held.signed.model_dump_json())
        try:
            stored = self.ws.ledger.report(report_id)
        except LedgerError as exc:
            raise ServiceError(str(exc)) from None
        if stored is None:
            raise ServiceError(f"no verifier report {report_id!r} here: unrecorded reports are kept for the last "
                               f"{REPORT_CACHE_SIZE} runs of this server process only")
        signature = stored.evidence.signature if stored.evidence.level == "verified" else None
        return ReportView(report_id=report_id, level=stored.evidence.level, recorded=True,
                          result_ids=stored.result_ids,
                          envelope_json=envelope_json(stored.report_json, stored.digest, signature))

    # -- record --------------------------------------------------------------------
    def record_result(self, record: "dict | ResultRecord | list[dict | ResultRecord] | None" = None, *,
                      report: Any = None, report_id: str | None = None, card_id: str | None = None,
                      recorded_by: str | None = None) -> RecordReceipt:
        """Store hand-made records (``reported``; one or a batch, all or none), or a
        verifier report (a SignedReport or bare report JSON: ``verified`` when its
        signature checks, else ``reported``), or a recent unrecorded run of this server by
        ``report_id`` (``verified``). Give exactly one of them."""
        if sum(x is not None for x in (record, report, report_id)) != 1:
            raise ServiceError("give exactly one of records, report (a verifier report) or report_id")
        self.ws.writable()
        if report_id is not None:
            with self._reports_lock:
                held = self._reports.get(report_id)
            if held is None:
                raise ServiceError(f"no unrecorded report {report_id!r} of this server: it is already recorded, or "
                                   f"older than the last {REPORT_CACHE_SIZE} runs; send the report itself instead")
            if card_id is not None and card_id != held.card_id:
                raise ServiceError(f"report {report_id} verified card {held.card_id!r}, not {card_id!r}")
            receipt = self.record_signed(held.signed, held.card_id, recorded_by or default_recorder("record_result"),
                                          verified=True, source="verifier_report")
            with self._reports_lock:
                self._reports.pop(report_id, None)
            return receipt
        if report is not None:
            return self._record_submitted_report(report, card_id, recorded_by or default_recorder("record_result"))
        return self._record_records(record)

    def _record_records(self, record: Any) -> RecordReceipt:
        batch = record if isinstance(record, list) else [record]
        if not batch:
            raise ServiceError("no record given")
        known = set(self.ws.catalog.cards)
        try:
            valid = [validate_record(r, known_cards=known, project_root=self.ws.project_root,
                                     index=i if len(batch) > 1 else None) for i, r in enumerate(batch)]
            stored = self.ws.ledger.record(valid)
        except LedgerError as exc:
            raise ServiceError(str(exc)) from None
        self.ws.claims.invalidate()
        return RecordReceipt(ledger=self.ws.ledger.store.location, ids=[r.id for r in stored],
                             card_ids=sorted({r.card_id for r in stored}), level="reported",
                             note="hand-made records are stored as reported")

    def _record_submitted_report(self, data: Any, card_id: str | None, recorded_by: str) -> RecordReceipt:
        try:
            signed = parse_submitted_report(data)
        except LedgerError as exc:
            raise ServiceError(str(exc)) from None
        checks = self.ws.ledger.report_signature_checks(signed.digest, signed.signature)
        note = None if checks else ("no signature" if signed.signature is None else
                                    "its signature does not check against this server's key") + \
            ": recorded as reported, not verified"
        return self.record_signed(signed, card_id, recorded_by, verified=checks, source="verifier_report", note=note)

    def record_signed(self, signed: SignedReport, card_id: str | None, recorded_by: str, *, verified: bool, source: str,
                       note: str | None = None) -> RecordReceipt:
        """The one path from a report to the ledger: bind it to its card, derive the
        records from its own content, store report and records in one transaction."""
        cards = {cid: p.card for cid, p in self.ws.catalog.cards.items()}
        try:
            card = bind_report(signed.report, cards, card_id)
            derived = derive_records(signed.report, card, recorded_by, source)
            if not derived.records and not verified:
                raise LedgerError("the report holds no result to record (" + ("; ".join(derived.skipped) or
                                  "no shapes") + "); nothing written")
            if not derived.records:  # this deployment's own report always lands; it holds no evidence row
                note = "; ".join(filter(None, [note, f"the report is stored; verdict {signed.report.verdict}: "
                                               "no result row (nothing that counts for or against the card)"]))
            receipt = self.ws.ledger.record_report(stored_report(signed, recorded_by, source),
                                                derived.records, verified=verified, note=note)
        except LedgerError as exc:
            raise ServiceError(str(exc)) from None
        self.ws.claims.invalidate()
        return RecordReceipt(ledger=self.ws.ledger.store.location, ids=[r.id for r in receipt.results],
                             card_ids=[card.id], level="verified" if verified else "reported",
                             report_id=signed.report_id, skipped=derived.skipped, note=note)

    # -- read ----------------------------------------------------------------------
    def get_validation_history(self, card_id: str, shape: str | None = None, platform: str | None = None,
                               source: str | None = None, limit: int = 50) -> ValidationHistory:
        self.ws.card(card_id)  # unknown ids are an error that lists the known ones
        if not 1 <= limit <= 1000:
            raise ServiceError(f"limit must be between 1 and 1000, got {limit}")
        try:
            results = self.ws.ledger.history(card_id=card_id, shape=shape, platform=platform, source=source, limit=limit)
            reverifications = self.ws.ledger.reverifications(card_id=card_id, platform=platform, limit=limit)
        except (LedgerError, ValueError) as exc:
            raise ServiceError(str(exc)) from None
        return ValidationHistory(card_id=card_id, ledger=self.ws.ledger.store.location, results=results,
                                 reverifications=reverifications, reverification=self.evidence_for(card_id, shape))

    def export_validation(self, card_id: str, path: str | Path | None = None, force: bool = False,
                          shape: str | None = None, platform: str | None = None) -> ExportResult:
        """Write the card's ledger history as a ``ledger_export`` validation artifact:
        by default a new file beside the card; never over the transcribed artifact."""
        parsed = self.ws.card(card_id)
        target = Path(path) if path else parsed.folder / DEFAULT_EXPORT_NAME
        if not target.is_absolute():
            target = self.ws.project_root / target
        if why := embedded_write_problem(target):
            raise ServiceError(why)
        try:
            results = self.ws.ledger.history(card_id=card_id, shape=shape, platform=platform, limit=10_000)
            artifact = artifact_from_results(card_id, results, self.ws.ledger.store.location)
            replaced = write_artifact(artifact, target, self.ws.project_root, force=force)
        except (LedgerError, ValueError) as exc:
            raise ServiceError(str(exc)) from None
        return ExportResult(card_id=card_id, path=str(target.resolve()), measurements=len(artifact.measurements),
                            replaced=replaced)

    def record_card_run(self, run: CardRun, platform: PlatformInfo, recorded_by: str, git_rev: str | None, *, record: bool = True,
                        detail_extra: dict | None = None) -> None:
        """Record one card's re-verification (``reverify.CardRun``: status, report, the
        records derived from it) signed in one transaction; unrecorded, keep its report
        readable by id. The one recording path of local and fleet re-verification."""
        report = None
        if run.report is not None:
            signed = sign_fresh(run.report, None)
            run.result.report_id = signed.report_id
            report = stored_report(signed, recorded_by, "reverify")
        if not record:
            if run.report is not None:
                self.hold(sign_fresh(run.report, None), run.result.card_id)
            return
        detail = run.result.model_dump(mode="json") | (detail_extra or {})
        row = ReverificationRow(card_id=run.result.card_id, platform=platform, status=run.result.status,
                                reason=run.result.reason[:4000], recorded_by=recorded_by, git_rev=git_rev, detail=detail)
        try:
            self.ws.ledger.record_reverification([row], run.records if report else [], report)
        except LedgerError as exc:
            raise ServiceError(str(exc)) from None
        self.ws.claims.invalidate()

__all__ = ["EvidenceService", "ExportResult", "RecordReceipt", "ReportView", "ValidationHistory"]

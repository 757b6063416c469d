"""The service's evidence behaviours: verify (+ record), record, history, reports,
export, re-verification, drafts. ``SkillService`` (``service.py``) mixes these in; the
MCP tools and CLI commands are one call each into these methods.

Evidence levels (``evidence.py``) are decided here and only here:
- a report this server's verifier just produced (``verify``, ``reverify``) is
  ``verified``; recorded at once, or kept in memory (``report://{id}``) and recorded
  later by id;
- a report a client hands back is ``verified`` only when its digest matches its content
  and the server's signature over that digest checks; otherwise ``reported``;
- records a client builds are ``reported``.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from verifiers.report import VerificationReport

from skill_server import embedded_write_problem, is_embedded
from skill_server.reverify.claims import NEVER_REVERIFIED, Figure, Reverification, select_figures, summarise
from skill_server.ledger.signing import EvidenceLevel
from skill_server.ledger.models import LedgerError, ResultRecord, StoredResult, StoredReverification, default_recorder
from skill_server.cards.schema import VerifierBinding
from skill_server.service.errors import ServiceError
from skill_server.service.verification import run_card_verifier

if TYPE_CHECKING:  # pragma: no cover
    from skill_server.reverify.claims_cache import ClaimsCache
    from skill_server.policy.client_policy import ClientPolicy
    from skill_server.ledger.results import Ledger
    from skill_server.drafts.drafting import DraftResult, DraftSummary, PromoteResult
    from skill_server.fleet.models import FleetReport
    from skill_server.reverify.run import ReverifyReport

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


class VerifyOutcome(BaseModel):
    """One run of this server's verifier: the report and what became of it."""

    report: VerificationReport
    report_id: str
    digest: str
    level: EvidenceLevel = "verified"
    recorded: RecordReceipt | None = None
    not_recorded: str | None = Field(None, description="why the result was not recorded")


class ReportView(BaseModel):
    report_id: str
    level: EvidenceLevel
    recorded: bool
    result_ids: list[int] = Field(default_factory=list)
    envelope_json: str = Field(description="the SignedReport JSON: report, digest and (when recorded) signature")


class _Held(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    signed: Any  # report_records.SignedReport
    card_id: str


class LedgerService:
    """Mixed into ``SkillService``; relies on its ``catalog``, ``card()``, ``project_root``,
    ``skills_dir``, ``ledger``, ``drafts_dir`` and ``_claims``."""

    # provided by SkillService
    ledger: "Ledger"
    _claims: "ClaimsCache"
    project_root: Path
    skills_dir: Path
    drafts_dir: Path
    catalog: Any
    card: Callable[[str], Any]
    reload: Callable[[], Any]

    _reports: OrderedDict[str, _Held]
    _reports_lock: threading.Lock
    _transcribed_cache: dict[str, tuple[Any, list[Figure]]]

    def _init_evidence(self) -> None:
        self._reports = OrderedDict()
        self._reports_lock = threading.Lock()
        self._transcribed_cache = {}

    # -- what answers show -------------------------------------------------------
    def evidence_for(self, card_id: str, shape: str | None = None, limit: int = 6) -> Reverification:
        """The card's latest verified status per platform and its figures (verified first,
        then transcribed, then reported; those at ``shape`` first)."""
        snap = self._claims.get()
        figures = snap.figures.get(card_id, []) + self._transcribed(card_id)
        statuses = snap.statuses.get(card_id, [])
        if not figures and not statuses:
            return NEVER_REVERIFIED
        return summarise(card_id, statuses, select_figures(figures, shape, limit))

    def _transcribed(self, card_id: str) -> list[Figure]:
        """The card's artifact figures, parsed once per catalog snapshot."""
        from skill_server.cards.artifacts import figures_of, parse_artifact

        catalog = self.catalog
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

    # -- verify --------------------------------------------------------------------
    def binding_of(self, card_id: str) -> VerifierBinding:
        """The card's verifier binding (its problem and arms per platform)."""
        card = self.card(card_id).card
        if card.verifier is None:
            raise ServiceError(f"card {card_id!r} has no verifier binding (front matter 'verifier:')")
        return card.verifier

    def problem_of(self, card_id: str) -> str:
        """The kernels folder (verifier problem) a card binds to."""
        return self.binding_of(card_id).problem

    def verify(self, card_id: str, candidate: str, baseline: str | None = None, shapes: list[str] | None = None,
               options: dict | Any = None, progress: Callable[[int, int, str], None] | None = None, *,
               record: bool = False, recorded_by: str | None = None, client: "ClientPolicy | None" = None,
               not_recorded: str = "not recorded: record=false", cancel: threading.Event | None = None,
               plot_path: str | None = None) -> VerifyOutcome:
        """Run the card's verifier on this box (parity against the immutable oracle, runtime
        signatures, same-session A/A + interleaved A/B timing) and, when ``record``, store
        the report and its records as ``verified``. Unrecorded reports stay readable
        (``get_report``) and recordable by id for a while.

        With ``client`` (an MCP client, not the operator) the candidate must be a file under
        the policy's roots or an arm, and only the policy's effort options may be set over the
        operator's: the worker's interpreter, output files and the parity rules stay the server's."""
        from verifiers.options import VerifyOptions

        from skill_server.ledger.report_records import report_digest, sign_fresh

        from skill_server.doctor.preflight import verify_refusal

        binding = self.binding_of(card_id)
        if record:
            self._writable()
        try:
            if client is not None:
                candidate = client.candidate(candidate)
                options = client.verify_options(options)
            opts = options if isinstance(options, VerifyOptions) else VerifyOptions.model_validate(options or {})
            refusal = verify_refusal(opts.device, opts.profile)
            if refusal:  # a box that cannot run it refuses with the doctor's line
                raise ServiceError(f"verification refused on this box (the doctor tool has the full report):\n{refusal}")
            report = run_card_verifier(binding, candidate, baseline=baseline, shapes=shapes, options=opts,
                                       progress=progress, cancel=cancel, plot_path=plot_path)
        except (ValueError, KeyError, FileNotFoundError, ImportError) as exc:
            raise ServiceError(exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)) from None
        digest = report_digest(report)
        outcome = VerifyOutcome(report=report, report_id=digest[:16], digest=digest)
        signed = sign_fresh(report, None)
        if record:
            try:  # a finished run is never lost to a recording problem: it stays readable by id
                outcome.recorded = self._record_signed(signed, card_id, recorded_by or default_recorder("verify"), verified=True,
                                                       source="verifier_report")
                return outcome
            except ServiceError as exc:
                outcome.not_recorded = f"not recorded: {exc}"
        else:
            outcome.not_recorded = not_recorded
        key = self.ledger.keys.for_reading()
        if key is not None:  # never creates a key: an unrecorded run writes nothing
            signed = sign_fresh(report, key.sign("report", {"digest": digest}))
        self._hold(signed, card_id)
        return outcome

    def signed_envelope(self, report: Any) -> Any:
        """A SignedReport of a report this server's verifier produced, signed with the key
        (created when missing): for ``skill-server verify --report``."""
        from skill_server.ledger.report_records import report_digest, sign_fresh

        try:
            sig = self.ledger.sign_report(report_digest(report))
        except LedgerError as exc:
            raise ServiceError(str(exc)) from None
        return sign_fresh(report, sig)

    def _hold(self, signed: Any, card_id: str) -> None:
        with self._reports_lock:
            self._reports[signed.report_id] = _Held(signed=signed, card_id=card_id)
            self._reports.move_to_end(signed.report_id)
            while len(self._reports) > REPORT_CACHE_SIZE:
                self._reports.popitem(last=False)

    def get_report(self, report_id: str) -> ReportView:
        """A verifier report by id: recorded ones from the ledger, recent unrecorded runs
        of this server from memory."""
        import re

        if not re.fullmatch(r"[0-9a-f]{16}", report_id or ""):
            raise ServiceError(f"report id {report_id!r}: expected 16 hex characters (from run_verifier)")
        with self._reports_lock:
            held = self._reports.get(report_id)
        if held is not None:
            return ReportView(report_id=report_id, level="verified", recorded=False,
                              envelope_json=held.signed.model_dump_json())
        try:
            stored = self.ledger.report(report_id)
        except LedgerError as exc:
            raise ServiceError(str(exc)) from None
        if stored is None:
            raise ServiceError(f"no verifier report {report_id!r} here: unrecorded reports are kept for the last "
                               f"{REPORT_CACHE_SIZE} runs of this server process only")
        from skill_server.ledger.report_records import envelope_json

        signature = stored.evidence.signature if stored.evidence.level == "verified" else None
        return ReportView(report_id=report_id, level=stored.evidence.level, recorded=True,
                          result_ids=stored.result_ids,
                          envelope_json=envelope_json(stored.report_json, stored.digest, signature))

    # -- record --------------------------------------------------------------------
    def _writable(self) -> None:
        problem = self.ledger.write_problem()
        if problem:
            raise ServiceError(f"writes are refused: {problem}")

    def record_result(self, record: "dict | ResultRecord | list[dict | ResultRecord] | None" = None, *,
                      report: Any = None, report_id: str | None = None, card_id: str | None = None,
                      recorded_by: str | None = None) -> RecordReceipt:
        """Store hand-made records (``reported``; one or a batch, all or none), or a
        verifier report (a SignedReport or bare report JSON: ``verified`` when its
        signature checks, else ``reported``), or a recent unrecorded run of this server by
        ``report_id`` (``verified``). Give exactly one of them."""
        if sum(x is not None for x in (record, report, report_id)) != 1:
            raise ServiceError("give exactly one of records, report (a verifier report) or report_id")
        self._writable()
        if report_id is not None:
            with self._reports_lock:
                held = self._reports.get(report_id)
            if held is None:
                raise ServiceError(f"no unrecorded report {report_id!r} of this server: it is already recorded, or "
                                   f"older than the last {REPORT_CACHE_SIZE} runs; send the report itself instead")
            if card_id is not None and card_id != held.card_id:
                raise ServiceError(f"report {report_id} verified card {held.card_id!r}, not {card_id!r}")
            receipt = self._record_signed(held.signed, held.card_id, recorded_by or default_recorder("record_result"),
                                          verified=True, source="verifier_report")
            with self._reports_lock:
                self._reports.pop(report_id, None)
            return receipt
        if report is not None:
            return self._record_submitted_report(report, card_id, recorded_by or default_recorder("record_result"))
        return self._record_records(record)

    def _record_records(self, record: Any) -> RecordReceipt:
        from skill_server.ledger.models import validate_record

        batch = record if isinstance(record, list) else [record]
        if not batch:
            raise ServiceError("no record given")
        known = set(self.catalog.cards)
        try:
            valid = [validate_record(r, known_cards=known, project_root=self.project_root,
                                     index=i if len(batch) > 1 else None) for i, r in enumerate(batch)]
            stored = self.ledger.record(valid)
        except LedgerError as exc:
            raise ServiceError(str(exc)) from None
        self._claims.invalidate()
        return RecordReceipt(ledger=self.ledger.store.location, ids=[r.id for r in stored],
                             card_ids=sorted({r.card_id for r in stored}), level="reported",
                             note="hand-made records are stored as reported")

    def _record_submitted_report(self, data: Any, card_id: str | None, recorded_by: str) -> RecordReceipt:
        from skill_server.ledger.report_records import parse_submitted_report

        try:
            signed = parse_submitted_report(data)
        except LedgerError as exc:
            raise ServiceError(str(exc)) from None
        checks = self.ledger.report_signature_checks(signed.digest, signed.signature)
        note = None if checks else ("no signature" if signed.signature is None else
                                    "its signature does not check against this server's key") + \
            ": recorded as reported, not verified"
        return self._record_signed(signed, card_id, recorded_by, verified=checks, source="verifier_report", note=note)

    def _record_signed(self, signed: Any, card_id: str | None, recorded_by: str, *, verified: bool, source: str,
                       note: str | None = None) -> RecordReceipt:
        """The one path from a report to the ledger: bind it to its card, derive the
        records from its own content, store report and records in one transaction."""
        from skill_server.ledger.report_records import bind_report, derive_records, stored_report

        cards = {cid: p.card for cid, p in self.catalog.cards.items()}
        try:
            card = bind_report(signed.report, cards, card_id)
            derived = derive_records(signed.report, card, recorded_by, source)
            if not derived.records and not verified:
                raise LedgerError("the report holds no result to record (" + ("; ".join(derived.skipped) or
                                  "no shapes") + "); nothing written")
            if not derived.records:  # this deployment's own report always lands; it holds no evidence row
                note = "; ".join(filter(None, [note, f"the report is stored; verdict {signed.report.verdict}: "
                                               "no result row (nothing that counts for or against the card)"]))
            receipt = self.ledger.record_report(stored_report(signed, recorded_by, source),
                                                derived.records, verified=verified, note=note)
        except LedgerError as exc:
            raise ServiceError(str(exc)) from None
        self._claims.invalidate()
        return RecordReceipt(ledger=self.ledger.store.location, ids=[r.id for r in receipt.results],
                             card_ids=[card.id], level="verified" if verified else "reported",
                             report_id=signed.report_id, skipped=derived.skipped, note=note)

    # -- read ----------------------------------------------------------------------
    def get_validation_history(self, card_id: str, shape: str | None = None, platform: str | None = None,
                               source: str | None = None, limit: int = 50) -> ValidationHistory:
        self.card(card_id)  # unknown ids are an error that lists the known ones
        if not 1 <= limit <= 1000:
            raise ServiceError(f"limit must be between 1 and 1000, got {limit}")
        try:
            results = self.ledger.history(card_id=card_id, shape=shape, platform=platform, source=source, limit=limit)
            reverifications = self.ledger.reverifications(card_id=card_id, platform=platform, limit=limit)
        except (LedgerError, ValueError) as exc:
            raise ServiceError(str(exc)) from None
        return ValidationHistory(card_id=card_id, ledger=self.ledger.store.location, results=results,
                                 reverifications=reverifications, reverification=self.evidence_for(card_id, shape))

    def export_validation(self, card_id: str, path: str | Path | None = None, force: bool = False,
                          shape: str | None = None, platform: str | None = None) -> ExportResult:
        """Write the card's ledger history as a ``ledger_export`` validation artifact:
        by default a new file beside the card; never over the transcribed artifact."""
        from skill_server.ledger.export import DEFAULT_EXPORT_NAME, artifact_from_results, write_artifact

        parsed = self.card(card_id)
        target = Path(path) if path else parsed.folder / DEFAULT_EXPORT_NAME
        if not target.is_absolute():
            target = self.project_root / target
        if why := embedded_write_problem(target):
            raise ServiceError(why)
        try:
            results = self.ledger.history(card_id=card_id, shape=shape, platform=platform, limit=10_000)
            artifact = artifact_from_results(card_id, results, self.ledger.store.location)
            replaced = write_artifact(artifact, target, self.project_root, force=force)
        except (LedgerError, ValueError) as exc:
            raise ServiceError(str(exc)) from None
        return ExportResult(card_id=card_id, path=str(target.resolve()), measurements=len(artifact.measurements),
                            replaced=replaced)

    # -- re-verification -----------------------------------------------------------
    def reverify(self, card_id: str | None = None, progress=None, *, gates: bool = True, verifier: bool = True,
                 record: bool = True, recorded_by: str | None = None, platform=None, probes=None,
                 gate_runner=None, verifier_runner=None, emulate: bool | None = None, **smoke) -> "ReverifyReport":
        """Re-check each card (or one) on this box; record a signed status per card and
        platform, with the verifier's report and results.

        ``progress`` receives ``ReverifyProgress`` events. ``platform``, ``probes``,
        ``gate_runner`` and ``verifier_runner`` replace the box's own (tests, or a caller
        that already knows the platform); ``smoke`` passes ``shapes_override`` /
        ``verifier_on_cpu`` / ``verifier_options`` to the ``Reverifier``. ``emulate``: also run
        the cards' FlyDSL reference arms on gfx950-emulated (recorded under that platform);
        default: with the gates (both are the gfx950 compile work) and the verifier's own runner,
        on a box with no AMD GPU."""
        from verifiers.provenance import detect_platform, read_git_revision

        from skill_server.ledger.models import normalise_platform
        from skill_server.reverify.run import Reverifier, ReverifyReport, now
        from skill_server.reverify.stages import default_gate_runner, default_verifier_runner

        catalog = self.catalog
        cards = [self.card(card_id)] if card_id else [catalog.cards[c] for c in sorted(catalog.cards)]
        if record:
            self._writable()
        try:
            plat = normalise_platform(platform or detect_platform())
        except ValueError as exc:
            raise ServiceError(f"platform: {exc}") from None
        rev = None if is_embedded(self.project_root) else read_git_revision(self.project_root).text
        who = recorded_by or default_recorder("reverify")
        rv = Reverifier(project_root=self.project_root, platform=plat, recorded_by=who, git_rev=rev,
                        probes=dict(probes) if probes is not None else None,
                        gate_runner=(gate_runner or default_gate_runner) if gates else None,
                        verifier_runner=(verifier_runner or default_verifier_runner) if verifier else None,
                        emulated_runner=default_verifier_runner if (
                            emulate if emulate is not None else gates and verifier and verifier_runner is None
                            and plat.runtime != "rocm") else None,
                        **smoke)
        started = now()
        outcomes = []
        for run in rv.run(cards, progress):
            outcomes.append(run.result)
            self.record_card_run(run, run.platform or plat, who, rev, record=record)
        return ReverifyReport(platform=plat, git_rev=rev, started_at=started, finished_at=now(), cards=outcomes,
                              ledger=self.ledger.store.location if record else None)

    def record_card_run(self, run, platform, recorded_by: str, git_rev: str | None, *, record: bool = True,
                        detail_extra: dict | None = None) -> None:
        """Record one card's re-verification (``reverify.CardRun``: status, report, the
        records derived from it) signed in one transaction; unrecorded, keep its report
        readable by id. The one recording path of local and fleet re-verification."""
        from skill_server.ledger.models import ReverificationRow
        from skill_server.ledger.report_records import sign_fresh, stored_report

        report = None
        if run.report is not None:
            signed = sign_fresh(run.report, None)
            run.result.report_id = signed.report_id
            report = stored_report(signed, recorded_by, "reverify")
        if not record:
            if run.report is not None:
                self._hold(sign_fresh(run.report, None), run.result.card_id)
            return
        detail = run.result.model_dump(mode="json") | (detail_extra or {})
        row = ReverificationRow(card_id=run.result.card_id, platform=platform, status=run.result.status,
                                reason=run.result.reason[:4000], recorded_by=recorded_by, git_rev=git_rev, detail=detail)
        try:
            self.ledger.record_reverification([row], run.records if report else [], report)
        except LedgerError as exc:
            raise ServiceError(str(exc)) from None
        self._claims.invalidate()

    def reverify_on_fleet(self, address: str, card_id: str | None = None, progress=None, *, gates: bool = True,
                          verifier: bool = True, record: bool = True, recorded_by: str | None = None,
                          cpu_smoke: bool = False, platforms: list[str] | None = None,
                          task_timeout_s: float | None = None) -> "FleetReport":
        """Re-verify on a Ray cluster: one task per (card, platform the cluster offers), run
        on a node advertising that platform; every outcome recorded here (``fleet.py``)."""
        from skill_server.fleet.dispatch import FleetError, run_fleet

        if record:
            self._writable()
        cards = [self.card(card_id)] if card_id else [self.catalog.cards[c] for c in sorted(self.catalog.cards)]
        try:
            return run_fleet(self, address, cards, progress=progress, gates=gates, verifier=verifier, record=record,
                             recorded_by=recorded_by or default_recorder("reverify --ray"), cpu_smoke=cpu_smoke,
                             platforms=platforms, task_timeout_s=task_timeout_s)
        except FleetError as exc:
            raise ServiceError(str(exc)) from None

    # -- drafts --------------------------------------------------------------------
    def draft_card(self, new_id: str, from_card: str | None = None, record_ids: list[int] | None = None,
                   shape: str | None = None, platform: str | None = None, gens: list[str] | None = None,
                   title: str | None = None) -> "DraftResult":
        """Turn ledger records into a card skeleton (status experimental, TODO prose) in the
        drafts area: not served by matching or listing until a person promotes it."""
        from skill_server.drafts.drafting import draft_from_records

        cat = self.catalog
        if from_card is None and not record_ids:
            raise ServiceError("select the records: from_card (with optional shape / platform) and/or record_ids")
        if from_card is not None:
            self.card(from_card)
        try:
            results = self.ledger.history(card_id=from_card, shape=shape, platform=platform, ids=record_ids, limit=500)
            if record_ids:
                missing = sorted(set(record_ids) - {r.id for r in results})
                if missing:
                    raise LedgerError(f"no ledger record(s) {missing}" + (f" for card {from_card!r}" if from_card else ""))
            return draft_from_records(new_id, results, cat, self.project_root, self.drafts_dir,
                                      self.ledger.store.location, gens=gens, title=title)
        except (LedgerError, ValueError) as exc:
            raise ServiceError(str(exc)) from None

    def list_drafts(self) -> "list[DraftSummary]":
        from skill_server.drafts.drafting import list_drafts

        return list_drafts(self.drafts_dir, self.catalog, self.project_root)

    def promote_draft(self, draft_id: str) -> "PromoteResult":
        from skill_server.drafts.drafting import promote

        if why := embedded_write_problem(self.skills_dir):
            raise ServiceError(why)
        try:
            result = promote(draft_id, self.drafts_dir, self.skills_dir, self.catalog, self.project_root)
        except (LedgerError, ValueError) as exc:
            raise ServiceError(str(exc)) from None
        self.reload()
        return result


__all__ = ["ExportResult", "LedgerService", "RecordReceipt", "ReportView", "ValidationHistory", "VerifyOutcome"]

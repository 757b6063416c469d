"""Verification: run this deployment's verifier on a card (``card_verifier``) and keep what it proved."""
from __future__ import annotations

import threading
from collections.abc import Callable

from pydantic import BaseModel, Field

from skill_server.cards.schema import VerifierBinding
from skill_server.doctor.preflight import verify_refusal
from skill_server.ledger.models import default_recorder
from skill_server.ledger.report_records import report_digest, sign_fresh
from skill_server.ledger.signing import EvidenceLevel
from skill_server.policy.client_policy import ClientPolicy
from skill_server.card_verifier import run_card_verifier
from skill_server.service.errors import ServiceError
from skill_server.service.evidence import EvidenceService, RecordReceipt
from skill_server.service.workspace import Workspace
from verifiers.options import VerifyOptions
from verifiers.report import VerificationReport


class VerifyOutcome(BaseModel):
    """One run of this server's verifier: the report and what became of it."""

    report: VerificationReport
    report_id: str
    digest: str
    level: EvidenceLevel = "verified"
    recorded: RecordReceipt | None = None
    not_recorded: str | None = Field(None, description="why the result was not recorded")


class VerificationService:
    def __init__(self, ws: Workspace, evidence: EvidenceService):
        self.ws = ws
        self.evidence = evidence

    def binding_of(self, card_id: str) -> VerifierBinding:
        """The card's verifier binding (its problem and arms per platform)."""
        card = self.ws.card(card_id).card
        if card.verifier is None:
            raise ServiceError(f"card {card_id!r} has no verifier binding (front matter 'verifier:')")
        return card.verifier

    def problem_of(self, card_id: str) -> str:
        """The kernels folder (verifier problem) a card binds to."""
        return self.binding_of(card_id).problem

    def verify(self, card_id: str, candidate: str, baseline: str | None = None, shapes: list[str] | None = None,
               options: dict | VerifyOptions | None = None, progress: Callable[[int, int, str], None] | None = None, *,
               record: bool = False, recorded_by: str | None = None, client: ClientPolicy | None = None,
               not_recorded: str = "not recorded: record=false", cancel: threading.Event | None = None,
               plot_path: str | None = None) -> VerifyOutcome:
        """Run the card's verifier on this box (parity against the immutable oracle, runtime
        signatures, same-session A/A + interleaved A/B timing) and, when ``record``, store
        the report and its records as ``verified``. Unrecorded reports stay readable
        (``get_report``) and recordable by id for a while.

        With ``client`` (an MCP client, not the operator) the candidate must be a file under
        the policy's roots or an arm, and only the policy's effort options may be set over the
        operator's: the worker's interpreter, output files and the parity rules stay the server's."""
        binding = self.binding_of(card_id)
        if record:
            self.ws.writable()
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
                outcome.recorded = self.evidence.record_signed(signed, card_id, recorded_by or default_recorder("verify"), verified=True,
                                                       source="verifier_report")
                return outcome
            except ServiceError as exc:
                outcome.not_recorded = f"not recorded: {exc}"
        else:
            outcome.not_recorded = not_recorded
        key = self.ws.ledger.keys.for_reading()
        if key is not None:  # never creates a key: an unrecorded run writes nothing
            signed = sign_fresh(report, key.sign("report", {"digest": digest}))
        self.evidence.hold(signed, card_id)
        return outcome

"""Verifier report -> ledger records: the one seam between the verifier and the ledger.

Every front end goes through here: ``skill-server verify`` and ``record --from-report``,
the MCP tools ``run_verifier`` and ``record_result``, and re-verification. The flow is
typed end to end:

    VerificationReport --bind_report--> Card
                       --derive_records--> DerivedRecords(records: list[ResultRecord], skipped)
                       --stored_report--> ReportToStore (digest, harness digest, JSON)
    SignedReport (report + digest + signature) is how the server hands a report out
    (``report://{id}``) and how a client hands one back.

What a record claims (card, shape, platform, arms, figures) is read from the report
itself, never from the caller: a genuine report cannot be recorded against another card,
shape or platform than the one it measured. The fields read are the report's stable ones:
verdict, per-shape verdict / stages / parity / timing (A/B speedup, interval, medians),
baseline arm, candidate, provenance (platform, git revision, harness digest).
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from skill_server.cards.schema import Card
from skill_server.json_input import json_object
from skill_server.ledger.models import (
    ArmResult,
    LedgerError,
    ResultRecord,
    describe_error,
    parse_shape_text,
    shape_text,
)
from skill_server.ledger.results import ReportToStore
from skill_server.ledger.signing import Signature, canonical_json, sha256_hex
from verifiers.problem import load_problem
from verifiers.report import ShapeReport, VerificationReport

MAX_REPORT_BYTES = 16 * 1024 * 1024
LEDGER_VERDICTS = ("FASTER", "SLOWER", "NO_DIFFERENCE", "FAIL")


class ReportRejected(LedgerError):
    """A submitted report cannot be recorded; nothing was written."""


class SignedReport(BaseModel):
    """A verifier report with its digest and, when this server's verifier made it, the
    server's signature over that digest."""

    model_config = ConfigDict(extra="forbid")

    report: VerificationReport
    digest: str | None = Field(None, pattern=r"^[0-9a-f]{64}$",
                               description="sha256 of the report's canonical JSON; checked against the content")
    signature: Signature | None = None
    # the report as the client sent it: the digest is over these bytes, so a report issued by an
    # older version (fields since added or dropped) still matches and is stored as issued
    _sent: dict[str, Any] | None = PrivateAttr(default=None)

    @property
    def report_id(self) -> str:
        return (self.digest or report_digest(self.report))[:16]


class DerivedRecords(BaseModel):
    records: list[ResultRecord] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list, description="shapes not recorded, with the reason")


def report_digest(report: VerificationReport) -> str:
    """sha256 over the report's canonical JSON (sorted keys: independent of key order)."""
    return sha256_hex(canonical_json(report.model_dump(mode="json")))


# ------------------------------------------------------------------------ parsing
def parse_submitted_report(data: Any) -> SignedReport:
    """A report as a client sent it: the SignedReport JSON (``{"report": ..., "digest":
    ..., "signature": ...}``) or a bare VerificationReport. Raises ReportRejected naming
    the field when it does not parse, or when its digest does not match its content."""
    if isinstance(data, (str, bytes)) and len(data) > MAX_REPORT_BYTES:
        raise ReportRejected(f"report: larger than {MAX_REPORT_BYTES} bytes")
    data = json_object("report", data, "a verifier report", ReportRejected)
    envelope = data if "report" in data and isinstance(data.get("report"), dict) else {"report": data}
    try:
        signed = SignedReport.model_validate(envelope)
    except ValidationError as exc:
        problems = "; ".join(describe_error(e) for e in exc.errors()[:8])
        raise ReportRejected(f"not a verifier report (verifiers.report.VerificationReport): {problems}") from None
    actual = sha256_hex(canonical_json(envelope["report"]))
    if signed.digest is not None and signed.digest != actual:
        raise ReportRejected(f"report digest {signed.digest[:16]}... does not match its content "
                             f"({actual[:16]}...): the report was changed after it was issued; nothing written "
                             "(send it without the digest to record it as reported)")
    out = signed.model_copy(update={"digest": actual})
    out._sent = envelope["report"]
    return out


def bind_report(report: VerificationReport, known_cards: dict[str, Card], card_id: str | None = None) -> Card:
    """The card a report measured: the one its problem names. A caller's ``card_id`` must
    agree; an unknown card is refused."""
    named = report.card_id
    if named is None:
        raise ReportRejected(f"the report (problem {report.problem!r}) names no card: only reports of a card's own "
                             "verifier problem can be recorded")
    if named not in known_cards:
        shown = ", ".join(sorted(known_cards)[:20]) or "none"
        raise ReportRejected(f"the report names an unknown card {named!r}; known cards: {shown}")
    if card_id is not None and card_id != named:
        raise ReportRejected(f"the report measured card {named!r}, not {card_id!r}: a report is recorded for the "
                             "card it measured")
    card = known_cards[named]
    if card.verifier is None:
        raise ReportRejected(f"card {named!r} has no verifier binding: there is no report of it to record")
    bound = problem_name(card.verifier.problem)
    if report.problem != bound:
        raise ReportRejected(f"the report ran problem {report.problem!r}, but card {named!r} binds the problem "
                             f"{bound!r} (kernels/{card.verifier.problem}/problem.py)")
    return card


@functools.lru_cache(maxsize=256)
def problem_name(folder: str) -> str:
    """The name the verifier reports for the problem in ``kernels/<folder>/`` (its
    ``PROBLEM.name``; the folder name when the problem cannot be loaded here)."""

    try:
        return load_problem(folder).name
    except Exception:  # noqa: BLE001 - a problem that does not load here is named by its folder
        return folder


# ------------------------------------------------------------------------ records
def derive_records(report: VerificationReport, card: Card, recorded_by: str, source: str) -> DerivedRecords:
    """One ledger record per shape of the report that is evidence: a timed verdict, or a FAIL
    (the candidate blamed on evidence). An INCONCLUSIVE or ERROR shape (nothing timed, the
    platform could not observe, the harness could not decide) is never stored as evidence
    for or against the card: it is listed in ``skipped`` with its reason. Hidden shapes
    carry no timing; a hidden shape that failed parity makes every record of the report a
    FAIL."""
    platform = report.provenance.platform_info()
    if platform is None:
        why = next((f"{name}: {st.reason}" for name, st in report.stages.items() if st.status in ("ERROR", "FAIL")),
                   "no shape reached the device")
        raise ReportRejected(f"the run ended {report.verdict} before the verifier opened a device, so the report "
                             f"names no platform to record it under ({why[:300]})")
    hidden_failures = [f"{s.shape}: {s.verdict}" for s in report.shape_reports if s.hidden and s.verdict == "FAIL"]
    candidate = candidate_arm_name(report.candidate)
    out = DerivedRecords()
    for s in report.shape_reports:
        if s.hidden:
            out.skipped.append(f"{s.shape}: hidden shape: parity only, nothing timed to record")
            continue
        try:
            rec = _record(report, s, card, candidate, platform, recorded_by, source, hidden_failures)
        except (ValueError, ValidationError) as exc:
            reason = ("; ".join(describe_error(e) for e in exc.errors()) if isinstance(exc, ValidationError)
                      else str(exc))
            out.skipped.append(f"{s.shape}: {reason}")
            continue
        if isinstance(rec, str):
            out.skipped.append(f"{s.shape}: {rec}")
        else:
            out.records.append(rec)
    return out


def _record(report: VerificationReport, s: ShapeReport, card: Card, candidate: str, platform: Any,
            recorded_by: str, source: str, hidden_failures: list[str]) -> ResultRecord | str:
    verdict = s.verdict
    stages = {name: st.status for name, st in s.stages.items()}
    problems = [f"{name}: {st.reason or st.status}" for name, st in s.stages.items() if st.status in ("FAIL", "ERROR")]
    if hidden_failures:
        verdict = "FAIL"
        stages["hidden_parity"] = "FAIL"
        problems.append("hidden shapes failed: " + ", ".join(hidden_failures))
    if verdict not in LEDGER_VERDICTS:
        undecided = [f"{name} {st.status}: {st.reason}" for name, st in s.stages.items() if st.status != "PASS"]
        return (f"verdict {verdict}: not evidence for or against the card, nothing recorded for this shape"
                + (f" ({'; '.join(undecided)[:400]})" if undecided else ""))
    ab = s.timing.ab if s.timing is not None else None
    speedup = ab.speedup if ab is not None and verdict != "FAIL" else None
    interval = (ab.ci_low, ab.ci_high) if ab is not None and ab.ci_low and ab.ci_high and speedup else None
    parity = parity_summary(s)
    dims = dict(s.dims) if s.dims else parse_shape_text(s.shape)
    timed = verdict != "FAIL"
    return ResultRecord(
        card_id=card.id, shape=dims, verdict=verdict, speedup=speedup, interval=interval,
        baseline=ArmResult(name=(s.baseline_arm or report.baseline or "baseline")[:200],
                           time_ms=ab.median_a_ms if ab is not None and timed else None),
        candidate=ArmResult(name=candidate, time_ms=ab.median_b_ms if ab is not None and timed else None),
        parity=parity, parity_passed=(s.parity.status == "PASS") if s.parity is not None else None,
        stages=stages, platform=platform, git_rev=report.provenance.git_text(), recorded_by=recorded_by,
        source=source, notes=_notes(problems, report.provenance.sandbox))


def _notes(problems: list[str], sandbox: str | None) -> str | None:
    """The failed stages, then what confined the candidate (``verifiers.arms.sandbox``)."""
    parts = problems + ([f"sandbox: {sandbox}"] if sandbox else [])
    return "; ".join(parts)[-4000:] if parts else None


def candidate_arm_name(candidate: str) -> str:
    """``arm:NAME`` -> NAME; ``/path/to/file.py:build`` -> ``file.py:build`` (no paths in
    the ledger); ``package.module:FUNC`` as is."""
    if candidate.startswith("arm:"):
        return candidate[4:][:200] or candidate
    target, sep, func = candidate.rpartition(":")
    if sep and target.endswith(".py"):
        return f"{Path(target).name}:{func}"[:200]
    return candidate[:200]


def parity_summary(s: ShapeReport) -> dict[str, float | int | str]:
    """Worst figures of the candidate over every parity case and output (and the baseline
    arm's, for comparison)."""
    parity = s.parity
    if parity is None:
        return {}
    out: dict[str, float | int | str] = {"status": str(parity.status)}
    try:
        outputs = [o for c in parity.cases for o in c.outputs]
        rows = {"": [o.candidate for o in outputs], "baseline_": [o.baseline for o in outputs]}
        for prefix, metrics in rows.items():
            if metrics:
                out[f"{prefix}min_cosine"] = min(m.cosine for m in metrics)
                out[f"{prefix}max_abs"] = max(m.max_abs for m in metrics)
                out[f"{prefix}max_rel_l2"] = max(m.rel_l2 for m in metrics)
                out[f"{prefix}mismatches"] = sum(m.mismatches for m in metrics)
        out["cases"] = len(parity.cases)
    except (AttributeError, TypeError, ValueError):  # a report shape this seam does not know: status only
        pass
    return {k: v for k, v in out.items() if not (isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))))}


def stored_report(signed: SignedReport, recorded_by: str, source: str) -> ReportToStore:
    report = signed.report
    return ReportToStore(digest=signed.digest or report_digest(report), harness_digest=report.provenance.harness_digest,
                         card_id=report.card_id, problem=report.problem, verdict=report.verdict,
                         recorded_by=recorded_by, source=source,
                         report_json=(json.dumps(signed._sent, separators=(",", ":"), allow_nan=True)
                                      if signed._sent is not None else report.model_dump_json()))


def envelope_json(report_json: str, digest: str, signature: Signature | None) -> str:
    """The SignedReport JSON of a stored report (the report text exactly as stored)."""
    tail = f',"signature":{signature.model_dump_json()}' if signature is not None else ""
    return f'{{"report":{report_json},"digest":"{digest}"{tail}}}'



def sign_fresh(report: VerificationReport, signature: Signature | None) -> SignedReport:
    """The envelope for a report this server's verifier just produced."""
    return SignedReport(report=report, digest=report_digest(report), signature=signature)



def shape_key(text: str) -> str:
    try:
        return shape_text(parse_shape_text(text))
    except ValueError:
        return text

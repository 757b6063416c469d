"""Re-verification: check each card's claims on this box and say what holds.

Per card, in order (stages in ``reverify_stages``, prerequisites in ``reverify_probes``):
1. prerequisites: installed package versions against the card's PEP 440 specifiers, and
   capabilities through the card's own probes (``kernels/<folder>/probes.py``);
2. static gates where FlyDSL and an ld.lld for gfx950 are present;
3. verifier: on a GPU, the card's reference arm against its baseline on the card's
   verifier shapes; on a box without a GPU not applicable (the reason says so);
4. claims against the card's floor and recorded figures.

On a box with no AMD GPU (``emulated_runner`` set; the service sets it) the card's ROCm
reference arm also runs on the ``gfx950-emulated`` platform (FlyDSL code objects on the
gfx950 emulator, parity only, at the problem's emulation-sized shapes): that is a second
``CardRun`` of its own, with the platform ``cpu/gfx950-emulated`` (never an MI355X result),
its own signed report and status row. The capability probes see both verifier reports
(``ProbeContext.verifier_reports``): the project's own reference kernel passing its gates
and its emulated (or gfx950 hardware) parity satisfies a capability.

The per-card status is defined in ``claims.py``. The verifier's report goes through the
one report -> records seam (``report_records``); the service records statuses, results
and report together, signed. Heavy imports (torch, flydsl) happen only inside the stage
that needs them.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skill_server.cards.schema import ParsedCard
from skill_server.ledger.models import PlatformInfo, ResultRecord, normalise_platform
from skill_server.ledger.report_records import ReportRejected, bind_report, derive_records
from skill_server.reverify.models import (
    CardReverification,
    PrerequisiteCheck,
    ProgressFn,
    ReverifyProgress,
    ReverifyRun,
    ShapeOutcome,
    StageResult,
    short,
)
from skill_server.reverify.probes import ProbeContext, ProbeLoadError, card_probes, check_prerequisite, probes_path
from skill_server.reverify.stages import (
    GateRunner,
    VerifierRunner,
    claims_stage,
    decide,
    default_gate_runner,
    default_verifier_runner,
    run_gate_stage,
    verifier_outcomes,
)
from verifiers.gfx950.emulator.verifier_arms import toolchain_problem
from verifiers.options import VerifyOptions
from verifiers.problem import EMULATED_PLATFORM, for_platform, load_problem
from verifiers.provenance import emulated_platform

__all__ = ["CardRun", "Reverifier", "ReverifyProgress", "ReverifyRun", "decide", "now"]


@dataclass
class CardRun:
    """One card's outcome, the verifier report it ran (``VerificationReport`` or None) and
    the ledger records derived from that report."""

    result: CardReverification
    report: Any = None
    records: list[ResultRecord] = field(default_factory=list)
    platform: PlatformInfo | None = None  # None: the box's own platform
    emulated: "CardRun | None" = None  # the same card on gfx950-emulated (a run of its own)


@dataclass
class Reverifier:
    project_root: Path
    platform: PlatformInfo
    recorded_by: str
    git_rev: str | None = None
    probes: dict[str, Callable] | None = None  # replaces every card's own probes (tests)
    gate_runner: GateRunner | None = default_gate_runner
    verifier_runner: VerifierRunner | None = default_verifier_runner
    # smoke runs (bench/reverify_h200.py --smoke): other shapes per card, the CPU arms, quick options
    shapes_override: dict[str, list[str]] | None = None
    verifier_on_cpu: bool = False
    verifier_options: Any = None
    # the card's ROCm reference arm on the gfx950-emulated platform (None: not run)
    emulated_runner: VerifierRunner | None = None

    def run(self, cards: list[ParsedCard], progress: ProgressFn | None = None):
        """Yield one ``CardRun`` per card, in order (so each can be recorded at once)."""
        for i, parsed in enumerate(cards, start=1):
            def say(stage: str, message: str, _i: int = i, _id: str = parsed.card.id) -> None:
                if progress is not None:
                    progress(ReverifyProgress(index=_i, total=len(cards), card_id=_id, stage=stage, message=message))
            run = self.reverify_card(parsed, say)
            yield run
            if run.emulated is not None:
                yield run.emulated

    def reverify_card(self, parsed: ParsedCard, say: Callable[[str, str], None] = lambda s, m: None) -> CardRun:
        card = parsed.card
        stages: list[StageResult] = []

        say("gates", "static gfx950 gates")
        gate_stage, reports = run_gate_stage(card, self.project_root, self.gate_runner)
        stages.append(gate_stage)
        say("gates", f"{gate_stage.status}: {short(gate_stage.reason, 100)}")

        say("verifier", "verifier")
        verifier_stage, shapes, report, records = self._verifier_stage(parsed, lambda m: say("verifier", m))
        stages.append(verifier_stage)
        say("verifier", f"{verifier_stage.status}: {short(verifier_stage.reason, 100)}")

        emulated = self._emulated_stage(parsed, lambda m: say("emulated", m))
        # prerequisites last: the probes may rest on this run's gates and verifier reports
        say("prerequisites", f"{len(card.prerequisites)} prerequisite(s)")
        runs = [r for r in (report, emulated[2] if emulated else None) if r is not None]
        pre_stage, checks = self._prerequisite_stage(parsed, reports, runs)
        stages.insert(0, pre_stage)
        say("prerequisites", stages[0].status)

        stages.append(claims_stage(parsed, self.platform, verifier_stage, shapes))
        status, reason = decide(stages)
        result = CardReverification(card_id=card.id, platform=self.platform.key, status=status, reason=reason,
                                    prerequisites=checks, stages=stages, shapes=shapes)
        say("done", status)
        run = CardRun(result=result, report=report, records=records)
        if emulated is not None:
            run.emulated = self._emulated_run(parsed, pre_stage, checks, gate_stage, emulated)
        return run

    # -- prerequisites -------------------------------------------------------------------
    def _prerequisite_stage(self, parsed: ParsedCard, gate_reports: list[Any], verifier_reports: list[Any] = ()
                            ) -> tuple[StageResult, list[PrerequisiteCheck]]:
        card = parsed.card
        ctx = ProbeContext(project_root=self.project_root, card_id=card.id, gate_reports=gate_reports,
                           verifier_reports=list(verifier_reports))
        where = str(probes_path(self.project_root, card).relative_to(self.project_root))
        load_problem = None
        if self.probes is not None:
            probes = self.probes
        else:
            try:
                probes = card_probes(self.project_root, card)
            except ProbeLoadError as exc:
                probes, load_problem = {}, str(exc)
        checks = [check_prerequisite(p, ctx, probes, where) for p in card.prerequisites]
        if load_problem:
            checks = [c if c.kind != "capability" else c.model_copy(update={"detail": f"{c.detail} ({load_problem})"})
                      for c in checks]
        missing = [c for c in checks if c.met is not True]
        return StageResult(
            name="prerequisites", status="MISSING" if missing else "PASS",
            reason=("; ".join(f"{c.name}: {c.detail}" for c in missing) if missing
                    else f"all {len(checks)} prerequisite(s) met" if checks else "the card declares no prerequisites")
        ), checks

    # -- verifier ----------------------------------------------------------------------
    def _verifier_stage(self, parsed: ParsedCard, say: Callable[[str], None]
                        ) -> tuple[StageResult, list[ShapeOutcome], Any, list[ResultRecord]]:
        card = parsed.card
        vb = card.verifier

        def not_run(status: str, reason: str) -> tuple[StageResult, list[ShapeOutcome], Any, list[ResultRecord]]:
            return StageResult(name="verifier", status=status, reason=reason), [], None, []  # type: ignore[arg-type]

        if vb is None:
            return not_run("NOT_APPLICABLE", "the card has no verifier binding")
        rt = self.platform.runtime
        shapes = list((self.shapes_override or {}).get(card.id, vb.shapes))
        if rt == "cpu" and not self.verifier_on_cpu:
            return not_run("NOT_APPLICABLE", f"no GPU on this box (runtime cpu): the card's verifier shapes "
                                             f"({', '.join(shapes) or 'none'}) run on a cuda or rocm GPU")
        baseline, candidate = vb.baseline.get(rt), vb.reference.get(rt)
        if not baseline or not candidate:
            return not_run("NOT_APPLICABLE", f"the verifier binding names no baseline/reference arm for runtime {rt}")
        if not shapes:
            return not_run("NOT_APPLICABLE", "the verifier binding lists no shapes")
        if self.verifier_runner is None:
            return not_run("SKIPPED", "verifier not requested in this run")
        try:
            extra = {"options": self.verifier_options} if self.verifier_options is not None else {}
            report = self.verifier_runner(vb, candidate, baseline, shapes, say, **extra)
        except ImportError as exc:
            return not_run("SKIPPED", f"the verifier is not available in this build: {exc}")
        except Exception as exc:  # noqa: BLE001 - the card's own binding could not run: a card failure
            return not_run("FAIL", f"the verifier could not run {vb.problem} ({candidate} vs {baseline}): "
                                   f"{type(exc).__name__}: {exc}")

        try:
            bind_report(report, {card.id: card}, card.id)
            derived = derive_records(report, card, self.recorded_by, "reverify")
        except (ReportRejected, AttributeError, TypeError) as exc:
            return not_run("FAIL", f"unusable verifier report: {exc}")
        stage, outcomes = verifier_outcomes(report, shapes, candidate, baseline)
        if derived.skipped:
            stage.reason += f"; result rows not stored in the ledger ({'; '.join(derived.skipped)})"
        return stage, outcomes, report, derived.records


    # -- gfx950-emulated ---------------------------------------------------------------
    def _emulated_stage(self, parsed: ParsedCard, say: Callable[[str], None]
                        ) -> tuple[StageResult, list[ShapeOutcome], Any, list[ResultRecord], PlatformInfo] | None:
        """The card's ROCm reference arm on gfx950-emulated, when this box has no AMD GPU, the
        problem declares an emulation and the box can compile and emulate; else None (the
        prerequisite probes then say what is missing)."""
        card, vb = parsed.card, parsed.card.verifier
        if self.emulated_runner is None or vb is None or self.platform.runtime == "rocm" or not vb.reference.get("rocm"):
            return None
        try:

            problem = for_platform(load_problem(vb.problem), EMULATED_PLATFORM)
        except (ImportError, ValueError):  # no emulation declared: nothing to run
            return None
        if toolchain_problem():
            return None
        candidate, baseline = vb.reference["rocm"], problem.emulation.baseline
        shapes = ["x".join(str(d[n]) for n in problem.dim_names) for d in problem.shapes]
        try:

            report = self.emulated_runner(vb, candidate, baseline, shapes, say,
                                          options=VerifyOptions(device=EMULATED_PLATFORM))
        except Exception as exc:  # noqa: BLE001 - the card's own emulation could not run: a card failure
            stage = StageResult(name="verifier", status="FAIL", reason=f"{EMULATED_PLATFORM}: the verifier could not run "
                                f"{vb.problem} (arm:{candidate} vs {baseline}): {type(exc).__name__}: {exc}")
            return stage, [], None, [], emulated_platform()

        platform = emulated_platform(report.provenance.device_name)
        try:
            bind_report(report, {card.id: card}, card.id)
            derived = derive_records(report, card, self.recorded_by, "reverify")
        except (ReportRejected, AttributeError, TypeError) as exc:
            return StageResult(name="verifier", status="FAIL", reason=f"unusable emulated verifier report: {exc}"), \
                [], None, [], platform
        stage, outcomes = verifier_outcomes(report, shapes, candidate, baseline)
        stage.reason = f"{EMULATED_PLATFORM} (CPU, parity only, not timed): {stage.reason}"
        return stage, outcomes, report, derived.records, platform

    def _emulated_run(self, parsed: ParsedCard, pre_stage: StageResult, checks: list[PrerequisiteCheck],
                      gate_stage: StageResult, emulated: tuple) -> CardRun:
        stage, outcomes, report, records, platform = emulated
        platform = normalise_platform(platform)
        stages = [pre_stage, gate_stage, stage, claims_stage(parsed, platform, stage, outcomes)]
        status, reason = decide(stages)
        result = CardReverification(card_id=parsed.card.id, platform=platform.key, status=status, reason=reason,
                                    prerequisites=checks, stages=stages, shapes=outcomes)
        return CardRun(result=result, report=report, records=records, platform=platform)


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)

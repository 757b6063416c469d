"""The stages of a card's re-verification and how they decide its status.

- gates: the static gfx950 gates (``verifiers.gfx950.check.check_kernel``) where FlyDSL
  and an ld.lld for gfx950 are present and the card's kernel folder declares targets;
- verifier: the card's reference arm against its baseline on the card's verifier shapes
  (``verifiers.api.verify``); on a box without a GPU not applicable (never a pass);
- claims: on a platform the card makes performance claims for (its generation is in
  ``match.gens``) each shape must measure FASTER, at or above
  ``expects.isolated_speedup_min``, and not clearly below the card's recorded figure.

``decide`` maps stage outcomes to one status (precedence in ``claims.py``).
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from skill_server.card_verifier import run_card_verifier
from skill_server.cards.artifacts import parse_artifact
from skill_server.cards.schema import Card, ParsedCard, VerifierBinding
from skill_server.cards.vocabulary import VocabularyError, vocabulary
from skill_server.ledger.models import PlatformInfo, parse_shape_text, shape_text
from skill_server.reverify.claims import ReverifyStatus
from skill_server.reverify.models import ShapeOutcome, StageResult, short
from verifiers.gfx950 import env as gfx950_env
from verifiers.gfx950.check import check_kernel

DRIFT_TOLERANCE = 0.05  # relative; a card's expects.noise_floor widens it
GateRunner = Callable[[str], list[Any]]
VerifierRunner = Callable[..., Any]


def default_gate_runner(folder: str) -> list[Any]:

    return check_kernel(folder)


def default_verifier_runner(binding: VerifierBinding, candidate: str, baseline: str, shapes: list[str],
                            progress: Callable[[str], None] | None, options: Any = None) -> Any:
    """The server's one verify entry point (``run_card_verifier``) with the card's reference
    arm as the candidate and the binding's baseline for the platform."""
    def forward(done: int, total: int, message: str) -> None:
        if progress is not None:
            progress(f"{100 * done // max(total, 1)}% {message}")

    return run_card_verifier(binding, f"arm:{candidate}", baseline=baseline, shapes=shapes, options=options,
                             progress=forward)


# ============================================================================== gates
def run_gate_stage(card: Card, project_root: Path, runner: GateRunner | None) -> tuple[StageResult, list[Any]]:
    folder = card.verifier.problem if card.verifier else card.id
    if runner is None:
        return StageResult(name="gates", status="SKIPPED", reason="static gates not requested in this run"), []
    if not (project_root / "kernels" / folder / "gfx950_targets.py").is_file():
        return StageResult(name="gates", status="NOT_APPLICABLE",
                           reason=f"kernels/{folder} declares no gfx950 compile targets (gfx950_targets.py)"), []
    if runner is default_gate_runner:
        problem = gfx950_env.toolchain_problem()
        if problem:
            return StageResult(name="gates", status="SKIPPED", reason=f"FlyDSL cannot compile for gfx950 here: {problem}"), []
    try:
        reports = list(runner(folder))
    except NotImplementedError:
        return StageResult(name="gates", status="SKIPPED", reason="the static gfx950 gates are not implemented in this build"), []
    except LookupError as exc:  # NoTargetsError
        return StageResult(name="gates", status="NOT_APPLICABLE", reason=str(exc)), []
    except Exception as exc:  # noqa: BLE001 - infrastructure, not the card: never a pass, never a card failure
        return StageResult(name="gates", status="SKIPPED", reason=f"the gate run raised {type(exc).__name__}: {exc}"), []
    detail = [{"target": getattr(r, "target", "?"), "status": getattr(r, "status", "?"),
               "failed": list(getattr(r, "failed", []) or []), "reason": getattr(r, "reason", None)} for r in reports]
    failed = [r for r in reports if getattr(r, "status", None) == "FAIL" and not getattr(r, "ok", False)]
    if failed:
        what = "; ".join(f"{r.target}: {', '.join(r.failed) or r.reason or 'failed'}" for r in failed)
        return StageResult(name="gates", status="FAIL", reason=f"static gfx950 gates failed in kernels/{folder}: {what}",
                           detail=detail), reports
    if not reports or all(getattr(r, "status", None) == "SKIPPED" for r in reports):
        why = next((r.reason for r in reports if getattr(r, "reason", None)), "no report")
        return StageResult(name="gates", status="SKIPPED", reason=f"gates skipped: {why}", detail=detail), reports
    return StageResult(name="gates", status="PASS", detail=detail,
                       reason=f"{sum(1 for r in reports if r.status == 'PASS')} gfx950 target(s) in kernels/{folder} pass"), reports


# =========================================================================== verifier
def verifier_outcomes(report: Any, shapes: list[str], candidate: str, baseline: str
                      ) -> tuple[StageResult, list[ShapeOutcome]]:
    """The verifier stage from a ``VerificationReport``: every requested shape must have a
    result, and no shape (hidden ones included) may FAIL. A shape the verifier could not
    decide (ERROR: the harness, the box) is no evidence against the card: the stage is then
    SKIPPED with the reason, never FAIL."""
    problems: list[str] = []
    undecided: list[str] = []
    by_shape = {}
    for s in report.shape_reports:
        if s.hidden:  # parity-only shapes: a failure there fails the card, nothing to time
            if s.verdict == "FAIL":
                problems.append(f"hidden shape {s.shape}: {s.verdict} ({'; '.join(_problems(s)) or 'parity'})")
            elif s.verdict == "ERROR":
                undecided.append(f"hidden shape {s.shape}: ERROR ({'; '.join(_problems(s)) or 'harness'})")
            continue
        # the report's label spells only the values (16384x2880x2880x128x4); its dims name them
        # (M=16384,...): a requested shape may be spelled either way
        by_shape[_key(s.shape)] = s
        if s.dims:
            by_shape[shape_text(dict(s.dims))] = s
    outcomes = []
    for text in shapes:
        key = _key(text)
        s = by_shape.get(key)
        if s is None:
            problems.append(f"no result for shape {text}")
            outcomes.append(ShapeOutcome(shape=key, reason="the verifier returned no result for this shape"))
            continue
        ab = s.timing.ab if s.timing is not None else None
        interval = (ab.ci_low, ab.ci_high) if ab is not None and ab.ci_low and ab.ci_high else None
        outcomes.append(ShapeOutcome(shape=key, verdict=s.verdict, speedup=ab.speedup if ab else None, interval=interval,
                                     reason=_undecided_reason(s)))
        if s.verdict == "FAIL":
            problems.append(f"{text}: {s.verdict} ({'; '.join(_problems(s)) or 'parity'})")
        elif s.verdict == "ERROR":
            undecided.append(f"{text}: ERROR ({'; '.join(_problems(s)) or 'harness'})")
    detail = [o.model_dump(mode="json") for o in outcomes]
    if problems:
        return StageResult(name="verifier", status="FAIL", reason="; ".join(problems), detail=detail), outcomes
    if undecided:
        return StageResult(name="verifier", status="SKIPPED", detail=detail,
                           reason="the verifier could not decide here (not evidence against the card): "
                                  + "; ".join(undecided)), outcomes
    return StageResult(name="verifier", status="PASS", detail=detail,
                       reason=f"parity held on {len(outcomes)} shape(s): {candidate} vs {baseline}"), outcomes


def _undecided_reason(s: Any) -> str:
    """Why a shape has no speed verdict (INCONCLUSIVE, ERROR, FAIL): the stages that say so; empty
    for a decided shape. A user reading INCONCLUSIVE must learn whether the box or the arms were the cause."""
    if s.verdict in ("FASTER", "SLOWER", "NO_DIFFERENCE"):
        return ""
    named = [f"{name}: {st.reason}" for name, st in s.stages.items()
             if st.status in ("FAIL", "ERROR") and st.reason]
    timing = s.stages.get("timing")
    if s.verdict == "INCONCLUSIVE" and timing is not None and timing.reason and timing.status not in ("FAIL", "ERROR"):
        named.append(f"timing: {timing.reason}")  # the timing stage itself PASSes: the box gave no verdict
    return short("; ".join(named), 600)


def _problems(s: Any) -> list[str]:
    return [f"{name}: {st.reason or st.status}" for name, st in s.stages.items() if st.status in ("FAIL", "ERROR")]


def _key(text: str) -> str:
    try:
        return shape_text(parse_shape_text(text))
    except (ValueError, TypeError):
        return str(text)


# ============================================================================= claims
def recorded_speedups(parsed: ParsedCard) -> dict[str, float]:
    """The card's numeric per-shape figures from its validation artifacts (shape text -> speedup)."""
    out: dict[str, float] = {}
    for path in sorted(parsed.folder.glob("*.y*ml")):
        artifact, _ = parse_artifact(path)
        if artifact is None:
            continue
        for m in artifact.measurements:
            if m.speedup and m.shape and m.scope in ("isolated", "segment"):
                out.setdefault(shape_text(dict(m.shape)), float(m.speedup))
    return out


def claims_stage(parsed: ParsedCard, platform: PlatformInfo, verifier: StageResult,
                 shapes: list[ShapeOutcome]) -> StageResult:
    card = parsed.card
    if verifier.status != "PASS":
        return StageResult(name="claims", status="NOT_APPLICABLE",
                           reason=f"not compared: the verifier stage is {verifier.status}")
    gens = card.match.gens
    gen = platform.generation
    claimed = "*" in gens or (gen is not None and any(_same_gen(gen, g) for g in gens))
    floor = card.expects.isolated_speedup_min
    if not claimed:
        for o in shapes:
            o.reason = "recorded, not compared: the card claims performance on " + ", ".join(gens)
        return StageResult(name="claims", status="NOT_APPLICABLE",
                           reason=f"the card's performance claims are for {', '.join(gens)}; measured on "
                                  f"{platform.key}: recorded, not compared")
    recorded = recorded_speedups(parsed)
    tol = max(DRIFT_TOLERANCE, card.expects.noise_floor or 0.0)
    drifted, untimed = [], []
    for o in shapes:
        o.floor = floor
        if o.verdict == "INCONCLUSIVE":
            o.reason = "not compared: nothing was timed"
            untimed.append(o.shape)
            continue
        o.recorded_speedup = recorded.get(o.shape)
        reasons = []
        if o.verdict != "FASTER":
            reasons.append(f"verdict {o.verdict}, the card claims a speedup")
        if o.speedup is None or o.speedup < floor:
            reasons.append(f"speedup {o.speedup} below the card's floor {floor}")
        if o.recorded_speedup and o.speedup:
            best = o.interval[1] if o.interval else o.speedup
            if best < o.recorded_speedup * (1 - tol):
                reasons.append(f"{best:.3f}x is more than {tol:.0%} below the card's {o.recorded_speedup}x")
        o.holds = not reasons
        o.reason = "; ".join(reasons) or f"{o.speedup}x >= floor {floor}"
        if reasons:
            drifted.append(f"{o.shape}: {o.reason}")
    if drifted:
        return StageResult(name="claims", status="DRIFTED", reason="; ".join(drifted))
    if untimed:
        return StageResult(name="claims", status="NOT_APPLICABLE",
                           reason=f"timing inconclusive (nothing timed) on {', '.join(untimed)}: the speedup "
                                  "claims could not be compared")
    return StageResult(name="claims", status="CONFIRMED",
                       reason=f"{len(shapes)} shape(s) FASTER at >= {floor}x on {platform.key}")


def _same_gen(a: str, b: str) -> bool:
    try:
        return vocabulary().generation(a) == vocabulary().generation(b)
    except VocabularyError:
        return a == b


# ============================================================================= decide
def decide(stages: list[StageResult]) -> tuple[ReverifyStatus, str]:
    """The card's status from its stages (precedence as documented in ``claims.py``)."""
    by = {s.name: s for s in stages}
    failed = [s for s in stages if s.status == "FAIL"]
    if failed:
        return "FAILED", "; ".join(f"{s.name}: {s.reason}" for s in failed)
    claims = by.get("claims")
    if claims and claims.status == "DRIFTED":
        return "DRIFTED", claims.reason
    pre = by.get("prerequisites")
    if pre and pre.status == "MISSING":
        return "PREREQUISITE_MISSING", pre.reason
    if claims and claims.status == "CONFIRMED":
        gates = by.get("gates")
        note = f"; static gates not run: {gates.reason}" if gates and gates.status == "SKIPPED" else ""
        return "CONFIRMED", claims.reason + note
    untested = [s for s in stages if s.status in ("NOT_APPLICABLE", "SKIPPED") and s.name in ("verifier", "claims")]
    reason = "; ".join(f"{s.name}: {s.reason}" for s in untested) or "the claims could not be tested here"
    return "NOT_APPLICABLE_HERE", reason


__all__ = ["DRIFT_TOLERANCE", "claims_stage", "decide", "default_gate_runner", "default_verifier_runner",
           "recorded_speedups", "run_gate_stage", "short", "verifier_outcomes"]

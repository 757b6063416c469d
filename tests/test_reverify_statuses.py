"""Re-verification statuses: each stage's outcome maps to exactly one documented status,
results go to the ledger, and answers stop presenting drifted or failed claims as current."""
from __future__ import annotations

import pytest
from ledger_support import (BLOCKSCALE, CPU, GFX950, H200, MOE, MXFP8, make_project, report_platform,
                            shape_report, verification_report)

from skill_server.reverify.claims import worst
from skill_server.ledger.results import PlatformInfo
from skill_server.reverify.models import StageResult
from skill_server.reverify.stages import decide
from skill_server.service.facade import SkillService
from verifiers.gfx950.gates import TargetGates, GateResult

ALL_MET = {name: (lambda ctx: {"met": True, "detail": "present (test)"}) for name in
           ("flydsl_software_blockscale_core", "gfx950_scaled_mfma", "flydsl_moe_fp8_partial_store")}


def gates_pass(folder):
    return [TargetGates(folder=folder, target="t0", status="PASS", gates=[GateResult(name="compiled", status="PASS", detail="ok")])]


def gates_fail(folder):
    return [TargetGates(folder=folder, target="t0", status="FAIL", gates=[
        GateResult(name="scaled_mfma", status="FAIL", detail="v_mfma_scale with real scales in a block-scale kernel")])]


def verifier_with(speedups: dict[str, float], verdict: str | None = None, parity_ok: bool = True,
                  hidden_fail: bool = False, platform: dict = GFX950):
    """A stand-in for verifiers.api.verify returning a real VerificationReport measured on
    ``platform``: per-shape speedups (default 2.0x, above every figure the cards record),
    verdicts that follow them unless one is forced."""
    calls = []

    def run(binding, candidate, baseline, shapes, progress):
        problem = binding.problem  # the card's verifier binding, as the Reverifier passes it
        calls.append((problem, candidate, baseline, list(shapes)))
        progress("timing")
        rows = [shape_report(s, speedups.get(s, 2.0), verdict, parity_ok, baseline=baseline) for s in shapes]
        if hidden_fail:
            rows.append(shape_report("hidden-1", None, parity_ok=False, hidden=True))
        return verification_report(problem, rows, candidate=f"arm:{candidate}", **report_platform(platform))

    run.calls = calls
    return run


@pytest.fixture
def svc(tmp_path):
    skills = make_project(tmp_path)
    for cid in (BLOCKSCALE, MXFP8):  # the gate stage runs only for folders that declare targets
        (tmp_path / "kernels" / cid / "gfx950_targets.py").write_text("TARGETS = []\n")
    return SkillService(skills, check_interval=0.0, ledger_path=tmp_path / "l.sqlite")


def run(svc, card=BLOCKSCALE, platform=GFX950, probes=ALL_MET, gates=gates_pass, verifier=None, **kw):
    events = []
    report = svc.reverify(card_id=card, progress=events.append, platform=PlatformInfo(**platform), probes=probes,
                          gate_runner=gates, verifier_runner=verifier or verifier_with({}), recorded_by="tester", **kw)
    assert events and events[-1].stage == "done" and all(e.total == (1 if card else 3) for e in events)
    return report


def test_confirmed_needs_every_shape_faster_at_the_floor_on_a_claimed_platform(svc):
    v = verifier_with({})
    report = run(svc, verifier=v)
    c = report.cards[0]
    assert c.status == "CONFIRMED" and c.platform == "rocm/gfx950"
    assert v.calls == [(BLOCKSCALE, "flydsl_recipe", "ck_blockscale",
                        ["4096x65536x1536", "4096x2048x7168", "16384x1536x7168", "16384x7168x768"])]
    assert all(o.holds and o.floor == 1.05 for o in c.shapes)
    hist = svc.get_validation_history(BLOCKSCALE)
    assert {r.shape_text for r in hist.results} == {o.shape for o in c.shapes}
    assert all(r.source == "reverify" and r.recorded_by == "tester" for r in hist.results)
    assert hist.reverifications[0].status == "CONFIRMED" and hist.reverification.claims_current is True


def test_below_the_speedup_floor_is_drifted_and_answers_say_so(svc):
    report = run(svc, verifier=verifier_with({"4096x2048x7168": 1.02}))
    c = report.cards[0]
    assert c.status == "DRIFTED" and "4096x2048x7168" in c.reason and "below the card's floor 1.05" in c.reason
    match_rv = svc.get_recipe(BLOCKSCALE).reverification
    assert match_rv.claims_current is False and "DRIFTED on rocm/gfx950" in match_rv.caveats[0]


def test_clearly_below_the_cards_recorded_figure_is_drifted_even_above_the_floor(svc):
    # the artifact records 1.4541x for 16384x7168x768; 1.20x clears the 1.05 floor but not the figure
    c = run(svc, verifier=verifier_with({"16384x7168x768": 1.20})).cards[0]
    assert c.status == "DRIFTED" and "below the card's 1.4541x" in c.reason


def test_a_not_faster_verdict_is_drifted(svc):
    c = run(svc, verifier=verifier_with({"4096x2048x7168": 1.0})).cards[0]
    assert c.status == "DRIFTED" and "verdict NO_DIFFERENCE" in c.reason


def test_parity_failure_is_failed_whatever_the_speed(svc):
    c = run(svc, verifier=verifier_with({}, parity_ok=False)).cards[0]
    assert c.status == "FAILED" and "verifier" in c.reason and "parity: 12 elements out of tolerance" in c.reason


def test_a_failing_static_gate_is_failed(svc):
    c = run(svc, gates=gates_fail).cards[0]
    assert c.status == "FAILED" and "scaled_mfma" in c.reason


def test_an_impossible_verifier_row_is_not_stored_and_says_why(svc):
    c = run(svc, verifier=verifier_with({"4096x2048x7168": 1.2}, verdict="SLOWER")).cards[0]
    verifier = next(s for s in c.stages if s.name == "verifier")
    assert "not stored" in verifier.reason and "SLOWER with speedup 1.2" in verifier.reason
    assert "4096x2048x7168" not in {r.shape_text for r in svc.get_validation_history(BLOCKSCALE).results}


def test_a_parity_failure_on_a_hidden_shape_fails_the_card(svc):
    c = run(svc, verifier=verifier_with({}, hidden_fail=True)).cards[0]
    assert c.status == "FAILED" and "hidden shape hidden-1: FAIL" in c.reason
    results = svc.get_validation_history(BLOCKSCALE).results
    # the visible shapes are recorded, as failures: a hidden parity failure fails the candidate everywhere
    assert len(results) == 4 and {r.verdict for r in results} == {"FAIL"}
    assert all(r.stages["hidden_parity"] == "FAIL" and r.speedup is None for r in results)


def test_an_inconclusive_timing_cannot_confirm_the_claims(svc):
    def untimed(binding, candidate, baseline, shapes, progress):
        return verification_report(binding.problem, [shape_report(s, None, baseline=baseline) for s in shapes])

    c = run(svc, verifier=untimed).cards[0]
    assert c.status == "NOT_APPLICABLE_HERE" and "timing inconclusive" in c.reason
    assert svc.get_validation_history(BLOCKSCALE).results == []  # nothing timed, nothing recorded


def test_failed_shapes_are_recorded_as_failures_without_timing(svc):
    run(svc, verifier=verifier_with({}, parity_ok=False))
    results = svc.get_validation_history(BLOCKSCALE).results
    assert len(results) == 4 and {r.verdict for r in results} == {"FAIL"}
    r = results[0]
    assert r.speedup is None and r.parity_passed is False and r.parity["min_cosine"] == 0.5
    assert r.stages["parity"] == "FAIL" and "12 elements out of tolerance" in r.notes


def test_a_verifier_that_cannot_run_the_cards_binding_is_failed(svc):
    def broken(*a, **k):
        raise RuntimeError("problem flydsl_fp8_blockscale_gemm has no arm flydsl_4wave")

    c = run(svc, verifier=broken).cards[0]
    assert c.status == "FAILED" and "no arm flydsl_4wave" in c.reason


def test_a_missing_prerequisite_is_reported_with_its_fallback(svc):
    probes = dict(ALL_MET, flydsl_software_blockscale_core=lambda ctx: {"met": False, "detail": "not in flydsl 0.5.0"})
    (svc.project_root / "kernels" / BLOCKSCALE / "flydsl_gemm.py").unlink()
    c = run(svc, probes=probes).cards[0]
    assert c.status == "PREREQUISITE_MISSING"
    check = next(p for p in c.prerequisites if p.name == "flydsl_software_blockscale_core")
    assert check.met is False and "kernels/flydsl_fp8_blockscale_gemm/flydsl_gemm.py" in check.detail
    assert check.fallback_present is False  # the throw-away project no longer has that file
    # a failure still outranks the missing prerequisite
    assert run(svc, probes=probes, gates=gates_fail).cards[0].status == "FAILED"


def test_a_capability_without_a_probe_is_not_confirmed(svc):
    c = run(svc, card=MXFP8, probes={}).cards[0]
    assert c.status == "PREREQUISITE_MISSING" and "no probe for capability 'gfx950_scaled_mfma'" in c.reason


def test_a_box_without_a_gpu_cannot_test_the_claims(svc):
    calls = []
    report = run(svc, card=MXFP8, platform=CPU, verifier=lambda *a: calls.append(a))
    c = report.cards[0]
    assert calls == [] and c.status == "NOT_APPLICABLE_HERE"
    verifier = next(s for s in c.stages if s.name == "verifier")
    assert verifier.status == "NOT_APPLICABLE" and "no GPU on this box" in verifier.reason
    assert svc.get_recipe(MXFP8).reverification.claims_current is None


def test_another_gpu_generation_records_results_but_does_not_judge_gfx950_claims(svc):
    v = verifier_with({"4096x2048x7168": 0.9}, platform=H200)
    c = run(svc, platform=H200, verifier=v).cards[0]
    assert v.calls[0][1:3] == ("triton_twin", "cublas_blockscale")  # the card's cuda arms
    assert c.status == "NOT_APPLICABLE_HERE" and "claims are for gfx950" in c.reason
    assert len(svc.get_validation_history(BLOCKSCALE, platform="cuda").results) == 4


def test_all_cards_and_no_recording(svc):
    report = run(svc, card=None, record=False)
    assert [c.card_id for c in report.cards] == sorted([BLOCKSCALE, MXFP8, MOE]) and report.ledger is None
    assert svc.get_validation_history(BLOCKSCALE).reverifications == []
    moe = next(c for c in report.cards if c.card_id == MOE)
    gates = next(s for s in moe.stages if s.name == "gates")
    assert gates.status == "NOT_APPLICABLE" and "declares no gfx950 compile targets" in gates.reason
    assert "stages" not in report.table() and BLOCKSCALE in report.table()


def test_decide_applies_the_documented_precedence():
    def st(name, status):
        return StageResult(name=name, status=status, reason=f"{name} {status}")

    assert decide([st("prerequisites", "MISSING"), st("gates", "FAIL"), st("claims", "DRIFTED")])[0] == "FAILED"
    assert decide([st("prerequisites", "MISSING"), st("verifier", "PASS"), st("claims", "DRIFTED")])[0] == "DRIFTED"
    assert decide([st("prerequisites", "MISSING"), st("verifier", "PASS"), st("claims", "CONFIRMED")])[0] == "PREREQUISITE_MISSING"
    status, reason = decide([st("prerequisites", "PASS"), st("gates", "SKIPPED"), st("verifier", "PASS"),
                             st("claims", "CONFIRMED")])
    assert status == "CONFIRMED" and "static gates not run: gates SKIPPED" in reason
    assert decide([st("prerequisites", "PASS"), st("verifier", "NOT_APPLICABLE"),
                   st("claims", "NOT_APPLICABLE")])[0] == "NOT_APPLICABLE_HERE"
    assert worst(["CONFIRMED", "NOT_APPLICABLE_HERE", "DRIFTED"]) == "DRIFTED"


@pytest.mark.parametrize("card", [BLOCKSCALE, MXFP8, MOE])
def test_on_the_gfx950_box_the_cards_own_probes_are_met_by_the_projects_kernels(svc, card):
    """Issue 17.4: on the box a card is for, its capability prerequisites are met by the
    project's own FlyDSL reference arm passing parity on the gfx950 device (the card's real
    probes; FlyDSL 0.5.0 ships no such kernel) -- never PREREQUISITE_MISSING there."""
    from verifiers.gfx950.env import toolchain_problem

    if toolchain_problem() is not None:
        pytest.skip(f"FlyDSL / ld.lld for gfx950 not installed: {toolchain_problem()}")
    c = run(svc, card=card, probes=None).cards[0]
    caps = [p for p in c.prerequisites if p.kind == "capability"]
    assert caps and all(p.met is True for p in caps), [p.detail for p in caps]
    assert all("passed parity on this gfx950 device (AMD Instinct MI355X)" in p.detail for p in caps), [p.detail for p in caps]
    assert c.status not in ("PREREQUISITE_MISSING", "FAILED"), c.reason
    # the same card on an MI300X (gfx942): the hardware run is no gfx950 evidence
    c = run(svc, card=card, probes=None, platform={**GFX950, "device": "AMD Instinct MI300X", "generation": "gfx942"},
            verifier=verifier_with({}, platform={**GFX950, "device": "AMD Instinct MI300X", "generation": "gfx942"})).cards[0]
    assert c.status == "PREREQUISITE_MISSING"


def test_a_verifier_that_could_not_decide_is_no_evidence_against_the_card(svc):
    """ERROR shapes (the harness or the box could not decide, e.g. clocks on a loaded box): the
    verifier stage is SKIPPED with the reason, the card is not FAILED, and no result is stored."""
    from verifiers.report import StageResult as VerifierStage

    def undecided(binding, candidate, baseline, shapes, progress):
        rows = []
        for s in shapes:
            row = shape_report(s, None, baseline=baseline)
            row.verdict = "ERROR"
            row.stages["timing"] = VerifierStage(name="timing", status="ERROR", reason="the box could not time")
            rows.append(row)
        return verification_report(binding.problem, rows)

    c = run(svc, verifier=undecided).cards[0]
    verifier = next(s for s in c.stages if s.name == "verifier")
    assert c.status == "NOT_APPLICABLE_HERE" and verifier.status == "SKIPPED", (c.status, c.reason)
    assert "could not decide" in verifier.reason and "the box could not time" in verifier.reason
    assert svc.get_validation_history(BLOCKSCALE).results == []


def test_an_inconclusive_shape_says_why_in_the_reverify_answer():
    """A reverify answer that says INCONCLUSIVE without the reason leaves the user guessing
    whether the box or the arms were at fault (the H200 run of 2026-12-02 printed none)."""
    from verifiers.report import ShapeReport, StageResult as VStage, VerificationReport
    from skill_server.reverify.stages import verifier_outcomes

    why = "INCONCLUSIVE: baseline A: 9 of 84 calls were queued after the judge's ready had fired"
    shapes = [ShapeReport(shape="1024x5120x2048", verdict="INCONCLUSIVE",
                          stages={"parity": VStage(name="parity", status="PASS"),
                                  "timing": VStage(name="timing", status="PASS", reason=why)}),
              ShapeReport(shape="4096x8192x1280", verdict="SLOWER",
                          stages={"timing": VStage(name="timing", status="PASS", reason="speedup 0.66")})]
    report = VerificationReport(problem="p", candidate="arm:x", shape_reports=shapes)
    _, outcomes = verifier_outcomes(report, ["1024x5120x2048", "4096x8192x1280"], "x", "y")
    assert why in outcomes[0].reason and outcomes[0].reason.startswith("timing: ")
    assert outcomes[1].reason == ""  # a decided shape needs no excuse


def test_a_shape_with_more_than_three_dims_is_found_in_the_report():
    """The MoE card's shapes are written M=..,N=..,K=..,E=..,top_k=..; the verifier labels its
    shape reports with the values only (16384x2880x2880x128x4). The H200 reverify of
    2026-12-02 said "no result for shape" for both MoE shapes although both had been verified."""
    from verifiers.report import ShapeReport, StageResult as VStage, VerificationReport
    from skill_server.reverify.stages import verifier_outcomes

    dims = {"M": 16384, "N": 2880, "K": 2880, "E": 128, "top_k": 4}
    shape = ShapeReport(shape="16384x2880x2880x128x4", dims=dims, verdict="FASTER",
                        stages={"timing": VStage(name="timing", status="PASS", reason="speedup 1.015")})
    stage, outcomes = verifier_outcomes(VerificationReport(problem="p", candidate="arm:x", shape_reports=[shape]),
                                        ["M=16384,N=2880,K=2880,E=128,top_k=4"], "x", "y")
    assert stage.status == "PASS", stage.reason
    assert outcomes[0].verdict == "FASTER" and outcomes[0].reason == ""

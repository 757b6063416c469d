"""The service over the ledger: record, history, export, and honest claims on every answer."""
from __future__ import annotations

import json

import pytest
from ledger_support import BLOCKSCALE, CPU, H200, MXFP8, make_project, record

from skill_server.cards.artifacts import parse_artifact
from skill_server.matching.hotspot import Hotspot
from skill_server.ledger.results import Ledger, PlatformInfo, ReverificationRow
from skill_server.service.facade import ServiceError, SkillService

HOTSPOT = Hotspot(op_name="gemm_a8w8_blockscale_bpreshuffle", gen="MI355X", dtype="fp8_e4m3",
                  scale_format="fp32_block", regime="prefill", shape={"M": 4096, "N": 2048, "K": 7168})


@pytest.fixture
def svc(tmp_path):
    return SkillService(make_project(tmp_path), check_interval=0.0, ledger_path=tmp_path / "var" / "ledger.sqlite")


def status_row(status: str, platform=None, card=BLOCKSCALE, reason="because"):
    return ReverificationRow(card_id=card, platform=PlatformInfo(**(platform or {
        "device": "AMD Instinct MI355X", "generation": "gfx950", "runtime": "rocm"})), status=status, reason=reason,
        recorded_by="test")


def test_record_then_history_through_the_service(svc):
    receipt = svc.record_result(record())
    assert receipt.card_ids == [BLOCKSCALE] and receipt.ledger.endswith("ledger.sqlite")
    h = svc.get_validation_history(BLOCKSCALE)
    assert [r.id for r in h.results] == receipt.ids and h.reverification.summary == "never re-verified"
    with pytest.raises(ServiceError, match="unknown card 'nope'"):
        svc.get_validation_history("nope")
    with pytest.raises(ServiceError, match="unknown card 'nope'"):
        svc.record_result(record(card_id="nope"))


def test_every_answer_shows_the_latest_status_per_platform(svc):
    svc.ledger.record_reverification([status_row("NOT_APPLICABLE_HERE", CPU, reason="no GPU"),
                                      status_row("CONFIRMED", reason="3 shapes FASTER")])
    svc.workspace.claims.invalidate()
    rv = svc.get_recipe(BLOCKSCALE).reverification
    assert rv.claims_current is True
    assert {(p.platform, p.status) for p in rv.platforms} == {("cpu/x86_64", "NOT_APPLICABLE_HERE"),
                                                              ("rocm/gfx950", "CONFIRMED")}
    listed = {s.id: s.reverification for s in svc.list_skills().skills}
    assert listed[BLOCKSCALE].claims_current is True and listed[MXFP8].summary == "never re-verified"
    match = svc.match_skill(HOTSPOT).matches[0]
    assert match.card_id == BLOCKSCALE and match.reverification.claims_current is True


def test_a_drifted_or_failed_claim_is_never_presented_as_current(svc):
    svc.ledger.record_reverification([status_row("CONFIRMED")])
    svc.ledger.record_reverification([status_row("DRIFTED", H200, reason="4096x2048x7168: 0.98x below the floor 1.05")])
    svc.workspace.claims.invalidate()
    match = svc.match_skill(HOTSPOT).matches[0]
    assert match.reverification.claims_current is False
    assert any("DRIFTED on cuda/sm_90" in c and "do not rely" in c for c in match.caveats)
    assert svc.get_recipe(BLOCKSCALE).reverification.claims_current is False
    # the latest row per platform decides: a later confirmation on that platform clears it
    svc.ledger.record_reverification([status_row("CONFIRMED", H200)])
    svc.workspace.claims.invalidate()
    assert svc.match_skill(HOTSPOT).matches[0].reverification.claims_current is True
    svc.ledger.record_reverification([status_row("FAILED", reason="parity: 12 elements out of tolerance")])
    svc.workspace.claims.invalidate()
    rv = svc.list_skills().skills[0].reverification
    assert rv.claims_current is False and "FAILED on rocm/gfx950" in rv.caveats[0]


def test_a_box_that_cannot_test_the_claims_leaves_them_unknown_not_current(svc):
    svc.ledger.record_reverification([status_row("PREREQUISITE_MISSING", CPU, reason="flydsl core absent"),
                                      status_row("NOT_APPLICABLE_HERE", H200)])
    svc.workspace.claims.invalidate()
    rv = svc.get_recipe(BLOCKSCALE).reverification
    assert rv.claims_current is None
    assert any("prerequisite missing on cpu/x86_64" in c for c in rv.caveats)


def test_the_match_path_reads_the_ledger_once_and_sees_writes_at_once(tmp_path, monkeypatch):
    svc = SkillService(make_project(tmp_path), check_interval=3600.0, ledger_path=tmp_path / "l.sqlite")
    calls = {"n": 0}
    real = Ledger.latest_statuses

    def counting(self):
        calls["n"] += 1
        return real(self)

    monkeypatch.setattr(Ledger, "latest_statuses", counting)
    svc.record_result(record())  # creates the ledger
    for _ in range(200):
        svc.match_skill(HOTSPOT)
    assert calls["n"] == 1
    rows = [status_row("DRIFTED")]
    svc.ledger.record_reverification(rows)
    # written behind the service's back: the cached answer stands until the check interval passes
    assert svc.match_skill(HOTSPOT).matches[0].reverification.claims_current is None
    svc.record_result(record())  # a write through the service invalidates
    assert svc.match_skill(HOTSPOT).matches[0].reverification.claims_current is False
    assert calls["n"] == 2


def test_writes_by_another_process_show_up_after_the_check_interval(tmp_path):
    path = tmp_path / "l.sqlite"
    svc = SkillService(make_project(tmp_path), check_interval=0.0, ledger_path=path)
    assert svc.match_skill(HOTSPOT).matches[0].reverification.claims_current is None
    Ledger(path).record_reverification([status_row("FAILED")])  # another writer, another connection
    assert svc.match_skill(HOTSPOT).matches[0].reverification.claims_current is False


# ------------------------------------------------------------------------- export
def test_export_writes_a_new_ledger_artifact_beside_the_card_that_lint_accepts(svc):
    svc.record_result([record(), record(shape="16384x7168x768", baseline={"name": "ck", "time_ms": 0.187491},
                                        candidate={"name": "fly", "time_ms": 0.128937}, speedup=1.4541,
                                        interval=[1.45, 1.456], scope="isolated", platform=H200)])
    res = svc.export_validation(BLOCKSCALE)
    assert res.path.endswith(f"skills/{BLOCKSCALE}/validation_ledger.yaml") and res.measurements == 2
    artifact, problems = parse_artifact(svc.skills_dir / BLOCKSCALE / "validation_ledger.yaml")
    assert problems == [] and artifact.source.kind == "ledger_export" and artifact.card_id == BLOCKSCALE
    m = {x.shape["M"]: x for x in artifact.measurements}
    assert m[16384].baseline.time_ms == 0.187491 and m[16384].speedup == 1.4541
    assert "rocm/gfx950" in m[4096].method and m[4096].verdict == "FASTER"
    transcribed, _ = parse_artifact(svc.skills_dir / BLOCKSCALE / "validation_gfx950.yaml")
    assert transcribed.source.kind == "transcribed_from_card"  # untouched
    assert not [p for p in svc.lint() if p.severity == "error" and "validation_ledger" in p.file]


def test_export_never_overwrites_the_transcribed_artifact_and_replaces_an_export_only_when_forced(svc, tmp_path):
    svc.record_result(record())
    card_dir = svc.skills_dir / BLOCKSCALE
    before = (card_dir / "validation_gfx950.yaml").read_text()
    for force in (False, True):
        with pytest.raises(ServiceError, match="transcribed_from_card artifact: the export never replaces it"):
            svc.export_validation(BLOCKSCALE, path=card_dir / "validation_gfx950.yaml", force=force)
    assert (card_dir / "validation_gfx950.yaml").read_text() == before
    svc.export_validation(BLOCKSCALE)
    with pytest.raises(ServiceError, match="earlier ledger export; pass force"):
        svc.export_validation(BLOCKSCALE)
    assert svc.export_validation(BLOCKSCALE, force=True).replaced is True
    with pytest.raises(ServiceError, match="outside the project"):
        svc.export_validation(BLOCKSCALE, path=tmp_path.parent / "elsewhere.yaml")
    with pytest.raises(ServiceError, match="folder of another card"):
        svc.export_validation(BLOCKSCALE, path=svc.skills_dir / MXFP8 / "x.yaml")
    with pytest.raises(ServiceError, match="no results for card"):
        svc.export_validation(MXFP8)


def test_export_keeps_times_out_of_the_checked_field_when_the_speedup_is_a_median_of_ratios(svc):
    # 0.2 / 0.19 = 1.0526; a median-of-ratios speedup of 1.07 differs by ~1.6%
    svc.record_result(record(speedup=1.07, interval=[1.05, 1.08]))
    svc.export_validation(BLOCKSCALE)
    artifact, problems = parse_artifact(svc.skills_dir / BLOCKSCALE / "validation_ledger.yaml")
    assert problems == []
    m = artifact.measurements[0]
    assert m.speedup == 1.07 and m.baseline.time_ms is None and "0.2 ms" in m.baseline.note


# ---------------------------------------------------------------------------- CLI
def run_cli(capsys, *argv):
    from skill_server.cli.entry import main
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_record_history_and_export(tmp_path, capsys):
    skills = make_project(tmp_path)
    ledger = str(tmp_path / "cli.sqlite")
    f = tmp_path / "rec.json"
    rec = record()
    rec.pop("recorded_by")
    f.write_text(json.dumps([rec, record(platform=CPU, verdict="NO_DIFFERENCE", speedup=1.0, interval=None,
                                         baseline={"name": "a", "time_ms": 1.0}, candidate={"name": "b", "time_ms": 1.0})]))
    code, out, err = run_cli(capsys, "--skills-dir", str(skills), "record", str(f), "--ledger", ledger, "--by", "cli-user", "--json")
    assert code == 0, err
    ids = json.loads(out)["ids"]
    assert len(ids) == 2
    code, out, _ = run_cli(capsys, "--skills-dir", str(skills), "history", BLOCKSCALE, "--ledger", ledger,
                           "--platform", "MI355X", "--json")
    hist = json.loads(out)
    assert code == 0 and [r["recorded_by"] for r in hist["results"]] == ["cli-user"]
    code, out, _ = run_cli(capsys, "--skills-dir", str(skills), "history", BLOCKSCALE, "--ledger", ledger)
    assert code == 0 and "4096x2048x7168" in out and "flydsl_8wave vs ck_blockscale" in out
    code, out, _ = run_cli(capsys, "--skills-dir", str(skills), "export", BLOCKSCALE, "--ledger", ledger, "--json")
    assert code == 0 and json.loads(out)["measurements"] == 2
    # bad input: exit 2 with one clear line
    f.write_text(json.dumps(record(speedup=float("inf"))).replace("Infinity", "1e999"))
    code, _, err = run_cli(capsys, "--skills-dir", str(skills), "record", str(f), "--ledger", ledger)
    assert code == 2 and "speedup: must be a finite number" in err and "Traceback" not in err
    f.write_text("card_id: x\ncard_id: y\n")
    code, _, err = run_cli(capsys, "--skills-dir", str(skills), "record", str(f), "--ledger", ledger)
    assert code == 2 and "duplicate key 'card_id'" in err
    assert len(Ledger(ledger).history()) == 2


def test_cli_record_from_a_verifier_report(tmp_path, capsys):
    """A report file recorded by hand: the records come from the report's own content
    (its arms, shapes, platform), and an unsigned report is stored as reported."""
    from ledger_support import shape_report, verification_report

    skills = make_project(tmp_path)
    ledger = str(tmp_path / "cli.sqlite")
    report = verification_report(BLOCKSCALE, [shape_report("4096x2048x7168", 1.2, baseline="cublas_blockscale"),
                                              shape_report("hidden-1", None, hidden=True)],
                                 platform="cuda", device="NVIDIA H200", props={"capability": "9.0"},
                                 candidate="arm:triton_twin")
    path = tmp_path / "report.json"
    path.write_text(report.model_dump_json())
    code, out, err = run_cli(capsys, "--skills-dir", str(skills), "record", str(path), "--from-report", "--card",
                             BLOCKSCALE, "--ledger", ledger, "--by", "agent-7", "--json")
    assert code == 0, err
    assert "not recorded: hidden-1: hidden shape" in err
    receipt = json.loads(out)
    assert receipt["level"] == "reported" and "no signature" in receipt["note"]
    r = Ledger(ledger).history()[0]
    assert (r.baseline.name, r.candidate.name) == ("cublas_blockscale", "triton_twin")  # the report's own arms
    assert (r.speedup, r.baseline.time_ms, r.candidate.time_ms) == (1.2, 1.2, 1.0)
    assert r.interval == pytest.approx((1.188, 1.212))
    assert r.parity_passed is True and r.stages == {"parity": "PASS", "timing": "PASS"}
    assert r.parity["min_cosine"] == 1.0 and r.parity["baseline_max_abs"] == 0.02
    assert r.source == "verifier_report" and r.platform.key == "cuda/sm_90" and r.platform.device == "NVIDIA H200"
    assert r.git_rev == "41a379d7-dirty" and r.recorded_by == "agent-7"
    assert r.evidence.level == "reported" and r.evidence.report_digest and r.evidence.signature is None
    # the same report again: refused (a report is recorded once)
    code, _, err = run_cli(capsys, "--skills-dir", str(skills), "record", str(path), "--from-report",
                           "--ledger", ledger)
    assert code == 2 and "already recorded" in err
    # a report for another card than the one named
    code, _, err = run_cli(capsys, "--skills-dir", str(skills), "record", str(path), "--from-report", "--card",
                           MXFP8, "--ledger", ledger)
    assert code == 2 and f"measured card {BLOCKSCALE!r}, not {MXFP8!r}" in err
    path.write_text(json.dumps({"verdict": "FASTER"}))
    code, _, err = run_cli(capsys, "--skills-dir", str(skills), "record", str(path), "--from-report", "--card",
                           BLOCKSCALE, "--ledger", ledger)
    assert code == 2 and "not a verifier report" in err and "Traceback" not in err
    assert len(Ledger(ledger).history()) == 1

"""Evidence levels: only this server's verifier makes `verified` records; anything submitted,
edited, replayed or signed by another key is `reported`; bad reports are refused whole."""
from __future__ import annotations

import json
import os
import re
import sqlite3
import stat

import pytest
from ledger_support import BLOCKSCALE, CPU, GFX950, H200, MXFP8, make_project, record, report_platform, shape_report, \
    verification_report

from skill_server.matching.hotspot import Hotspot
from skill_server.service.facade import ServiceError, SkillService

SHAPE = "4096x2048x7168"
HOTSPOT = Hotspot(op_name="gemm_a8w8_blockscale_bpreshuffle", gen="gfx950", scale_format="fp32_block",
                  shape={"M": 4096, "N": 2048, "K": 7168})


@pytest.fixture
def svc(tmp_path):
    return SkillService(make_project(tmp_path), check_interval=0.0, ledger_path=tmp_path / "var" / "ledger.sqlite")


def report(speedup=1.3, platform=GFX950, card=BLOCKSCALE):
    rows = [shape_report(SHAPE, speedup, baseline="ck_blockscale"), shape_report("hidden-1", None, hidden=True)]
    return verification_report(card, rows, candidate="arm:flydsl_4wave", **report_platform(platform))


def signed(svc, rep):
    """The envelope this server hands out for a report of its own verifier."""
    return json.loads(svc.signed_envelope(rep).model_dump_json())


def results(svc, card=BLOCKSCALE):
    return svc.get_validation_history(card).results


def test_a_report_signed_by_this_server_is_recorded_as_verified_and_served_first(svc):
    svc.record_result(record(speedup=1.9, baseline={"name": "ck", "time_ms": 1.9}, candidate={"name": "x", "time_ms": 1.0},
                             interval=[1.85, 1.95]))  # an agent's own figure
    receipt = svc.record_result(report=signed(svc, report()), recorded_by="agent")
    assert receipt.level == "verified" and len(receipt.ids) == 1 and "hidden-1" in receipt.skipped[0]
    [mine, theirs] = results(svc)
    assert mine.evidence.level == "verified" and mine.evidence.signature and mine.evidence.harness_digest == "ab" * 32
    assert mine.evidence.report_digest[:16] == receipt.report_id and theirs.evidence.level == "reported"
    figures = svc.match_skill(HOTSPOT).matches[0].reverification.figures
    assert [f.level for f in figures[:3]] == ["verified", "transcribed", "reported"]  # at the shape: verified first
    assert figures[0].platform == "rocm/gfx950" and figures[0].date and figures[0].source == f"ledger #{mine.id}"
    assert figures[0].speedup == pytest.approx(1.3)
    listed = {s.id: s for s in svc.list_skills().skills}[BLOCKSCALE].reverification.figures
    assert listed and all(f.level and f.source for f in listed)


@pytest.mark.parametrize("edit", [
    lambda r: r["report"]["shape_reports"][0]["timing"]["ab"].update(speedup=1.31, median_a_ms=1.31),
    lambda r: r["report"].update(card_id=MXFP8, problem=MXFP8),  # the same report claimed for another card
    lambda r: r["report"]["provenance"].update(device_name="NVIDIA H200", platform="cuda",
                                               device_properties={"capability": "9.0"}),  # another platform
    lambda r: r["report"]["shape_reports"][0].update(shape="16384x7168x768", dims={"M": 16384, "N": 7168, "K": 768}),
])
def test_an_edited_report_with_the_original_signature_is_only_reported(svc, edit):
    envelope = signed(svc, report())
    envelope.pop("digest")  # an honest client sends what it has; the server recomputes the digest
    edit(envelope)
    receipt = svc.record_result(report=envelope)
    assert receipt.level == "reported" and "signature does not check" in receipt.note
    stored = svc.get_validation_history(receipt.card_ids[0]).results
    assert [r.evidence.level for r in stored] == ["reported"]


def test_a_verified_report_counts_for_the_card_shape_and_platform_it_measured_only(svc):
    """What a record claims comes from the report's content, never from the caller."""
    envelope = signed(svc, report(platform=H200))
    with pytest.raises(ServiceError, match=f"measured card {BLOCKSCALE!r}, not {MXFP8!r}"):
        svc.record_result(report=envelope, card_id=MXFP8)
    receipt = svc.record_result(report=envelope, card_id=BLOCKSCALE)
    [r] = results(svc)
    assert receipt.level == "verified" and r.platform.key == "cuda/sm_90" and r.shape_text == SHAPE
    with pytest.raises(ServiceError, match="already recorded"):  # a replay adds nothing
        svc.record_result(report=envelope)
    assert len(results(svc)) == 1


BAD_REPORTS = {
    "not JSON": ("{not json", "report: not JSON (line 1"),
    "not an object": ("[1, 2]", "expected a JSON object"),
    "no verifier fields": ({"verdict": "FASTER"}, "not a verifier report"),
    "wrong field type": ({"report": {"problem": 3, "candidate": "x"}}, "report.problem"),
    "digest does not match": ("TAMPERED", "does not match its content"),
    "unknown card": ("UNKNOWN", "names an unknown card 'no_such_card'"),
    "no card": ("NOCARD", "names no card"),
}


@pytest.mark.parametrize("case", sorted(BAD_REPORTS))
def test_a_bad_report_is_refused_with_the_reason_and_nothing_is_written(svc, case):
    data, message = BAD_REPORTS[case]
    if data == "TAMPERED":
        data = signed(svc, report())
        data["report"]["verdict"] = "FASTER"  # changed, digest kept
    elif data in ("UNKNOWN", "NOCARD"):
        rep = report()
        rep.card_id = "no_such_card" if data == "UNKNOWN" else None
        data = signed(svc, rep)
    with pytest.raises(ServiceError, match=re.escape(message)):
        svc.record_result(report=data)
    assert results(svc) == [] and svc.ledger.store.report(report().provenance.time_utc[:16]) is None
    if svc.ledger.exists():
        conn = sqlite3.connect(svc.ledger.path)
        assert conn.execute("SELECT COUNT(*) FROM reports").fetchone()[0] == 0
        conn.close()


def test_hand_made_records_cannot_claim_to_be_verified(svc):
    forged = record(evidence={"level": "verified"})
    with pytest.raises(ServiceError, match="evidence: unknown field"):
        svc.record_result(forged)
    assert svc.record_result(record()).level == "reported"


def test_a_row_changed_in_the_database_after_signing_is_served_as_reported(svc):
    svc.record_result(report=signed(svc, report()))
    from skill_server.ledger.models import PlatformInfo, ReverificationRow

    svc.ledger.record_reverification([ReverificationRow(card_id=BLOCKSCALE, platform=PlatformInfo(**GFX950),
                                                        status="DRIFTED", reason="0.9x", recorded_by="reverify")])
    svc.workspace.claims.invalidate()
    assert svc.get_recipe(BLOCKSCALE).reverification.claims_current is False
    conn = sqlite3.connect(svc.ledger.path)
    payload = json.loads(conn.execute("SELECT payload_json FROM results").fetchone()[0])
    payload["speedup"] = payload["baseline"]["time_ms"] = payload["interval"][1] = 1.31  # a nicer figure
    conn.execute("UPDATE results SET payload_json = ?", (json.dumps(payload),))
    conn.execute("UPDATE reverifications SET status = 'CONFIRMED'")  # someone tries to clear the drift
    conn.commit()
    conn.close()
    svc.workspace.claims.invalidate()
    [r] = results(svc)
    assert r.speedup == 1.31 and r.evidence.level == "reported" and "changed after it was signed" in r.evidence.note
    rv = svc.get_recipe(BLOCKSCALE).reverification
    assert rv.claims_current is None and rv.platforms == []  # a tampered status is never shown
    assert svc.get_validation_history(BLOCKSCALE).reverifications[0].evidence.level == "reported"


def test_the_key_is_created_once_with_owner_only_permissions(svc, tmp_path):
    key = tmp_path / "var" / "signing.key"
    assert not key.exists()
    svc.list_skills(), svc.get_validation_history(BLOCKSCALE)  # reads create nothing
    assert not key.exists() and not (tmp_path / "var").exists()
    svc.record_result(report=signed(svc, report()))
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_text().strip()) == 64
    before = key.read_text()
    svc.record_result(report=signed(svc, report()))
    assert key.read_text() == before


@pytest.mark.parametrize("breakage,message", [
    (lambda k: (k.write_text("not a hex key\n"), os.chmod(k, 0o600)), "not a hex key"),
    (lambda k: (k.write_text("ab" * 32), os.chmod(k, 0o644)), "readable by other users"),
    (lambda k: k.mkdir(), "is not a regular file"),
])
def test_an_unusable_key_stops_every_write_and_never_falls_back_to_unsigned(svc, tmp_path, breakage, message):
    svc.record_result(report=signed(svc, report()))  # one verified record under the good key
    key = tmp_path / "var" / "signing.key"
    key.unlink()
    breakage(key)
    fresh = SkillService(svc.skills_dir, check_interval=0.0, ledger_path=svc.ledger.path)
    for write in (lambda: fresh.record_result(record()),
                  lambda: fresh.record_result(report=signed(svc, report())),
                  lambda: fresh.reverify(card_id=BLOCKSCALE, platform=__import__("skill_server.ledger.results", fromlist=["x"])
                                         .PlatformInfo(**CPU), gates=False, verifier=False)):
        with pytest.raises(ServiceError, match=message):
            write()
    with pytest.raises(ServiceError, match=message):
        fresh.signed_envelope(report())
    [r] = fresh.get_validation_history(BLOCKSCALE).results  # reads still work, nothing was added
    assert r.evidence.level == "reported" and "no usable signing key" in r.evidence.note


def test_records_signed_with_another_deployments_key_are_reported(svc, tmp_path):
    svc.record_result(report=signed(svc, report()))
    (tmp_path / "var" / "signing.key").unlink()
    other = SkillService(svc.skills_dir, check_interval=0.0, ledger_path=svc.ledger.path)
    other.record_result(record())  # creates a new key
    r = other.get_validation_history(BLOCKSCALE).results[-1]
    assert r.evidence.level == "reported" and "another key" in r.evidence.note


def test_a_report_issued_before_a_schema_change_still_checks_and_is_stored_as_issued(svc):
    """The digest is over the report as sent, not over what this version's model re-dumps: a
    report of an older version (a field since dropped) keeps its signature and its bytes."""
    from skill_server.ledger.signing import canonical_json, sha256_hex

    envelope = signed(svc, report())
    envelope["report"]["shape_reports"][0]["threads"] = {"python_before": 1, "python_after": 1}  # an older field
    envelope["digest"] = sha256_hex(canonical_json(envelope["report"]))
    envelope["signature"] = json.loads(svc.ledger.sign_report(envelope["digest"]).model_dump_json())
    receipt = svc.record_result(report=envelope, recorded_by="agent")
    assert receipt.level == "verified", receipt.note
    assert receipt.report_id == envelope["digest"][:16]
    [row] = results(svc)
    assert row.evidence.level == "verified" and row.evidence.report_digest == envelope["digest"]


def test_rows_read_before_they_were_changed_are_checked_again_and_answers_are_copies(svc):
    """Reads remember signature checks by the rows' bytes: a row edited in the database after a
    read is checked afresh, and what one caller does to its answer never reaches the next."""
    svc.record_result(report=signed(svc, report()))
    svc.ledger.history(BLOCKSCALE)  # checked and remembered
    [first] = svc.ledger.history(BLOCKSCALE)  # the check from memory
    assert first.evidence.level == "verified"
    first.speedup = 9.9  # a caller scribbling on its answer
    with pytest.raises(ValueError):
        first.evidence.level = "reported"  # evidence is replaced, never edited
    [again] = svc.ledger.history(BLOCKSCALE)
    assert again.evidence.level == "verified" and again.speedup == pytest.approx(1.3)
    conn = sqlite3.connect(svc.ledger.path)
    payload = json.loads(conn.execute("SELECT payload_json FROM results").fetchone()[0])
    payload["speedup"] = payload["baseline"]["time_ms"] = payload["interval"][1] = 1.31
    conn.execute("UPDATE results SET payload_json = ?", (json.dumps(payload),))
    conn.commit()
    conn.close()
    [edited] = results(svc)
    assert edited.speedup == 1.31 and edited.evidence.level == "reported" and "changed after it was signed" in edited.evidence.note

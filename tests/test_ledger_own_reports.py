"""The verifier's own record always lands (issue 24, item 3): a report signed by this
deployment is recorded `verified` whatever its verdict and speedup; the plausibility rule on
the arms' times is for hand-made records and uses the verifier's statistic (the median of
per-round ratios); a run that decides nothing about the candidate (INCONCLUSIVE, ERROR) is
stored as a report, never as a result that counts against the card."""
from __future__ import annotations

import json

import pytest
from ledger_support import BLOCKSCALE, CPU, make_project, record, report_platform, shape_report, verification_report

from skill_server.ledger.models import ResultRecord
from skill_server.service.facade import ServiceError, SkillService
from verifiers.report import StageResult

SHAPE = "128x256x512"


@pytest.fixture()
def svc(tmp_path):
    return SkillService(make_project(tmp_path), check_interval=0.0, ledger_path=tmp_path / "l.sqlite")


def _signed(svc, rows) -> dict:
    rep = verification_report(BLOCKSCALE, rows, **report_platform(CPU))
    return json.loads(svc.signed_envelope(rep).model_dump_json())


def test_a_signed_report_whose_median_of_ratios_differs_from_the_ratio_of_medians_lands_verified(svc):
    row = shape_report(SHAPE, 0.197, baseline="torch_dequant")
    row.timing.ab.median_a_ms, row.timing.ab.median_b_ms = 0.129, 0.543  # ratio of medians 0.2376, as on the H200
    receipt = svc.record_result(report=_signed(svc, [row]))
    assert receipt.level == "verified" and len(receipt.ids) == 1
    [stored] = svc.get_validation_history(BLOCKSCALE).results
    assert stored.verdict == "SLOWER" and stored.speedup == 0.197 and stored.evidence.level == "verified"


def test_an_inconclusive_signed_report_is_stored_but_is_no_result(svc):
    row = shape_report(SHAPE, None, baseline="torch_dequant")
    row.stages["timing"] = StageResult(name="timing", status="SKIPPED", reason="clocks disagree on a loaded box")
    receipt = svc.record_result(report=_signed(svc, [row]))
    assert receipt.level == "verified" and receipt.ids == [] and receipt.report_id
    assert "INCONCLUSIVE" in " ".join(receipt.skipped) and "not evidence" in " ".join(receipt.skipped)
    assert svc.get_validation_history(BLOCKSCALE).results == []
    assert svc.get_report(receipt.report_id).recorded  # the report itself is in the ledger


def test_an_error_shape_is_never_stored_as_a_failure(svc):
    row = shape_report(SHAPE, None, baseline="torch_dequant")
    row.verdict = "ERROR"
    row.stages["timing"] = StageResult(name="timing", status="ERROR", reason="the baseline's solo phase did not complete")
    receipt = svc.record_result(report=_signed(svc, [row]))
    assert receipt.ids == [] and "ERROR" in " ".join(receipt.skipped)
    assert svc.get_validation_history(BLOCKSCALE).results == []


def test_an_unsigned_report_with_nothing_timed_is_still_refused(svc):
    row = shape_report(SHAPE, None, baseline="torch_dequant")
    rep = verification_report(BLOCKSCALE, [row], **report_platform(CPU))
    with pytest.raises(ServiceError, match="no result to record"):
        svc.record_result(report=rep.model_dump_json())


def test_a_hand_made_record_is_held_to_the_median_of_per_round_ratios():
    base = record(card_id=BLOCKSCALE, verdict="SLOWER", speedup=0.197, interval=[0.19, 0.207], source="manual")
    # per-round times whose ratios have median 0.197 (their medians' ratio is 0.2376): accepted
    a, b = [0.129, 0.1, 0.2, 0.13, 0.12], [0.6548, 0.4, 0.95, 0.66, 0.61]
    ok = ResultRecord.model_validate(base | {"baseline": {"name": "a", "time_ms": 0.129, "times_ms": a},
                                             "candidate": {"name": "b", "time_ms": 0.543, "times_ms": b}})
    assert ok.speedup == 0.197
    with pytest.raises(ValueError, match="median of the per-round time ratios"):
        ResultRecord.model_validate(base | {"baseline": {"name": "a", "times_ms": a},
                                            "candidate": {"name": "b", "times_ms": [t / 2 for t in b]}})
    with pytest.raises(ValueError, match="disagrees with the arms' times"):  # medians only: their ratio
        ResultRecord.model_validate(base | {"baseline": {"name": "a", "time_ms": 0.129},
                                            "candidate": {"name": "b", "time_ms": 0.543}})

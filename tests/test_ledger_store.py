"""The ledger store: validated records in, the same records out; bad input refused with
a clear message and nothing written. Every test runs on both backends (SQLite, PostgreSQL)."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from ledger_support import BLOCKSCALE, CARDS, CPU, H200, MXFP8, record

from skill_server.ledger.results import (MAX_PAYLOAD_BYTES, SCHEMA_VERSION, Ledger, LedgerError, RecordRejected,
                                 default_ledger_path, validate_record)


@pytest.fixture
def ledger(ledger_backend):
    return Ledger(ledger_backend.location)


def valid(data, root=None):
    return validate_record(data, known_cards=CARDS, project_root=root)


def test_a_record_round_trips_with_every_figure_and_its_provenance(ledger, tmp_path):
    stored = ledger.record([valid(record(report_path="bench/results/run.json"), tmp_path)])[0]
    got = ledger.history(card_id=BLOCKSCALE)
    assert [r.id for r in got] == [stored.id]
    r = got[0]
    assert r.shape == {"M": 4096, "N": 2048, "K": 7168} and r.shape_text == "4096x2048x7168"
    assert (r.baseline.name, r.baseline.time_ms, r.candidate.time_ms) == ("ck_blockscale", 0.2, 0.19)
    assert r.speedup == 1.0526 and r.interval == (1.04, 1.06) and r.verdict == "FASTER"
    assert r.parity == {"cosine": 1.0, "max_abs": 0.03125, "mismatches": 0}
    assert r.platform.key == "rocm/gfx950" and r.platform.libraries["flydsl"] == "0.5.0"
    assert (r.git_rev, r.recorded_by, r.source) == ("41a379d", "test-agent", "manual")
    assert r.report_path == "bench/results/run.json"
    assert r.recorded_at.tzinfo is not None and abs(datetime.now(UTC) - r.recorded_at) < timedelta(minutes=1)
    assert ledger.integrity_check() == "ok" and ledger.schema_version() == SCHEMA_VERSION


def test_history_filters_by_card_shape_platform_and_source(ledger):
    ledger.record([
        valid(record()),
        valid(record(shape={"M": 16384, "N": 7168, "K": 768}, baseline={"name": "ck", "time_ms": 0.1875},
                     candidate={"name": "fly", "time_ms": 0.1289}, speedup=1.4546, interval=[1.44, 1.46])),
        valid(record(platform=H200, source="verifier_report")),
        valid(record(card_id=MXFP8, shape="1024x5120x2048")),
    ])
    assert len(ledger.history()) == 4
    assert len(ledger.history(card_id=BLOCKSCALE)) == 3
    assert [r.shape_text for r in ledger.history(card_id=BLOCKSCALE, shape="16384x7168x768")] == ["16384x7168x768"]
    assert len(ledger.history(shape={"M": 4096, "N": 2048, "K": 7168})) == 2
    # platform: key, runtime, generation alias, device substring
    assert len(ledger.history(platform="rocm/gfx950")) == 3
    assert len(ledger.history(platform="MI355X")) == 3
    assert [r.platform.key for r in ledger.history(platform="cuda")] == ["cuda/sm_90"]
    assert len(ledger.history(platform="H200")) == 1
    assert len(ledger.history(source="verifier_report")) == 1
    newest_first = ledger.history()
    assert [r.id for r in newest_first] == sorted((r.id for r in newest_first), reverse=True)


def test_reading_a_ledger_that_does_not_exist_creates_nothing(ledger, ledger_backend):
    assert ledger.history() == [] and ledger.latest_statuses() == {} and ledger.reverifications() == []
    assert ledger.latest_results() == [] and ledger.report("0" * 16) is None and ledger.store.key_ids() == []
    assert not ledger.exists()
    if ledger_backend.kind == "sqlite":
        assert not ledger.path.exists() and not ledger.path.parent.exists()
    else:
        assert ledger_backend.tables() == set()


def test_the_location_comes_from_the_flag_then_the_environment_then_the_project(tmp_path, monkeypatch):
    monkeypatch.delenv("SKILL_SERVER_LEDGER", raising=False)
    assert default_ledger_path(tmp_path) == (tmp_path / "var" / "ledger.sqlite").resolve()
    monkeypatch.setenv("SKILL_SERVER_LEDGER", str(tmp_path / "env.sqlite"))
    assert default_ledger_path(tmp_path) == (tmp_path / "env.sqlite").resolve()
    assert default_ledger_path(tmp_path, tmp_path / "flag.sqlite") == (tmp_path / "flag.sqlite").resolve()
    url = "postgresql://fleet:secret@db.internal:5432/ledger"
    monkeypatch.setenv("SKILL_SERVER_LEDGER", url)
    assert default_ledger_path(tmp_path) == url  # a URL stays the string it is


NAN, INF = float("nan"), float("inf")
BAD = {
    "negative baseline time": (dict(baseline={"name": "ck", "time_ms": -0.2}), "baseline.time_ms"),
    "zero candidate time": (dict(candidate={"name": "fly", "time_ms": 0.0}), "candidate.time_ms"),
    "negative per-round time": (dict(candidate={"name": "fly", "time_ms": 0.19, "times_ms": [0.19, -1.0]}), "times must be positive"),
    "NaN speedup": (dict(speedup=NAN), "speedup: must be a finite number"),
    "Inf speedup": (dict(speedup=INF), "speedup: must be a finite number"),
    "negative speedup": (dict(speedup=-1.05), "speedup"),
    "NaN parity metric": (dict(parity={"cosine": NAN}), "parity.cosine"),
    "cosine above one": (dict(parity={"cosine": 1.5}), "a cosine lies in [-1, 1]"),
    "negative max abs error": (dict(parity={"max_abs": -0.1}), "cannot be negative"),
    "unknown card": (dict(card_id="no_such_card"), "unknown card 'no_such_card'"),
    "FASTER below one": (dict(speedup=0.95, interval=[0.9, 0.99], baseline={"name": "ck", "time_ms": 0.19},
                              candidate={"name": "fly", "time_ms": 0.2}), "FASTER with speedup 0.95"),
    "SLOWER above one": (dict(verdict="SLOWER"), "SLOWER with speedup"),
    "FASTER without a speedup": (dict(speedup=None, interval=None), "needs a speedup"),
    "interval upside down": (dict(interval=[1.06, 1.04]), "low bound above high bound"),
    "speedup outside its interval": (dict(interval=[1.1, 1.2]), "outside its own interval"),
    "speedup contradicts the times": (dict(baseline={"name": "ck", "time_ms": 0.1},
                                           candidate={"name": "fly", "time_ms": 0.2}), "arms swapped"),
    "FAIL without a reason": (dict(verdict="FAIL", speedup=None, interval=None, parity_passed=None), "needs the reason"),
    "missing recorded_by": (dict(recorded_by=None), "recorded_by"),
    "blank recorded_by": (dict(recorded_by="  "), "recorded_by"),
    "missing platform": (dict(platform=None), "platform"),
    "unknown GPU generation": (dict(platform={**H200, "generation": "sm_999"}), "unknown GPU generation"),
    "bad runtime": (dict(platform={**H200, "runtime": "metal"}), "platform.runtime"),
    "future timestamp": (dict(recorded_at=(datetime.now(UTC) + timedelta(days=2)).isoformat()), "lies in the future"),
    "bad git revision": (dict(git_rev="main; rm -rf /"), "git_rev"),
    "unknown field": (dict(speedup_x=1.0), "unknown field"),
    "bad shape text": (dict(shape="4096x2048"), "expected MxNxK"),
    "non-positive dimension": (dict(shape={"M": 0, "N": 2048, "K": 7168}), "must be a positive integer"),
    "relative path leaving the project": (dict(report_path="../../etc/passwd"), "outside the project"),
    "absolute path outside the project": (dict(report_path="/etc/passwd"), "outside the project"),
    "unknown source": (dict(source="gossip"), "source"),
    "oversized payload": (dict(notes=None, candidate={"name": "fly", "time_ms": 0.19,
                                                      "times_ms": [0.19] * (MAX_PAYLOAD_BYTES // 4)}), "byte limit"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_refused_with_a_clear_message_and_nothing_written(case, ledger, tmp_path):
    over, expected = BAD[case]
    data = record()
    for key, value in over.items():  # None removes the field
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    with pytest.raises(RecordRejected) as err:
        ledger.record([valid(data, tmp_path)])
    message = str(err.value)
    assert "refused, nothing written" in message
    assert expected in message, message
    assert ledger.history() == []


def test_notes_too_long_and_an_oversized_batch_entry_are_refused():
    with pytest.raises(RecordRejected, match="notes"):
        validate_record(record(notes="x" * 5000), known_cards=CARDS)
    with pytest.raises(RecordRejected, match="not JSON-serialisable|JSON object"):
        validate_record(["not", "a", "record"], known_cards=CARDS)


def test_a_batch_with_one_bad_record_writes_none_of_it(tmp_path, ledger_backend):
    from skill_server.service.facade import ServiceError, SkillService
    from ledger_support import make_project

    svc = SkillService(make_project(tmp_path), ledger_path=ledger_backend.location)
    with pytest.raises(ServiceError, match=r"record #1: refused, nothing written: speedup: must be a finite"):
        svc.record_result([record(), record(speedup=NAN), record()])
    assert svc.ledger.history() == []
    ok = svc.record_result([record(), record(platform=CPU, verdict="NO_DIFFERENCE", speedup=1.0, interval=None,
                                              baseline={"name": "a", "time_ms": 1.0}, candidate={"name": "b", "time_ms": 1.0})])
    assert len(ok.ids) == 2 and len(svc.ledger.history()) == 2


def test_a_ledger_written_by_a_newer_schema_is_refused_not_guessed_at(ledger, ledger_backend):
    ledger.record([valid(record())])
    ledger_backend.raw("INSERT INTO schema_version VALUES (?, 'later')", (SCHEMA_VERSION + 1,))
    for attempt in (lambda led: led.history(), lambda led: led.record([valid(record())])):
        with pytest.raises(LedgerError, match=f"schema version {SCHEMA_VERSION + 1} is newer"):
            attempt(Ledger(ledger_backend.location))
    assert ledger_backend.raw("SELECT COUNT(*) FROM results") == [(1,)]  # nothing written


def test_the_store_enforces_its_invariants_even_for_writes_that_bypass_validation(ledger, ledger_backend):
    ledger.record([valid(record())])
    for statement in ("INSERT INTO result_arms (result_id, role, name, time_ms) VALUES (1, 'candidate2', 'x', 1.0)",
                      "UPDATE results SET speedup = -1 WHERE id = 1",
                      "INSERT INTO result_arms (result_id, role, name, time_ms) VALUES (999, 'baseline', 'x', 1.0)"):
        if ledger_backend.kind == "sqlite" and "999" in statement:
            ledger_backend.raw("PRAGMA foreign_keys = ON")
        with pytest.raises(ledger_backend.integrity_errors):
            ledger_backend.raw(statement)

"""draft-card: ledger records become a lint-clean experimental card skeleton."""
from __future__ import annotations

import json

import pytest
import yaml
from ledger_support import BLOCKSCALE, CPU, H200, MXFP8, make_project, record

from skill_server.cards import parse_card_file
from skill_server.service import ServiceError, SkillService

NEW = "blockscale_triton_twin_h200"


def h200(shape, speedup, **over):
    return record(shape=shape, platform=H200, baseline={"name": "cublas_blockscale", "time_ms": 1.0 * speedup},
                  candidate={"name": "triton_twin", "time_ms": 1.0}, speedup=speedup,
                  interval=[speedup * 0.99, speedup * 1.01], source="verifier_report", recorded_by="agent-h200", **over)


@pytest.fixture
def svc(tmp_path):
    s = SkillService(make_project(tmp_path), check_interval=0.0, ledger_path=tmp_path / "l.sqlite")
    s.record_result([h200("4096x2048x7168", 1.137), h200("16384x7168x768", 1.31),
                     h200("4096x65536x1536", 0.97, verdict="SLOWER")])
    return s


def test_a_draft_from_ledger_records_passes_lint_apart_from_its_todos(svc):
    res = svc.draft_card(NEW, from_card=BLOCKSCALE, platform="cuda")
    assert res.problems == [] and res.source_card == BLOCKSCALE and res.todo_count > 0
    assert res.gens == ["sm_90"] and res.speedup_floor == 1.13  # the lowest FASTER speedup, rounded down
    assert res.overlap["duplicates"] == [] and res.overlap["overlaps"] == []
    lint = svc.lint()
    mine = [p for p in lint if f"/{NEW}/" in p.file]
    assert [p.severity for p in mine] == ["warning"] and "TODO placeholder(s)" in mine[0].message
    assert not [p for p in lint if p.severity == "error"]
    card = parse_card_file(svc.skills_dir / NEW / "SKILL.md").card
    assert card.validation.status == "experimental" and card.validation.gpu == "NVIDIA H200"
    assert "1.137x at 4096x2048x7168 (triton_twin vs cublas_blockscale" in card.validation.measured.isolated
    assert card.validation.artifact == f"skills/{NEW}/validation_ledger.yaml"
    assert card.match.scale_formats == ["fp32_block"] and card.authors == ["agent-h200"]
    assert card.verifier.problem == BLOCKSCALE and len(card.verifier.shapes) == 3
    artifact = yaml.safe_load((svc.skills_dir / NEW / "validation_ledger.yaml").read_text())
    assert artifact["card_id"] == NEW and artifact["source"]["kind"] == "ledger_export"
    assert len(artifact["measurements"]) == 3
    body = (svc.skills_dir / NEW / "SKILL.md").read_text()
    assert "## Evidence (from the results ledger)" in body and "| SLOWER |" in body
    # a re-run never overwrites the draft
    with pytest.raises(ServiceError, match="taken"):
        svc.draft_card(NEW, from_card=BLOCKSCALE, platform="cuda")


def test_a_draft_that_duplicates_its_source_card_says_so_and_lint_rejects_it(svc):
    svc.record_result(record())  # gfx950, FASTER: same match space as the source card
    res = svc.draft_card("blockscale_again", from_card=BLOCKSCALE, platform="gfx950")
    assert res.overlap["duplicates"] == [BLOCKSCALE]
    errors = [p for p in svc.lint() if p.severity == "error"]
    assert any("blockscale_again" in p.file and "duplicates card" in p.message for p in errors)


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(new_id=BLOCKSCALE, from_card=BLOCKSCALE), "is taken"),
    (dict(new_id="Bad-Id", from_card=BLOCKSCALE), "lower-case letters"),
    (dict(new_id="x1"), "select the records"),
    (dict(new_id="x1", from_card=BLOCKSCALE, shape="1x2x3"), "no ledger records match"),
    (dict(new_id="x1", from_card=BLOCKSCALE, shape="4096x65536x1536"), "none of the selected records has verdict FASTER"),
    (dict(new_id="x1", record_ids=[999]), r"no ledger record\(s\) \[999\]"),
    (dict(new_id="x1", from_card=BLOCKSCALE, out_dir="/tmp/x1"), "outside the project"),
    (dict(new_id="x1", from_card=BLOCKSCALE, out_dir="skills/other_name"), "must be named after the card id"),
    (dict(new_id="x1", from_card=BLOCKSCALE, gens=["gfx9999"]), "unknown GPU generation"),
])
def test_drafting_refuses_what_the_records_cannot_support(svc, kwargs, message):
    with pytest.raises(ServiceError, match=message):
        svc.draft_card(**kwargs)


def test_cpu_records_need_the_generations_stated_and_one_card_at_a_time(svc):
    ids = svc.record_result([record(platform=CPU), record(card_id=MXFP8, shape="1024x5120x2048")]).ids
    with pytest.raises(ServiceError, match="carry no GPU generation"):
        svc.draft_card("x1", record_ids=[ids[0]])
    res = svc.draft_card("blockscale_cpu_twin", record_ids=[ids[0]], gens=["MI355X"])
    assert res.gens == ["gfx950"]
    with pytest.raises(ServiceError, match="belong to several cards"):
        svc.draft_card("x2", record_ids=ids)


def test_cli_draft_card(svc, capsys):
    from skill_server.cli import main

    base = ["--skills-dir", str(svc.skills_dir)]
    code = main(base + ["draft-card", "--from-ledger", "--id", NEW, "--card", BLOCKSCALE, "--platform", "H200",
                        "--ledger", str(svc.ledger.path), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert json.loads(out.out)["gens"] == ["sm_90"]
    assert main(base + ["lint"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(base + ["draft-card", "--id", "x9", "--card", BLOCKSCALE, "--ledger", str(svc.ledger.path)])
    assert exit_.value.code == 2 and "--from-ledger" in capsys.readouterr().err

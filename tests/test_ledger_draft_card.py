"""draft-card: ledger records become a lint-clean experimental card skeleton."""
from __future__ import annotations

import json

import pytest
import yaml
from ledger_support import BLOCKSCALE, CPU, H200, MXFP8, make_project, record

from skill_server.cards.schema import parse_card_file
from skill_server.service.facade import ServiceError, SkillService

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


def test_a_draft_from_ledger_records_goes_to_the_drafts_area_and_lints_clean_apart_from_its_todos(svc):
    res = svc.draft_card(NEW, from_card=BLOCKSCALE, platform="cuda")
    assert res.problems == [] and res.source_card == BLOCKSCALE and res.todo_count > 0
    assert res.gens == ["sm_90"] and res.speedup_floor == 1.13  # the lowest FASTER speedup, rounded down
    assert res.overlap["duplicates"] == [] and res.overlap["overlaps"] == []
    draft = svc.drafts_dir / NEW
    assert res.path == str(draft / "SKILL.md") and not (svc.skills_dir / NEW).exists()
    assert f"skill-server promote {NEW}" in res.promote
    assert not [p for p in svc.lint() if NEW in p.file]  # the catalog's lint does not see drafts
    card = parse_card_file(draft / "SKILL.md").card
    assert card.validation.status == "experimental" and card.validation.gpu == "NVIDIA H200"
    assert "1.137x at 4096x2048x7168 (triton_twin vs cublas_blockscale" in card.validation.measured.isolated
    assert card.validation.artifact == f"skills/{NEW}/validation_ledger.yaml"  # where promotion puts it
    assert card.match.scale_formats == ["fp32_block"] and card.authors == ["agent-h200"]
    # its own problem: the source's, declaring the new card (every card binds a problem that names it)
    assert card.verifier.problem == NEW and len(card.verifier.shapes) == 3
    assert f'card_id="{NEW}"' in (draft / "kernels" / "problem.py").read_text()
    assert "PROBES" in (draft / "kernels" / "probes.py").read_text()
    artifact = yaml.safe_load((draft / "validation_ledger.yaml").read_text())
    assert artifact["card_id"] == NEW and artifact["source"]["kind"] == "ledger_export"
    assert len(artifact["measurements"]) == 3
    body = (draft / "SKILL.md").read_text()
    assert "## Evidence (from the results ledger)" in body and "| SLOWER |" in body
    [listed] = svc.list_drafts()
    assert listed.card_id == NEW and listed.errors == [] and listed.todo_count > 0 and not listed.promotable
    # a re-run never overwrites the draft
    with pytest.raises(ServiceError, match="already exists"):
        svc.draft_card(NEW, from_card=BLOCKSCALE, platform="cuda")


def test_a_draft_is_not_served_until_a_person_completes_and_promotes_it(svc):
    from skill_server.matching.hotspot import Hotspot

    svc.record_result(record())  # gfx950, FASTER: a draft from it has the source card's match space
    res = svc.draft_card("blockscale_again", from_card=BLOCKSCALE, platform="gfx950")
    assert res.overlap["duplicates"] == [BLOCKSCALE]
    hotspot = Hotspot(op_name="gemm_a8w8_blockscale_bpreshuffle", gen="gfx950", scale_format="fp32_block")
    assert [m.card_id for m in svc.match_skill(hotspot).matches] == [BLOCKSCALE]
    assert "blockscale_again" not in {s.id for s in svc.list_skills().skills}
    [draft] = svc.list_drafts()
    assert any("duplicates card" in e for e in draft.errors) and not draft.promotable
    with pytest.raises(ServiceError, match="not promoted.*duplicates card"):
        svc.promote_draft("blockscale_again")
    # a draft with its own match space and no TODO left is promoted and then served
    svc.draft_card(NEW, from_card=BLOCKSCALE, platform="cuda")
    with pytest.raises(ServiceError, match="TODO placeholder"):
        svc.promote_draft(NEW)
    skill = svc.drafts_dir / NEW / "SKILL.md"
    skill.write_text(skill.read_text().replace("TODO", "Done"))
    done = svc.promote_draft(NEW)
    assert done.path == str(svc.skills_dir / NEW / "SKILL.md") and not (svc.drafts_dir / NEW).exists()
    assert (svc.project_root / "kernels" / NEW / "problem.py").is_file()
    assert NEW in {s.id for s in svc.list_skills().skills}
    assert not [p for p in svc.lint() if p.severity == "error" and NEW in p.file]
    with pytest.raises(ServiceError, match="no draft 'nope'"):
        svc.promote_draft("nope")


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(new_id=BLOCKSCALE, from_card=BLOCKSCALE), "is taken"),
    (dict(new_id="Bad-Id", from_card=BLOCKSCALE), "lower-case letters"),
    (dict(new_id="x1"), "select the records"),
    (dict(new_id="x1", from_card=BLOCKSCALE, shape="1x2x3"), "no ledger records match"),
    (dict(new_id="x1", from_card=BLOCKSCALE, shape="4096x65536x1536"), "none of the selected records has verdict FASTER"),
    (dict(new_id="x1", record_ids=[999]), r"no ledger record\(s\) \[999\]"),
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
    from skill_server.cli.entry import main
    base = ["--skills-dir", str(svc.skills_dir)]
    code = main(base + ["draft-card", "--from-ledger", "--id", NEW, "--card", BLOCKSCALE, "--platform", "H200",
                        "--ledger", str(svc.ledger.path), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert json.loads(out.out)["gens"] == ["sm_90"]
    assert main(base + ["lint"]) == 0
    capsys.readouterr()
    assert main(base + ["drafts"]) == 0
    assert f"{NEW}: 0 error(s)" in capsys.readouterr().out
    assert main(base + ["promote", NEW]) == 2
    assert "TODO placeholder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(base + ["draft-card", "--id", "x9", "--card", BLOCKSCALE, "--ledger", str(svc.ledger.path)])
    assert exit_.value.code == 2 and "--from-ledger" in capsys.readouterr().err

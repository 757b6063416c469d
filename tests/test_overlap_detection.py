"""Overlap detection: shared hotspot names are found, what separates two cards is named,
identical match spaces are duplicates, and lint turns them into errors and warnings."""
from __future__ import annotations

import json

import pytest
from ledger_support import BLOCKSCALE, MOE, MXFP8, SKILLS, make_project

from skill_server.matching.overlap import compare_op_names, regex_samples, shared_names
from skill_server.service.facade import ServiceError, SkillService

BLOCKSCALE_RX = "kernel_gemm_xdl.*blockscale|gemm_a8w8_blockscale"
MXFP8_RX = "kernel_gemm_xdl.*blockscale|gemm_a8w8_blockscale|mxscale|mxfp8|gemm_a8w8_mx"


@pytest.fixture(scope="module")
def svc():
    return SkillService(SKILLS)


def card_text(card_id: str) -> str:
    return (SKILLS / card_id / "SKILL.md").read_text()


def as_draft(card_id: str, new_id: str, *edits: tuple[str, str]) -> str:
    text = card_text(card_id).replace(f"id: {card_id}\n", f"id: {new_id}\n", 1)
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def test_the_mxfp8_and_block_scale_cards_share_a_hotspot_name_but_not_a_scale_format(svc):
    report = svc.check_overlap(card_id=MXFP8)
    assert report.duplicates == [] and report.overlaps == []
    f = next(f for f in report.findings if f.card_id == BLOCKSCALE)
    assert f.kind == "distinct"
    assert "gemm_a8w8_blockscale" in f.shared_hotspot_names
    assert [s.split(":")[0] for s in f.separated_by] == ["scale_formats"]
    assert "fp32_block" in f.separated_by[0] and "ue8m0_1x32" in f.separated_by[0]
    assert any(s.startswith("operator:") for s in f.overlaps) and any(s.startswith("gens:") for s in f.overlaps)
    # the MoE card shares no operator: not reported at all
    assert MOE not in {f.card_id for f in report.findings} and report.compared == 2


def test_the_recorded_duplicate_functionality_review_is_surfaced(svc):
    report = svc.check_overlap(card_id=MXFP8)
    assert [(r.card_id, r.verdict) for r in report.reviews] == [(MXFP8, "duplicate_functionality")]
    assert "already on main" in report.reviews[0].says


def test_a_draft_identical_in_match_space_is_a_duplicate(svc):
    report = svc.check_overlap(draft_text=as_draft(MXFP8, "mxfp8_again"))
    assert report.duplicates == [MXFP8] and report.subject == "draft mxfp8_again"
    f = report.findings[0]
    assert f.kind == "duplicate" and all(d.relation == "identical" for d in f.dimensions)
    shape = next(d for d in f.dimensions if d.dimension == "shape")
    assert "wide_grid ~ wide_grid" in shape.detail  # which recipe rows meet on shared shapes


def test_a_draft_without_a_scale_format_overlaps_both_gemm_cards(svc):
    draft = as_draft(BLOCKSCALE, "blockscale_any_scale", ("  scale_formats:\n  - fp32_block\n", ""))
    report = svc.check_overlap(draft_text=draft)
    assert sorted(report.overlaps) == [BLOCKSCALE, MXFP8] and report.duplicates == []
    f = next(f for f in report.findings if f.card_id == BLOCKSCALE)
    scale = next(d for d in f.dimensions if d.dimension == "scale_formats")
    assert scale.relation == "overlap" and "takes any scale formats" in scale.detail


def test_different_evidence_values_separate_two_moe_cards(svc):
    draft = as_draft(MOE, "moe_stage1_blkmap", ("    required: stage2\n", "    required: stage1\n"))
    report = svc.check_overlap(draft_text=draft)
    f = next(f for f in report.findings if f.card_id == MOE) if report.findings else None
    assert report.duplicates == [] and report.overlaps == []
    assert f is None or (f.kind == "distinct" and "evidence" in f.separated_by[0])
    # the regex-less MoE card shares no hotspot name by signature, so only a clash shows
    from skill_server.matching.overlap import Subject, compare
    from skill_server.cards.schema import parse_card_text

    finding = compare(Subject.of(parse_card_text(draft, "d").card), Subject.of(svc.card(MOE).card))
    assert finding.kind == "distinct" and finding.separated_by[0].startswith("evidence: evidence stage")


def test_disjoint_shape_constraints_separate_otherwise_identical_cards(svc):
    draft = as_draft(MXFP8, "mxfp8_short_k", ("  - metric: K\n    ge: 256\n", "  - metric: K\n    lt: 256\n"))
    report = svc.check_overlap(draft_text=draft)
    f = next(f for f in report.findings if f.card_id == MXFP8)
    assert f.kind == "distinct" and f.separated_by[0].startswith("shape: no probed shape")


def test_an_invalid_draft_is_compared_on_its_match_block(svc):
    draft = as_draft(MXFP8, "broken_draft", ("  isolated_speedup_min: 1.15\n", ""))
    report = svc.check_overlap(draft_text=draft)
    assert report.duplicates == [MXFP8] and "compared on its match block" in report.notes[0]
    with pytest.raises(ServiceError, match="no valid match block"):
        svc.check_overlap(draft_text="---\nid: x\n---\n")


def test_a_match_spec_can_be_checked_and_bad_requests_are_refused(svc):
    spec = {"operator": ["dense_gemm"], "gens": ["MI355X"], "dtypes": ["fp8"], "regimes": ["prefill"],
            "scale_formats": ["blockscale"], "profile_signature": {"op_name_regex": "gemm_a8w8_blockscale"}}
    report = svc.check_overlap(match_spec=spec)
    assert report.overlaps == [BLOCKSCALE] and report.subject == "match spec"
    with pytest.raises(ServiceError, match="exactly one"):
        svc.check_overlap(card_id=MXFP8, match_spec=spec)
    with pytest.raises(ServiceError, match="match_spec: gens"):
        svc.check_overlap(match_spec={k: v for k, v in spec.items() if k != "gens"})
    with pytest.raises(ServiceError, match="unknown card"):
        svc.check_overlap(card_id="nope")


# ------------------------------------------------------------------- regex probes
def test_probe_names_cover_every_alternative_and_each_is_accepted():
    assert set(regex_samples(BLOCKSCALE_RX)) >= {"gemm_a8w8_blockscale", "kernel_gemm_xdl_blockscale"}
    assert set(regex_samples(r"^fused_moe_(?:gemm|sum)\d{1,2}[^_]$")) == {
        "fused_moe_gemm0x", "fused_moe_sum0x", "fused_moe_gemm00x", "fused_moe_sum00x"}
    assert regex_samples("") == () and regex_samples("(unclosed") == ()


def test_regexes_sharing_a_hotspot_name_overlap_and_reordered_ones_are_identical():
    shared, equivalent = shared_names(BLOCKSCALE_RX, MXFP8_RX)
    assert "gemm_a8w8_blockscale" in shared and not equivalent
    assert compare_op_names(BLOCKSCALE_RX, "gemm_a8w8_blockscale|kernel_gemm_xdl.*blockscale").relation == "identical"
    assert compare_op_names("moe_sum|topk_reduce", "gemm_a8w8").relation == "disjoint"
    assert compare_op_names("", BLOCKSCALE_RX).relation == "overlap"  # a regex-less card takes any name


# --------------------------------------------------------------------------- lint
def lint_messages(skills):
    return [(p.severity, p.file, p.message) for p in SkillService(skills).lint()]


def add_card(skills, card_id, text):
    (skills / card_id).mkdir()
    (skills / card_id / "SKILL.md").write_text(text)


def test_the_shipped_catalog_has_no_overlap_findings():
    assert not [m for m in lint_messages(SKILLS) if "match space" in m[2]]


def test_lint_makes_duplicates_errors_and_overlaps_warnings(tmp_path):
    skills = make_project(tmp_path)
    add_card(skills, "mxfp8_again", as_draft(MXFP8, "mxfp8_again"))
    add_card(skills, "zz_blockscale_any", as_draft(BLOCKSCALE, "zz_blockscale_any", ("  scale_formats:\n  - fp32_block\n", "")))
    found = [m for m in lint_messages(skills) if "match space" in m[2]]
    errors = [m for m in found if m[0] == "error"]
    assert len(errors) == 1 and "mxfp8_again" in errors[0][1] and f"duplicates card {MXFP8!r}" in errors[0][2]
    # each pair once, on the less established card (experimental before validated)
    pairs = sorted(tuple(sorted((m[1].split("/")[-2], m[2].split("card ")[1].split(" ")[0].strip("'"))))
                   for m in found if m[0] == "warning")
    assert pairs == [(BLOCKSCALE, "zz_blockscale_any"), (MXFP8, "zz_blockscale_any"), ("mxfp8_again", "zz_blockscale_any")]
    on_file = {m[1].split("/")[-2] for m in found if m[0] == "warning" and MXFP8 in m[2] + m[1]}
    assert on_file == {MXFP8}  # experimental mxfp8 card, not the validated copy of the block-scale card


def test_a_duplicate_that_supersedes_its_twin_is_a_warning_to_retire_it(tmp_path):
    skills = make_project(tmp_path)
    add_card(skills, "mxfp8_v2", as_draft(MXFP8, "mxfp8_v2", ("supersedes: []\n", f"supersedes: [{MXFP8}]\n")))
    found = [m for m in lint_messages(skills) if "match space" in m[2]]
    assert [m[0] for m in found] == ["warning"] and "retire the superseded card" in found[0][2]


def test_cli_overlap_exits_1_on_a_duplicate(tmp_path, capsys):
    from skill_server.cli.entry import main
    draft = tmp_path / "draft.md"
    draft.write_text(as_draft(MXFP8, "mxfp8_again"))
    assert main(["overlap", str(draft)]) == 1
    out = capsys.readouterr().out
    assert f"DUPLICATE {MXFP8}" in out and "REVIEW duplicate_functionality" in out
    assert main(["overlap", "--card", BLOCKSCALE, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["findings"][0]["card_id"] == MXFP8 and data["findings"][0]["kind"] == "distinct"
    assert main(["overlap"]) == 2


def test_signature_alternatives_count_as_names_the_card_answers(svc):
    """A card names its hotspot by op_name_regex or any alternative (the matcher searches
    all of them): a draft whose own regex shares nothing with the block-scale card but whose
    alternatives (aiter's CK instance names, torch's scaled_mm op) do is an overlap."""
    draft = as_draft(BLOCKSCALE, "blockscale_by_alternatives",
                     ('op_name_regex: "kernel_gemm_xdl.*blockscale|gemm_a8w8_blockscale"',
                      'op_name_regex: "my_private_fp8_gemm"'))
    report = svc.check_overlap(draft_text=draft)
    assert BLOCKSCALE in report.overlaps
    f = next(f for f in report.findings if f.card_id == BLOCKSCALE)
    op = next(d for d in f.dimensions if d.dimension == "op_name")
    assert op.relation == "overlap" and {"a8w8_blockscale", "aten::_scaled_mm"} & set(op.shared)
    assert "a8w8_blockscale" in " ".join(f.shared_hotspot_names)


def test_op_name_comparison_takes_every_regex_of_a_signature():
    assert compare_op_names(["only_mine"], ["theirs", "only_mine_too"]).relation == "overlap"
    assert compare_op_names(["alpha_kernel", "beta_kernel"], ["beta_kernel", "alpha_kernel"]).relation == "identical"
    disjoint = compare_op_names(["alpha_kernel"], ["beta_kernel", "gamma_kernel"])
    assert disjoint.relation == "disjoint" and "/gamma_kernel/" in disjoint.detail
    assert compare_op_names("alpha_kernel", "alpha_kernel").relation == "identical"  # one regex still works

"""The card schema accepts the given cards as written and locates every problem."""
from __future__ import annotations

from pathlib import Path

import pytest

from skill_server.cards.schema import CardParseError, parse_card_file, parse_card_text, split_front_matter

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"
REPO = Path(__file__).resolve().parents[1]
SEED_CARDS = ["000_4ed7cffa54fa22b6.txt", "001_548f58abb3da2173.txt"]


def _seed_dir() -> Path:
    # CI lays shared/ beside the clone; a developer checkout has it at ../shared too
    for base in (REPO.parent / "shared" / "seeds", SEEDS):
        if base.is_dir():
            return base
    pytest.skip("shared/seeds not present beside the checkout")


@pytest.mark.parametrize("name", SEED_CARDS)
def test_seed_front_matter_is_accepted_exactly_as_written(name):
    text = (_seed_dir() / name).read_text()
    parsed = parse_card_text(text, name)  # the title line before '---' is allowed
    assert parsed.card.id in {"flydsl_fp8_blockscale_gemm", "flydsl_prefill_moe_stage2_fp8partial"}
    # fields keep their meaning: the op regex, the speedup floor and the parity mode
    assert parsed.card.expects.isolated_speedup_min in {1.05, 1.15}
    assert parsed.card.expects.parity in {"required", "relaxed"}
    assert "When to use" in parsed.sections


def test_project_cards_keep_every_seed_field_with_the_same_value():
    import yaml

    for seed_name, card_id in zip(SEED_CARDS, ["flydsl_fp8_blockscale_gemm", "flydsl_prefill_moe_stage2_fp8partial"]):
        seed_fm, *_ = split_front_matter((_seed_dir() / seed_name).read_text(), seed_name)
        ours_fm, *_ = split_front_matter((REPO / "skills" / card_id / "SKILL.md").read_text(), card_id)
        seed, ours = yaml.safe_load(seed_fm), yaml.safe_load(ours_fm)

        def walk(a, b, path=""):
            if isinstance(a, dict):
                for k, v in a.items():
                    assert k in b, f"{card_id}: seed field {path}{k} missing"
                    walk(v, b[k], f"{path}{k}.")
            else:
                assert a == b, f"{card_id}: {path} changed"

        walk(seed, ours)


def test_all_three_project_cards_parse():
    ids = {parse_card_file(p).card.id for p in (REPO / "skills").glob("*/SKILL.md")}
    assert ids == {"flydsl_fp8_blockscale_gemm", "flydsl_prefill_moe_stage2_fp8partial", "flydsl_mxfp8_8wave_gemm"}


def test_mxfp8_card_records_the_duplicate_review_and_disjoint_scale_format():
    card = parse_card_file(REPO / "skills" / "flydsl_mxfp8_8wave_gemm" / "SKILL.md").card
    assert card.match.scale_formats == ["ue8m0_1x32"]
    assert card.reviews and card.reviews[0].verdict == "duplicate_functionality"
    bs = parse_card_file(REPO / "skills" / "flydsl_fp8_blockscale_gemm" / "SKILL.md").card
    assert bs.match.scale_formats == ["fp32_block"]


MINIMAL = """---
id: demo_card
title: demo
kind: expert_skill
scope: kernel
match:
  operator: [dense_gemm]
  gens: [gfx950]
  dtypes: [fp8_e4m3]
  regimes: [prefill]
  profile_signature:
    op_name_regex: "gemm_demo"
expects:
  isolated_speedup_min: 1.1
  parity: required
validation:
  status: validated
  last_verified: '2026-01-02'
  gpu: MI355X
role: advisory_prior
---
## When to use
x
"""


def _problems(text: str):
    with pytest.raises(CardParseError) as exc:
        parse_card_text(text, "demo/SKILL.md")
    return exc.value.problems


def test_minimal_card_parses():
    assert parse_card_text(MINIMAL, "demo/SKILL.md").card.id == "demo_card"


def test_typo_field_is_an_error_with_line_and_field():
    text = MINIMAL.replace("  gens: [gfx950]", "  gen: [gfx950]")
    probs = _problems(text)
    fields = {p.field for p in probs}
    assert "match.gen" in fields and "match.gens" in fields
    typo = next(p for p in probs if p.field == "match.gen")
    assert typo.line == 8 and "unknown field" in typo.message
    assert typo.file == "demo/SKILL.md"


def test_wrong_type_names_the_value():
    probs = _problems(MINIMAL.replace("isolated_speedup_min: 1.1", "isolated_speedup_min: fast"))
    p = next(p for p in probs if p.field == "expects.isolated_speedup_min")
    assert "'fast'" in p.message and p.line == 14


def test_invalid_regex_is_reported():
    probs = _problems(MINIMAL.replace('op_name_regex: "gemm_demo"', 'op_name_regex: "gemm_(demo"'))
    assert any("invalid regular expression" in p.message and p.field == "match.profile_signature.op_name_regex" for p in probs)


def test_malformed_yaml_has_a_line():
    probs = _problems(MINIMAL.replace("  regimes: [prefill]", "  regimes: [prefill"))
    assert probs[0].line is not None and "malformed YAML" in probs[0].message


def test_duplicate_key_is_refused_not_silently_dropped():
    probs = _problems(MINIMAL.replace("role: advisory_prior", "role: advisory_prior\nrole: other"))
    assert "duplicate key" in probs[0].message and probs[0].field == "role"


def test_missing_front_matter_and_unclosed_front_matter():
    assert "no YAML front matter" in _problems("# just markdown\n")[0].message
    assert "not closed" in _problems("---\nid: x\n")[0].message


def test_validated_card_needs_a_real_date():
    probs = _problems(MINIMAL.replace("'2026-01-02'", "'2026-02-30'"))
    assert any("impossible date" in p.message for p in probs)
    probs = _problems(MINIMAL.replace("'2026-01-02'", "'last week'"))
    assert any("needs a YYYY-MM-DD date" in p.message for p in probs)


def test_shape_predicate_must_name_a_known_metric_and_a_comparator():
    bad = MINIMAL.replace("role: advisory_prior", """role: advisory_prior
shape_classes:
- id: c1
  title: t
  when:
  - metric: width
    ge: 3
  - metric: N
  recipe: {core: x, decisive_lever: y}""")
    probs = _problems(bad)
    msgs = " | ".join(p.message for p in probs)
    assert "unknown metric 'width'" in msgs and "at least one of" in msgs


def test_evidence_required_value_must_be_declared():
    bad = MINIMAL.replace("  profile_signature:", """  evidence:
  - id: stage
    about: moe stage
    field: stage
    values: {stage2: moe2}
    required: stage3
  profile_signature:""")
    assert any("required value 'stage3'" in p.message for p in _problems(bad))

"""Each card's verifier binding agrees with the problem it names (one source of truth: the
problem executes, the card declares; ``skill-server lint`` checks it through
``skill_server.cards.lint_binding``), and a binding that drifts from its problem is an error."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from ledger_support import BLOCKSCALE, MOE, MXFP8, make_project

from skill_server.cards.catalog import Catalog
from skill_server.cards.lint_binding import binding_problems

REPO = Path(__file__).resolve().parents[1]
CARDS = Catalog.load(REPO / "skills", use_cache=False).cards


@pytest.mark.parametrize("card_id", sorted(CARDS))
def test_binding_matches_problem(card_id):
    assert binding_problems(CARDS[card_id], REPO) == []


def test_card_parity_mode_follows_expects():
    # 'required' in the seed cards means strict parity; 'relaxed' stays relaxed
    for parsed in CARDS.values():
        c = parsed.card
        want = "relaxed" if c.expects.parity == "relaxed" else "strict"
        assert c.verifier.parity.mode == want, c.id


DRIFTS = [  # (card, text in SKILL.md, replacement, field reported, message part)
    (BLOCKSCALE, "reference: {rocm: flydsl_recipe,", "reference: {rocm: flydsl_5wave,", "verifier.reference.rocm",
     "'flydsl_5wave' for rocm is not an arm"),
    (BLOCKSCALE, "cpu: torch_dequant}", "cpu: ck_blockscale}", "verifier.baseline.cpu", "runs on ['rocm'], not on cpu"),
    (MXFP8, "min_cosine: 0.9999}", "min_cosine: 0.99}", "verifier.parity.min_cosine", "0.99 in the card, 0.9999"),
    (MXFP8, "parity: {mode: strict,", "parity: {mode: relaxed,", "verifier.parity.mode", "the problem checks 'strict'"),
    (MXFP8, "shapes: [1024x5120x2048,", "shapes: [1024x5120,", "verifier.shapes.0", "expected 3 values"),
]


@pytest.mark.parametrize(("card", "old", "new", "field", "message"), DRIFTS)
def test_lint_reports_a_binding_that_drifted_from_its_problem(tmp_path, capsys, card, old, new, field, message):
    from skill_server.cli.entry import main
    skills = make_project(tmp_path)
    path = skills / card / "SKILL.md"
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    code = main(["--skills-dir", str(skills), "lint", "--json"])
    problems = json.loads(capsys.readouterr().out)["problems"]
    found = [p for p in problems if p["field"] == field and message in p["message"]]
    assert code == 1 and found, [p["message"] for p in problems if p["severity"] == "error"]
    assert found[0]["file"].endswith(f"{card}/SKILL.md") and found[0]["line"]


def test_lint_reports_a_problem_that_names_another_card_or_does_not_load(tmp_path, capsys):
    from skill_server.cli.entry import main
    skills = make_project(tmp_path)
    problem = tmp_path / "kernels" / MOE / "problem.py"
    problem.write_text(problem.read_text() + "\nPROBLEM = __import__('dataclasses').replace(PROBLEM, card_id='other')\n")
    (tmp_path / "kernels" / MXFP8 / "problem.py").write_text("import no_such_module_for_lint\n")
    assert main(["--skills-dir", str(skills), "lint", "--json"]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    messages = {p["message"] for p in problems}
    assert any("declares card_id 'other'" in m for m in messages)
    missing = next(p for p in problems if "no_such_module_for_lint" in p["message"])
    assert missing["severity"] == "warning" and "binding not checked" in missing["message"]

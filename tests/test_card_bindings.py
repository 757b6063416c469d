"""Each card's verifier binding agrees with the problem it names (one source of truth:
the problem executes, the card declares; they must not drift apart)."""
from __future__ import annotations

from pathlib import Path

import pytest

from skill_server.catalog import Catalog

REPO = Path(__file__).resolve().parents[1]
CARDS = Catalog.load(REPO / "skills", use_cache=False).cards


@pytest.mark.parametrize("card_id", sorted(CARDS))
def test_binding_matches_problem(card_id):
    from verifiers.problem import load_problem

    card = CARDS[card_id].card
    assert card.verifier is not None, f"{card_id} has no verifier binding"
    problem = load_problem(card.verifier.problem)
    assert problem.card_id == card_id
    for role, per_platform in (("baseline", card.verifier.baseline), ("reference", card.verifier.reference)):
        for platform, arm in per_platform.items():
            assert arm in problem.arms, f"{card_id}: {role} arm {arm!r} for {platform} not in the problem"
            assert platform in problem.arms[arm].platforms, f"{card_id}: arm {arm!r} does not run on {platform}"
    if card.verifier.parity:
        assert card.verifier.parity.mode == problem.parity.mode
        for key in ("rtol", "atol", "max_mismatch", "min_cosine", "max_cosine_drop"):
            declared = getattr(card.verifier.parity, key)
            if declared is not None:
                assert getattr(problem.parity, key) == pytest.approx(declared), f"{card_id}: parity {key} differs"
    for arm, sig in card.verifier.signatures.items():
        spec = problem.arms[arm].signature
        assert set(sig.required) <= set(spec.required), f"{card_id}: {arm} required signature differs"
        assert set(sig.forbidden) <= set(spec.forbidden), f"{card_id}: {arm} forbidden signature differs"
    if card.verifier.segment_kernels:
        assert tuple(card.verifier.segment_kernels) == tuple(problem.segment.kernels)
    for shape in card.verifier.shapes:
        problem.parse_shape(shape)


def test_card_parity_mode_follows_expects():
    # 'required' in the seed cards means strict parity; 'relaxed' stays relaxed
    for parsed in CARDS.values():
        c = parsed.card
        want = "relaxed" if c.expects.parity == "relaxed" else "strict"
        assert c.verifier.parity.mode == want, c.id

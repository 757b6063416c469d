"""The op-name index never loses a card whose regex matches (it only skips work)."""
from __future__ import annotations

import random
import re

import pytest

from skill_server.matching.matcher import CardIndex
from skill_server.matching.regex_literals import required_literals

FRAGS = ["gemm", "xdl", "blockscale", "a8w8", "moe", "moe2", "down_proj", "fp8", "mx", "v3", "kernel", "_", "stage"]
PIECES = [".*", "_?", "?", "+", "[0-9]+", "(a|b)", "\\.", "\\d", "x{2}", "(?:cs|hs)huffle", "|"]


def random_regex(rng: random.Random) -> str:
    out = []
    for _ in range(rng.randint(1, 6)):
        out.append(rng.choice(FRAGS) if rng.random() < 0.6 else rng.choice(PIECES))
    pattern = "".join(out).strip("|") or "gemm"
    try:
        re.compile(pattern)
    except re.error:
        return "gemm"
    return pattern


def random_name(rng: random.Random) -> str:
    return "".join(rng.choice(FRAGS + ["a", "b", "7", ".", "huffle", "cs", "X", "GEMM"]) for _ in range(rng.randint(1, 8)))


class FakeCard:
    def __init__(self, pattern, alternatives=()):
        from skill_server.cards.schema import ProfileSignature

        from types import SimpleNamespace

        sig = ProfileSignature(op_name_regex=pattern, alternatives=list(alternatives))
        self.match = SimpleNamespace(profile_signature=sig, operator=["dense_gemm"])


class Counting:
    """A compiled regex that counts its searches."""

    def __init__(self, pattern: str) -> None:
        self.rx, self.calls = re.compile(pattern, re.IGNORECASE), 0

    def search(self, text: str):
        self.calls += 1
        return self.rx.search(text)


class CountingList(list):
    def __init__(self, items) -> None:
        super().__init__(items)
        self.iterations = 0

    def __iter__(self):
        self.iterations += 1
        return super().__iter__()


@pytest.mark.parametrize("seed", range(5))
def test_index_candidates_include_every_regex_match(seed):
    rng = random.Random(seed)
    patterns = [random_regex(rng) for _ in range(300)]
    index = CardIndex(FakeCard(p) for p in patterns)
    for _ in range(300):
        name = random_name(rng)
        expected = {i for i, p in enumerate(patterns) if re.search(p, name, re.IGNORECASE)}
        assert set(index.candidates(name, [])) == expected, name


def test_required_literals_examples():
    assert required_literals("kernel_gemm_xdl.*blockscale|gemm_a8w8_blockscale") == [
        ["kernel_gemm_xdl", "blockscale"], ["gemm_a8w8_blockscale"]]
    assert required_literals("ab?cdef") == [["a", "cdef"]]
    assert required_literals("[abc]def|gh") is None  # 'gh' is too short to index: always run
    assert required_literals("gemm_(x|y)") == [["gemm_"]]


def test_alternatives_are_indexed_like_the_main_signature():
    index = CardIndex([FakeCard("kernel_gemm_xdl.*blockscale", ["a8w8_blockscale", "aten::_scaled_mm"])])
    assert index.candidates("a8w8_blockscale_bpreshuffle_1x128x128_256x64", []) == [0]
    assert index.candidates("nvjet_sm90_qqtst", [], launch_op="aten::_scaled_mm_v2") == [0]
    assert index.candidates("nvjet_sm90_qqtst", []) == []


def test_each_pattern_runs_at_most_once_per_name_however_often_its_literal_occurs():
    """A 4 KB name repeating a card's key literal used to re-check the pattern at every hit
    (40 s for a 292 KB name); now literal checks and regex runs are once per pattern and name."""
    from skill_server.matching.hotspot import Hotspot
    from skill_server.matching.matcher import Query, evaluate_card
    from skill_server.cards.vocabulary import vocabulary

    from skill_server.cards.schema import Card

    # keyed on "kernel_gemm_xdl" / "kernel_gemm_xdl_": 255 hits each in the name below
    matching, failing = "kernel_gemm_xdl.*blockscale", "kernel_gemm_xdl_[0-9]+never"
    cards = [Card.model_validate({
        "id": f"c{i}", "title": "t", "kind": "expert_skill", "scope": "kernel", "role": "advisory_prior",
        "match": {"operator": ["dense_gemm"], "gens": ["gfx950"], "dtypes": ["fp8_e4m3"], "regimes": ["prefill"],
                  "profile_signature": {"op_name_regex": p}},
        "expects": {"isolated_speedup_min": 1.05, "parity": "required"},
        "validation": {"status": "draft", "last_verified": "never", "gpu": "x"}}) for i, p in enumerate((matching, failing))]
    index = CardIndex(cards)
    counters = {p: Counting(p) for p in (matching, failing)}
    index._compiled.update(counters)
    lists = {p: CountingList(index._branches[p]) for p in (matching, failing)}
    index._branches.update(lists)
    name = ("kernel_gemm_xdl_" * 255)[:4080] + "blockscale"
    hotspot = Hotspot(op_name=name, launch_op="aiter::kernel_gemm_xdl_thing")
    query = Query.of(hotspot, vocabulary(), index)
    assert set(query.hits) == {matching}
    for card in cards:  # the cards reuse the query's verdicts: no regex runs again
        evaluate_card(card, hotspot, index, vocabulary(), query)
    assert index._by_literal["kernel_gemm_xdl"] == [matching] and index._by_literal["kernel_gemm_xdl_"] == [failing]
    assert counters[matching].calls == 1  # matched the op name; the launch op lacks "blockscale"
    assert counters[failing].calls == 0  # "never" is in neither name: the regex never runs
    assert lists[matching].iterations == 2 and lists[failing].iterations == 2  # one literal check per name

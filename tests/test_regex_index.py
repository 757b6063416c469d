"""The op-name index never loses a card whose regex matches (it only skips work)."""
from __future__ import annotations

import random
import re

import pytest

from skill_server.matching import CardIndex
from skill_server.regex_literals import required_literals

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
    def __init__(self, pattern):
        from types import SimpleNamespace

        self.match = SimpleNamespace(profile_signature=SimpleNamespace(op_name_regex=pattern), operator=["dense_gemm"])


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

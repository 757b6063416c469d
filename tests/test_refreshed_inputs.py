"""The judge copies per call only what a problem's refresh writes (``Problem.refreshed_inputs``).

The MoE card's DeepSeek shape ran the H200 out of memory when every staged call carried its
own copy of the 7 GiB expert weights that the refresh never touches. Each card's declaration
is checked against what its refresh really writes, and the judge refuses a refresh that
writes an input the problem did not declare (a shared, uncopied tensor would change under
calls already staged).
"""
from __future__ import annotations

import dataclasses
import random
import time

import pytest

torch = pytest.importorskip("torch")

from verifiers.hw.device import Flusher, open_device  # noqa: E402
from verifiers.judge.blame import Blame  # noqa: E402
from verifiers.judge.session import Session  # noqa: E402
from verifiers.options import VerifyOptions  # noqa: E402
from verifiers.problem import load_problem  # noqa: E402

CARDS = ("flydsl_fp8_blockscale_gemm", "flydsl_mxfp8_8wave_gemm", "flydsl_prefill_moe_stage2_fp8partial")


def _session(problem, dims):
    device = open_device("cpu")
    return Session(problem, dict(dims), device, Flusher(device, 1 << 16), VerifyOptions(), random.Random(3),
                   time.monotonic() + 60)


@pytest.mark.parametrize("card", CARDS)
def test_each_cards_refresh_writes_exactly_the_inputs_it_declares(card):
    problem = load_problem(card)
    dims = dict(problem.smoke_shapes[0])
    values = problem.make_inputs(dims, 0, torch.device("cpu"))
    before = {k: v.clone() for k, v in values.items()}
    problem.refresh_inputs(values, dims, 12345)
    written = {k for k in values if not torch.equal(values[k].view(torch.uint8), before[k].view(torch.uint8))}
    assert problem.refreshed_inputs is not None
    assert written == set(problem.refreshed_inputs)
    assert not written & set(problem.static_inputs)


def test_staged_calls_share_the_inputs_the_refresh_leaves_and_copy_the_rest():
    problem = load_problem("flydsl_prefill_moe_stage2_fp8partial")
    session = _session(problem, problem.smoke_shapes[0])
    template = session.values_for(1)
    staged = session.stage(template, 3)
    for values in staged:
        for name in session.changing:
            shared = values[name].data_ptr() == template[name].data_ptr()
            assert shared == (name not in problem.refreshed_inputs), name
    # the copies are fresh per call, the shared weights equal the set's own
    assert not torch.equal(staged[0]["a2"], staged[1]["a2"])
    assert torch.equal(staged[2]["w2"], template["w2"])


def test_a_refresh_that_writes_an_undeclared_input_is_the_problems_error():
    base = load_problem("flydsl_prefill_moe_stage2_fp8partial")

    def sloppy(values, dims, seed):
        base.refresh_inputs(values, dims, seed)
        values["w2"].mul_(0.5)  # writes the weights it declared it leaves alone

    problem = dataclasses.replace(base, refresh_inputs=sloppy)
    session = _session(problem, problem.smoke_shapes[0])
    with pytest.raises(Blame, match=r"wrote \['w2'\]"):
        session.stage(session.values_for(1), 2)
    assert session.refresh_checked is False


@pytest.mark.parametrize("change", ["one_bit", "swap", "last_chunk", "permute"])
def test_the_refresh_check_digest_sees_any_change_without_a_copy(monkeypatch, change):
    from verifiers.judge import tensors

    monkeypatch.setattr(tensors, "DIGEST_CHUNK", 1000)  # several chunks at a test's size
    t = torch.randn(64, 96, generator=torch.Generator().manual_seed(0))  # rows of whole 8-byte words
    before = tensors.content_digest(t)
    assert tensors.content_digest(t.clone()) == before
    words = t.view(-1).view(torch.int32)
    if change == "one_bit":
        words[17] ^= 1
    elif change == "swap":
        t[[3, 4]] = t[[4, 3]].clone()  # a pure reordering of the digest's words
    elif change == "last_chunk":
        words[-1] += 1
    else:
        t.copy_(t.flip(0))
    assert tensors.content_digest(t) != before


def test_a_refresh_that_only_reorders_an_undeclared_input_is_the_problems_error():
    base = load_problem("flydsl_prefill_moe_stage2_fp8partial")

    def shuffles(values, dims, seed):
        base.refresh_inputs(values, dims, seed)
        values["w2"].copy_(values["w2"].flip(0))  # same bytes, other experts' places

    problem = dataclasses.replace(base, refresh_inputs=shuffles)
    session = _session(problem, problem.smoke_shapes[0])
    with pytest.raises(Blame, match=r"wrote \['w2'\]"):
        session.stage(session.values_for(1), 2)

"""MoE stage-2 inputs: skewed routing, sorted expert blocks, the fp32 oracle and the torch
emulations of both partial formats."""
from __future__ import annotations

import pytest
import torch

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import oracle, routing
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.routing import ROUTE_BLOCK_M

SMALL = {"M": 40, "N": 96, "K": 64, "E": 8, "top_k": 2}


def test_routing_is_skewed_like_the_card_not_uniform():
    g = torch.Generator().manual_seed(3)
    ids, _ = routing.route(4096, 128, 4, g)
    imb = routing.load_imbalance(ids, 128)
    assert 2.9 <= imb <= 4.2, imb  # the card measured 3.44x on real routing
    uniform = routing.load_imbalance(torch.randint(0, 128, (4096, 4)), 128)
    assert uniform < 1.6 < imb


def test_busiest_expert_changes_with_the_seed():
    busiest = set()
    for seed in range(4):
        ids, _ = routing.route(2048, 64, 4, torch.Generator().manual_seed(seed))
        busiest.add(int(torch.bincount(ids.flatten().long(), minlength=64).argmax()))
    assert len(busiest) > 1


def test_router_weights_and_expert_choice_are_well_formed():
    ids, w = routing.route(256, 16, 4, torch.Generator().manual_seed(0))
    assert ids.dtype == torch.int32 and w.dtype == torch.float32
    assert torch.allclose(w.sum(1), torch.ones(256), atol=1e-6) and bool((w > 0).all())
    assert all(len(set(row)) == 4 for row in ids.tolist())  # no expert twice per token


def test_unreachable_imbalance_is_rejected_and_small_shapes_are_capped():
    with pytest.raises(ValueError, match="not reachable"):
        routing.zipf_exponent(8, 4, 3.44)
    assert routing.reachable_imbalance(8, 4) < 2.0
    assert routing.reachable_imbalance(128, 4) == pytest.approx(3.44)


def test_align_blocks_places_every_pair_once_in_single_expert_blocks():
    ids, _ = routing.route(50, 8, 2, torch.Generator().manual_seed(1))
    sorted_ids, block_expert, num_padded = routing.align_blocks(ids, 8)
    n = ids.numel()
    assert sorted_ids.numel() == routing.padded_capacity(50, 8, 2)
    used = int(num_padded)
    assert used % ROUTE_BLOCK_M == 0
    real = sorted_ids[sorted_ids < n].long()
    assert sorted(real.tolist()) == list(range(n))  # every (token, slot) exactly once
    assert bool((sorted_ids[used:] == n).all()) and bool((block_expert[used // ROUTE_BLOCK_M :] == -1).all())
    flat = ids.flatten().long()
    for b in range(used // ROUTE_BLOCK_M):
        rows = sorted_ids[b * ROUTE_BLOCK_M : (b + 1) * ROUTE_BLOCK_M].long()
        rows = rows[rows < n]
        assert rows.numel() > 0
        assert bool((flat[rows] == int(block_expert[b])).all())


def test_input_shapes_do_not_depend_on_the_seed():
    a = oracle.make_inputs(SMALL, 0)
    b = oracle.make_inputs(SMALL, 1)
    assert {k: (v.shape, v.dtype) for k, v in a.items()} == {k: (v.shape, v.dtype) for k, v in b.items()}
    assert oracle.dims_of(a) == SMALL
    assert not torch.equal(a["a2"], b["a2"])


def test_bad_inputs_get_an_actionable_error():
    inputs = oracle.make_inputs(SMALL, 0)
    with pytest.raises(ValueError, match="'a2'.*bfloat16"):
        oracle.dims_of({**inputs, "a2": inputs["a2"].float()})
    with pytest.raises(ValueError, match="lack"):
        oracle.dims_of({k: v for k, v in inputs.items() if k != "num_padded"})
    with pytest.raises(ValueError, match="multiples of 16"):
        oracle.check_dims({**SMALL, "N": 100})


def test_oracle_matches_a_direct_per_token_sum_in_float64():
    inputs = oracle.make_inputs(SMALL, 2)
    out = oracle.oracle(inputs, SMALL)["out"]
    a2, w2 = inputs["a2"].double(), inputs["w2"].double()
    for t in (0, 7, SMALL["M"] - 1):
        ref = torch.zeros(SMALL["N"], dtype=torch.float64)
        for j in range(SMALL["top_k"]):
            f = t * SMALL["top_k"] + j
            e = int(inputs["topk_ids"][t, j])
            ref += float(inputs["topk_weights"][t, j]) * (w2[e] @ a2[f])
        assert torch.allclose(out[t].double(), ref, rtol=1e-5, atol=1e-5)


def test_oracle_is_odd_in_the_activations():
    inputs = oracle.make_inputs(SMALL, 0)
    out = oracle.oracle(inputs)["out"]
    flipped = oracle.oracle({**inputs, "a2": -inputs["a2"]})["out"]
    assert torch.equal(flipped, -out)


def test_emulated_arms_sit_where_the_card_says():
    inputs = oracle.make_inputs({"M": 128, "N": 256, "K": 128, "E": 16, "top_k": 4}, 0)
    p = oracle.stage2_partials(inputs)
    ref = oracle.reduce_partials(p, 4)
    s = 224.0 / float(p.abs().max())

    def figs(x):
        x = x.float()
        cos = torch.nn.functional.cosine_similarity(x.flatten(), ref.flatten(), 0).item()
        return cos, float((x - ref).norm() / ref.norm())

    cos_b, l2_b = figs(oracle.emulate_bf16_partial(inputs, p)["out"])
    cos_f, l2_f = figs(oracle.emulate_fp8_partial(inputs, s, p)["out"])
    assert l2_b < 0.005 and cos_b > 0.99995
    assert 0.01 < l2_f < 0.04  # e4m3 keeps 3 mantissa bits: ~2.7 % relative error
    assert 1e-4 < cos_b - cos_f < 7e-4  # the card: 0.998934 -> 0.998583 on full logits
    half = oracle.emulate_fp8_partial(inputs, s, p, reducer_scale=2 * s)["out"].float()
    assert figs(half)[1] > 0.45  # a reducer with 2s halves every output


def test_traffic_figures():
    d = {"M": 16384, "N": 7168, "K": 2048, "E": 256, "top_k": 8}
    assert oracle.partial_bytes(d, fp8=False) == 2 * oracle.partial_bytes(d, fp8=True)
    assert oracle.reduce_bytes(d, fp8=False) == 16384 * 8 * 7168 * 2 + 16384 * 7168 * 2
    assert oracle.segment_min_bytes(d) < oracle.partial_bytes(d, fp8=False) + oracle.segment_min_bytes(d)

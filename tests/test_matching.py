"""The matcher's required behaviours (issue 2, item 6) on the project's three cards."""
from __future__ import annotations

from pathlib import Path

import pytest

from skill_server.cards.catalog import Catalog
from skill_server.matching.hotspot import GemmShape, Hotspot
from skill_server.matching.matcher import MatchInputError, match_hotspot

REPO = Path(__file__).resolve().parents[1]
CK_BLOCKSCALE = "kernel_gemm_xdl_cshuffle_v3_blockscale_b_preshuffle<256, 128x128x128, fp8>"
BS, MX, MOE = "flydsl_fp8_blockscale_gemm", "flydsl_mxfp8_8wave_gemm", "flydsl_prefill_moe_stage2_fp8partial"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    cat = Catalog.load(REPO / "skills")
    assert not cat.problems
    return cat


def match(catalog, **kw):
    return match_hotspot(Hotspot(**kw), catalog.index)


def ids(entries):
    return [e.card_id for e in entries]


def reason(entry, criterion):
    return next(r for r in entry.reasons if r.criterion == criterion)


def test_ck_blockscale_with_fp32_block_scales_picks_the_blockscale_card(catalog):
    r = match(catalog, op_name=CK_BLOCKSCALE, gen="gfx950", scale_format="fp32_block")
    assert ids(r.matches) == [BS]
    assert MX in ids(r.not_applicable)
    na = r.not_applicable[0]
    assert reason(na, "scale_format").status == "failed"


def test_same_kernel_name_with_ue8m0_scales_picks_the_mxfp8_card(catalog):
    r = match(catalog, op_name=CK_BLOCKSCALE, gen="gfx950", scale_format="ue8m0_1x32")
    assert ids(r.matches) == [MX]
    assert BS in ids(r.not_applicable)


def test_mxfp8_dtype_spelling_implies_the_scale_format(catalog):
    r = match(catalog, op_name=CK_BLOCKSCALE, gen="MI355X", dtype="mxfp8")
    assert ids(r.matches) == [MX]


def test_unknown_scale_format_abstains_on_both_gemm_cards(catalog):
    r = match(catalog, op_name=CK_BLOCKSCALE, gen="gfx950")
    assert sorted(ids(r.abstained)) == sorted([BS, MX])
    assert not r.matches
    assert all(any("--scale-format" in m for m in a.missing) for a in r.abstained)


def test_non_gfx950_generation_is_not_applicable_and_says_so(catalog):
    r = match(catalog, op_name=CK_BLOCKSCALE, gen="MI300X", scale_format="fp32_block")
    assert not r.matches and BS in ids(r.not_applicable)
    gen = reason(next(n for n in r.not_applicable if n.card_id == BS), "gen")
    assert gen.status == "failed" and "gfx942" in gen.detail


def test_missing_generation_abstains(catalog):
    r = match(catalog, op_name=CK_BLOCKSCALE, scale_format="fp32_block")
    assert BS in ids(r.abstained)


def test_generation_and_dtype_aliases_are_normalised(catalog):
    r = match(catalog, op_name=CK_BLOCKSCALE, gen="mi355x", dtype="float8_e4m3fn", scale_format="blockscale")
    assert ids(r.matches) == [BS]
    assert r.hotspot.gen == "gfx950" and r.hotspot.dtype == "fp8_e4m3" and r.hotspot.scale_format == "fp32_block"


def test_unknown_generation_or_dtype_is_a_clear_input_error(catalog):
    with pytest.raises(MatchInputError, match="unknown GPU generation 'gfx9999'"):
        match(catalog, op_name=CK_BLOCKSCALE, gen="gfx9999")
    with pytest.raises(MatchInputError, match="unknown dtype 'fp7'"):
        match(catalog, op_name=CK_BLOCKSCALE, dtype="fp7")


@pytest.mark.parametrize(
    "shape,cls,tuned",
    [
        ((4096, 65536, 1536), "wide_n_locality", True),
        ((16384, 7168, 768), "k_light_grid_saturated", True),
        ((4096, 2048, 7168), "narrow_n_deep_k", True),
        ((16384, 1536, 7168), "narrow_n_deep_k", False),  # gate_up: untuned, same class by shape
    ],
)
def test_shape_classes_select_their_validated_rows(catalog, shape, cls, tuned):
    M, N, K = shape
    r = match(catalog, op_name=CK_BLOCKSCALE, gen="gfx950", scale_format="fp32_block", shape=GemmShape(M=M, N=N, K=K))
    m = r.matches[0]
    assert m.shape_class.class_id == cls and m.shape_class.tuned is tuned
    assert m.recipe == m.shape_class.recipe
    if not tuned:
        assert any("re-sweep" in c for c in m.caveats)


def test_label_carries_zero_weight(catalog):
    base = dict(op_name=CK_BLOCKSCALE, gen="gfx950", scale_format="fp32_block", shape=GemmShape(M=4096, N=2048, K=7168))
    a = match(catalog, **base, label="q_up_proj").matches[0]
    b = match(catalog, **base, label="down_proj").matches[0]
    c = match(catalog, **base).matches[0]
    assert a.shape_class.class_id == b.shape_class.class_id == c.shape_class.class_id == "narrow_n_deep_k"
    assert a.score == b.score == c.score
    assert all(r.criterion != "label" for r in a.reasons)


def test_untuned_shape_outside_all_classes_gets_the_nearest_class(catalog):
    r = match(catalog, op_name=CK_BLOCKSCALE, gen="gfx950", scale_format="fp32_block", shape=GemmShape(M=4096, N=8192, K=4096))
    sc = r.matches[0].shape_class
    assert sc.selection == "nearest" and not sc.tuned and sc.distance > 0


def test_moe_matches_only_on_stage2_evidence(catalog):
    r = match(catalog, op_name="fused_moe_moe2_gemm_kernel", gen="gfx950", regime="prefill",
              segment_kernels=["moe_sum_reduce_kernel"])
    assert ids(r.matches) == [MOE]
    assert reason(r.matches[0], "evidence:moe_stage").status == "matched"


def test_moe_stage_is_never_read_from_the_neighbours(catalog):
    # a stage-1 GEMM sits next to the stage-2 reduce in a kernel-trace window too
    r = match(catalog, op_name="fused_moe_kernel", gen="gfx950", regime="prefill",
              segment_kernels=["moe_sum_kernel", "moe_align_block_size_kernel"])
    assert ids(r.abstained) == [MOE]
    assert reason(r.abstained[0], "evidence:moe_stage").status == "unknown"


def test_moe_stage1_evidence_is_not_applicable(catalog):
    r = match(catalog, op_name="fused_moe_moe1_gate_up_kernel", gen="gfx950", segment_kernels=["moe_sum_reduce_kernel"])
    assert MOE in ids(r.not_applicable)
    r = match(catalog, op_name="fused_moe_kernel", gen="gfx950", stage="stage1")
    assert MOE in ids(r.not_applicable)


def test_moe_missing_or_ambiguous_stage_abstains_with_the_reason(catalog):
    r = match(catalog, op_name="fused_moe_kernel", gen="gfx950", regime="prefill")
    assert ids(r.abstained) == [MOE] and not r.matches
    r = match(catalog, op_name="fused_moe_moe1_moe2_kernel", gen="gfx950", regime="prefill", segment_kernels=["moe_sum"])
    ab = r.abstained[0]
    assert "ambiguous" in reason(ab, "evidence:moe_stage").detail


def test_moe_stage2_without_a_separate_reduce_is_not_applicable(catalog):
    r = match(catalog, op_name="fused_moe_kernel", gen="gfx950", stage="stage2", segment_kernels=["fused_moe_moe2_accumulate"])
    assert MOE in ids(r.not_applicable)


def test_min_pct_gpu_gates(catalog, tmp_path):
    import shutil

    dst = tmp_path / "skills"
    shutil.copytree(REPO / "skills", dst)
    card = dst / BS / "SKILL.md"
    card.write_text(card.read_text().replace("min_pct_gpu: 0.0", "min_pct_gpu: 5.0", 1))
    cat = Catalog.load(dst)
    base = dict(op_name=CK_BLOCKSCALE, gen="gfx950", scale_format="fp32_block")
    assert BS in ids(match(cat, **base, pct_gpu=1.0).not_applicable)
    assert ids(match(cat, **base, pct_gpu=12.5).matches) == [BS]


def test_unrelated_kernel_considers_no_card(catalog):
    r = match(catalog, op_name="vectorized_elementwise_kernel<add>", gen="gfx950")
    assert r.cards_considered == 0 and not r.matches and not r.abstained
    assert r.notes


def test_every_reason_is_one_of_three_statuses(catalog):
    r = match(catalog, op_name=CK_BLOCKSCALE, gen="gfx950", scale_format="fp32_block", shape=GemmShape(M=64, N=7168, K=7168))
    for entry in r.matches + r.not_applicable + r.abstained:
        assert entry.reasons and all(x.status in {"matched", "failed", "unknown"} for x in entry.reasons)


def test_mxfp8_shape_constraints_are_hard(catalog):
    r = match(catalog, op_name=CK_BLOCKSCALE, gen="gfx950", scale_format="ue8m0_1x32", shape=GemmShape(M=100, N=5120, K=2048))
    na = next(n for n in r.not_applicable if n.card_id == MX)
    assert "multiple of 64" in reason(na, "shape").detail


# ---- names and spellings users type or tools print ------------------------------------------

@pytest.mark.parametrize("gen", ["gfx950:sramecc+:xnack-", "AMD Instinct MI355X", "mi355x", "MI350X"])
def test_generation_spellings(catalog, gen):
    r = match(catalog, op_name=CK_BLOCKSCALE, gen=gen, scale_format="fp32_block")
    assert ids(r.matches) == [BS] and r.hotspot.gen == "gfx950"


@pytest.mark.parametrize("dtype, scale, card", [
    ("torch.float8_e4m3fn", "fp32_block", BS),
    ("c10::Float8_e4m3fn", "blockwise", BS),
    ("fp8_e4m3", "e8m0", MX),
    ("fp8_e4m3", "mxfp8", MX),
])
def test_dtype_and_scale_format_spellings(catalog, dtype, scale, card):
    assert ids(match(catalog, op_name=CK_BLOCKSCALE, gen="gfx950", dtype=dtype, scale_format=scale).matches) == [card]


AITER_CK_INSTANCE = "a8w8_blockscale_bpreshuffle_1x128x128_256x64x256x128_16x16_16x16_1x32x1x8_8x8x1_1x2_intrawave_v1"


def test_aiter_ck_instance_names_are_considered_and_their_scale_block_is_no_format(catalog):
    r = match(catalog, op_name=AITER_CK_INSTANCE, gen="gfx950")
    # both GEMM cards see it; 1x128x128 is the scale block and 1x32x1x8 a cluster size: neither states
    # fp32 vs ue8m0, so both abstain instead of the old 1x32 hint reading it as ue8m0
    assert sorted(ids(r.abstained)) == sorted([BS, MX]) and not r.matches
    assert reason(r.abstained[0], "scale_format").status == "unknown"
    assert ids(match(catalog, op_name=AITER_CK_INSTANCE, gen="gfx950", scale_format="fp32_block").matches) == [BS]


@pytest.mark.parametrize("name, fmt", [
    ("gemm_a8w8_mxfp8_8wave_kernel", "ue8m0_1x32"),
    ("ck::kernel_gemm_xdl_blockscale<ck::e8m0_bexp_t>", "ue8m0_1x32"),
    ("gemm_a8w8_blockscale_1x32x1x8", None),
    ("fmoe_kernel_e8m0x4", None),  # e8m0 inside another token
])
def test_scale_format_from_a_name_only_when_the_name_states_it(name, fmt):
    from skill_server.cards.vocabulary import vocabulary

    assert vocabulary().scale_format_in(name) == fmt


def test_launch_op_reaches_the_signature(catalog):
    r = match(catalog, op_name="nvjet_sm90_qqtst_128x128_Ablk128_Bvec128", launch_op="aten::_scaled_mm_v2",
              gen="gfx950", scale_format="fp32_block")
    assert ids(r.matches) == [BS]
    assert "(the launching op)" in reason(r.matches[0], "op_name").detail


# ---- target generation ---------------------------------------------------------------------

def test_target_gen_matches_as_if_for_another_device(catalog):
    h = Hotspot(op_name=CK_BLOCKSCALE, gen="H200", scale_format="fp32_block")
    assert BS in ids(match_hotspot(h, catalog.index).not_applicable)
    r = match_hotspot(h, catalog.index, target_gen="MI355X")
    assert ids(r.matches) == [BS] and (r.target_gen, r.source_gen) == ("gfx950", "sm_90")
    assert any("as if for gfx950" in n and "sm_90" in n for n in r.notes)
    with pytest.raises(MatchInputError, match="target generation"):
        match_hotspot(h, catalog.index, target_gen="gfx9999")


# ---- bounded input ---------------------------------------------------------------------------

def test_names_are_capped_with_a_clear_error():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="at most 4096 characters"):
        Hotspot(op_name="k" * 4097)
    with pytest.raises(ValidationError, match="at most 64 items"):
        Hotspot(op_name="k", segment_kernels=["x"] * 65)


@pytest.mark.parametrize("dims", [dict(M=10**30, N=1, K=1), dict(M=1, N=2**31, K=1), dict(M=0, N=1, K=1)])
def test_huge_or_empty_dims_are_refused_not_overflowed(dims):
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        GemmShape(**dims)


def test_largest_allowed_dims_still_match(catalog):
    big = GemmShape(M=2**31 - 1, N=2**31 - 1, K=2**31 - 1)
    r = match(catalog, op_name=CK_BLOCKSCALE, gen="gfx950", scale_format="fp32_block", shape=big)
    assert ids(r.matches) == [BS] and r.matches[0].shape_class is not None


def test_a_long_name_is_not_echoed_whole(catalog):
    r = match(catalog, op_name="x" * 4096, gen="gfx950")
    assert r.notes and all(len(n) < 600 for n in r.notes)


@pytest.mark.parametrize("shape", [(16, 2048, 7168), (1, 1536, 7168), (128, 2048, 4096), (16, 7168, 768),
                                   (32, 65536, 1536)])
def test_decode_shapes_are_inside_no_class(catalog, shape):
    """The card measured half a 128x256 tile per CU 14x slower: a decode M (8 CTAs for M=16,
    N=2048) must not get the narrow-N row as if it were tuned there."""
    M, N, K = shape
    r = match(catalog, op_name=CK_BLOCKSCALE, gen="gfx950", scale_format="fp32_block", shape=GemmShape(M=M, N=N, K=K))
    sc = r.matches[0].shape_class
    assert sc.selection == "nearest" and not sc.tuned and sc.also_satisfies == []
    assert any("ablation" in c for c in r.matches[0].caveats)

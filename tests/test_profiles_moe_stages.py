"""MoE evidence as the stage-2 card's prose says: the stage from the launch sequence of one MoE
layer, a reduce only when it is a top-k reduce, abstention with the reason when it stays open."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from profile_support import cpu_ops, graft_kernels, kernel_trace_csv
from skill_server.cards.catalog import Catalog
from skill_server.matching.hotspot import GemmShape, Hotspot
from skill_server.matching.matcher import match_hotspot
from skill_server.profiles import load_profile

REPO = Path(__file__).resolve().parents[1]
REAL = REPO / "tests" / "fixtures" / "profiles" / "torch_cpu_scaled_ops.json"
MOE = "flydsl_prefill_moe_stage2_fp8partial"
ALIGN = "void vllm::moe::moe_align_block_size_kernel<int>(int const*, int*, int*, int*, int, int, int, int)"
FUSED = "fused_moe_kernel"  # vLLM's Triton kernel: both stages, one name
SILU = "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>(c10::BFloat16*)"
MOE_SUM = "void vllm::moe::moe_sum_kernel<c10::BFloat16, 2>(c10::BFloat16*, c10::BFloat16 const*, int)"
CK_SORT = "void ck::kernel_moe_sorting<int, float>(ck::MoeSortingKernelArgs)"
CK_MOE = "void ck::kernel_moe_gemm<ck::GridwiseMoeGemm<256, 128, 128>, true>(ck::GridwiseMoeGemm<256, 128, 128>::Argument)"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
CUSTOM_AR = "void vllm::cross_device_reduce_1stage<c10::BFloat16, 8>(vllm::RankData*, vllm::RankSignals, int)"
FINALIZE = "void tensorrt_llm::kernels::finalizeMoeRoutingKernel<__nv_bfloat16, __nv_bfloat16, 1>(__nv_bfloat16 const*)"


@pytest.fixture(scope="module")
def index():
    return Catalog.load(REPO / "skills").index


def hotspots(csv_text: str) -> dict[tuple[str, str | None], Hotspot]:
    s = load_profile(content=csv_text, top=50)
    out = {}
    for ph in s.hotspots:
        for h in ph.per_variant(s.total_gpu_time_ns):
            out[(h.op_name, h.stage)] = h
    return out


def with_gen(h: Hotspot, **kw) -> Hotspot:
    return h.model_copy(update={"gen": "gfx950", **kw})


def test_a_name_shared_by_both_stages_becomes_two_hotspots_by_launch_order(index) -> None:
    # vLLM: align -> fused_moe_kernel (w1) -> silu_and_mul -> fused_moe_kernel (w2) -> moe_sum, twice
    layer = [(ALIGN, 5_000), (FUSED, 140_000), (SILU, 20_000), (FUSED, 110_000), (MOE_SUM, 40_000)]
    hs = hotspots(kernel_trace_csv(layer + layer))
    s1, s2 = hs[(FUSED, "stage1")], hs[(FUSED, "stage2")]
    assert "1st MoE GEMM" in s1.stage_basis and "2nd MoE GEMM" in s2.stage_basis
    assert s1.pct_gpu > s2.pct_gpu  # each stage keeps its own share
    assert [m.card_id for m in match_hotspot(with_gen(s2, regime="prefill"), index).matches] == [MOE]
    assert MOE in [n.card_id for n in match_hotspot(with_gen(s1, regime="prefill"), index).not_applicable]


def test_ck_kernel_moe_gemm_with_a_fused_activation(index) -> None:
    # CK 2-stage MoE: sort -> kernel_moe_gemm (gate/up + silu fused) -> kernel_moe_gemm (down) -> reduce
    hs = hotspots(kernel_trace_csv([(CK_SORT, 6_000), (CK_MOE, 140_000), (CK_MOE, 110_000),
                                    ("moe_topk_reduce_kernel", 40_000)]))
    assert {k[1] for k in hs if k[0] == "ck::kernel_moe_gemm"} == {"stage1", "stage2"}


def test_a_stage1_gemm_two_dispatches_before_the_reduce_is_not_stage2(index) -> None:
    hs = hotspots(kernel_trace_csv([(ALIGN, 5_000), ("moe_gemm_w13_kernel", 140_000), ("moe_gemm_w2_kernel", 110_000),
                                    (MOE_SUM, 40_000)]))
    assert hs[("moe_gemm_w13_kernel", "stage1")] and hs[("moe_gemm_w2_kernel", "stage2")]
    r = match_hotspot(with_gen(hs[("moe_gemm_w13_kernel", "stage1")], regime="prefill"), index)
    assert MOE in [n.card_id for n in r.not_applicable]


def test_an_ambiguous_sequence_abstains_with_the_reason(index) -> None:
    # one MoE GEMM name, no sort, no activation, no reduce: nothing places it
    hs = hotspots(kernel_trace_csv([(FUSED, 100_000), (FUSED, 90_000), (FUSED, 80_000)]))
    (h,) = [h for k, h in hs.items() if k[0] == FUSED]
    assert h.stage is None and "does not tell the stages apart" in h.stage_basis
    r = match_hotspot(with_gen(h, regime="prefill"), index)
    assert [a.card_id for a in r.abstained] == [MOE]
    detail = next(x.detail for x in r.abstained[0].reasons if x.criterion == "evidence:moe_stage")
    assert "does not tell the stages apart" in detail


def test_stats_without_order_cannot_place_a_shared_name(index) -> None:
    text = '"Name","Calls","TotalDurationNs","AverageNs","Percentage","MinNs","MaxNs","StdDev"\n' \
           f'"{FUSED}",4,500000,125000,90,80000,140000,1\n"{MOE_SUM}",2,50000,25000,10,25000,25000,0\n'
    (h,) = [ph.hotspot for ph in load_profile(content=text).hotspots if ph.hotspot.op_name == FUSED]
    assert h.stage is None
    r = match_hotspot(with_gen(h, regime="prefill"), index)
    assert [a.card_id for a in r.abstained] == [MOE]


@pytest.mark.parametrize("collective", [NCCL, CUSTOM_AR, "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"])
def test_a_collective_is_never_the_top_k_reduce(index, collective) -> None:
    hs = hotspots(kernel_trace_csv([(ALIGN, 5_000), ("moe_gemm1_kernel", 140_000), ("moe_gemm2_down_kernel", 110_000),
                                    (collective, 60_000)]))
    h = hs[("moe_gemm2_down_kernel", "stage2")]
    assert any(k in collective for k in [s[:20] for s in h.segment_kernels]) or h.segment_kernels
    r = match_hotspot(with_gen(h, regime="prefill"), index)
    (na,) = [n for n in r.not_applicable if n.card_id == MOE]
    detail = next(x.detail for x in na.reasons if x.criterion == "evidence:separate_topk_reduce")
    assert "collective kernels never count" in detail and not r.matches


def test_a_top_k_reduce_under_another_name_abstains_rather_than_ruling_out(index) -> None:
    h = Hotspot(op_name="moe_gemm2_kernel", gen="gfx950", regime="prefill", segment_kernels=[
        "tensorrt_llm::kernels::finalizeMoeRoutingKernel", "moe_gemm1_kernel"])
    r = match_hotspot(h, index)
    assert [a.card_id for a in r.abstained] == [MOE]
    detail = next(x.detail for x in r.abstained[0].reasons if x.criterion == "evidence:separate_topk_reduce")
    assert "finalizeMoeRoutingKernel" in detail and "'topk_reduce' kernel by the vocabulary" in detail


@pytest.mark.parametrize("m, regime, outcome", [
    (16384, None, "matches"),        # large M: prefill
    (32, None, "not_applicable"),    # decode-size M, no regime: the prefill-only card is ruled out
    (512, None, "abstained"),        # could be either: ask
    (32, "prefill", "matches"),      # a stated regime wins
])
def test_prefill_only_card_and_regime_from_m(index, m, regime, outcome) -> None:
    h = Hotspot(op_name="moe_gemm2_kernel", gen="gfx950", stage="stage2", regime=regime,
                shape=GemmShape(M=m, N=7168, K=2048, groups=256), segment_kernels=["moe_sum_kernel"])
    r = match_hotspot(h, index)
    assert MOE in [e.card_id for e in getattr(r, outcome)]


def test_no_shape_and_no_regime_abstains(index) -> None:
    r = match_hotspot(Hotspot(op_name="moe_gemm2_kernel", gen="gfx950", stage="stage2",
                              segment_kernels=["moe_sum_kernel"]), index)
    assert [a.card_id for a in r.abstained] == [MOE]
    assert any("--regime" in m for m in r.abstained[0].missing)


# ---- torch traces: the real CPU ops of vLLM's fused experts, with their kernels -----------------

def test_vllm_fused_experts_in_a_torch_trace(index) -> None:
    doc = json.loads(REAL.read_text())
    ext = lambda name: cpu_ops(doc, name)[0]["args"]["External id"]  # noqa: E731
    outer = ext("vllm::inplace_fused_experts")
    launches = [(ext("_moe_C::moe_align_block_size"), ALIGN), (outer, FUSED), (ext("_C::silu_and_mul"), SILU),
                (outer, FUSED), (ext("_moe_C::moe_sum"), MOE_SUM)]
    s = load_profile(content=json.dumps(graft_kernels(doc, launches, device="AMD Instinct MI355X",
                                                      runtime="hipModuleLaunchKernel")))
    (fused,) = [ph for ph in s.hotspots if ph.hotspot.op_name == FUSED]
    split = {h.stage: h for h in fused.per_variant(s.total_gpu_time_ns)}
    assert set(split) == {"stage1", "stage2"}
    # each stage's GEMM from the fused op's recorded inputs: tokens 512, hidden 256, intermediate 128, 8 experts
    assert split["stage1"].shape == GemmShape(M=512, N=256, K=256, groups=8)
    assert split["stage2"].shape == GemmShape(M=512, N=256, K=128, groups=8)
    assert split["stage2"].launch_op == "vllm::inplace_fused_experts"
    assert "moe_sum_kernel" in " ".join(split["stage2"].segment_kernels)
    r = match_hotspot(split["stage2"], index)  # M=512: neither decode nor prefill by M -> ask for the regime
    assert [a.card_id for a in r.abstained] == [MOE] and any("--regime" in m for m in r.abstained[0].missing)
    r = match_hotspot(split["stage2"].model_copy(update={"regime": "prefill"}), index)
    assert [m.card_id for m in r.matches] == [MOE]


def test_aiter_stage_ops_name_the_stage_of_a_shared_ck_kernel(index) -> None:
    doc = json.loads(REAL.read_text())
    ext = lambda name: cpu_ops(doc, name)[0]["args"]["External id"]  # noqa: E731
    launches = [(ext("aiter::ck_moe_stage1"), CK_MOE), (ext("aiter::ck_moe_stage2"), CK_MOE)]
    s = load_profile(content=json.dumps(graft_kernels(doc, launches, device="AMD Instinct MI355X")))
    (ph,) = s.hotspots
    split = {h.stage: h for h in ph.per_variant(s.total_gpu_time_ns)}
    assert split["stage2"].shape == GemmShape(M=512, N=256, K=128, groups=8)
    assert "aiter::ck_moe_stage2" in split["stage2"].stage_basis

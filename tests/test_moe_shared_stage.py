"""A fused-MoE GEMM name both stages share (issue 24, item 10): vLLM's and SGLang's Triton
``fused_moe_kernel`` and CK's ``kernel_moe_gemm`` run once for stage 1 (gate/up) and again
for stage 2 (down) in every layer. From the name alone the matcher abstains on the stage and
says what to supply; a profile's launch order places each launch. Launch orders are the ones
vLLM and SGLang issue (kernel names as rocprofv3 / torch.profiler print them)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from mcp_support import build, cli_command, subprocess_env, text, with_client
from profile_support import kernel_trace_csv

from skill_server.cards.catalog import Catalog
from skill_server.matching.hotspot import GemmShape, Hotspot
from skill_server.matching.matcher import match_hotspot
from skill_server.profiles import load_profile

REPO = Path(__file__).resolve().parents[1]
MOE = "flydsl_prefill_moe_stage2_fp8partial"
FUSED = "fused_moe_kernel"
CK_MOE = "void ck::kernel_moe_gemm<ck::GridwiseMoeGemm<256, 128, 128>, true>(ck::GridwiseMoeGemm<256, 128, 128>::Argument)"
# vLLM (csrc/moe, fused_moe.py): routing, align + sort, fp8 per-token-group quant, w13 GEMM,
# activation, quant, w2 GEMM, top-k sum (top_k > 2; with top_k == 2 an aten add sums the pair)
V_TOPK = "void vllm::moe::topkGatingSoftmax<8, 128, 4, 16, 32, int>(float const*, bool const*, int*, int, int*, int, int, int)"
V_ALIGN = "void vllm::moe::moe_align_block_size_kernel<int>(int const*, int*, int*, int*, int, int, int, int)"
V_SORT = "void vllm::moe::count_and_sort_expert_tokens_kernel<int>(int const*, int*, int*, int)"
QUANT = "_per_token_group_quant_fp8"
V_SILU = "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>(c10::BFloat16*)"
V_GELU = "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::gelu_tanh_kernel<c10::BFloat16>, true>(c10::BFloat16*)"
V_SUM = "void vllm::moe::moe_sum_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*, int)"
ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
       "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)")
# SGLang (sgl-kernel + fused_moe_triton): align + sort, w13 GEMM, activation, w2 GEMM, sum-reduce
S_GATE = "void moe_fused_gate_kernel<float, 256, 8>(void*, void*, float*, int*, long, long, long, long, double)"
S_ALIGN = "void moe_align_block_size_kernel<int>(int const*, int*, int*, int*, int, int, int, unsigned long, int, bool)"
S_SORT = "void count_and_sort_expert_tokens_kernel<int>(int const*, int*, int*, unsigned long)"
S_ACT = "void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &silu>(__nv_bfloat16*, __nv_bfloat16 const*, int)"
S_SUM = "_moe_sum_reduce_kernel"

LAUNCH_ORDERS = {
    "vllm_fp8": [(V_TOPK, 3_000), (V_ALIGN, 5_000), (V_SORT, 3_000), (QUANT, 2_000), (FUSED, 140_000),
                 (V_SILU, 20_000), (QUANT, 2_000), (FUSED, 110_000), (V_SUM, 40_000)],
    "vllm_top2": [(V_TOPK, 3_000), (V_ALIGN, 5_000), (FUSED, 140_000), (V_GELU, 20_000), (FUSED, 110_000),
                  (ADD, 4_000)],
    "sglang": [(S_GATE, 3_000), (S_ALIGN, 4_000), (S_SORT, 3_000), (FUSED, 140_000), (S_ACT, 20_000),
               (FUSED, 110_000), (S_SUM, 30_000)],
}


@pytest.fixture(scope="module")
def index():
    return Catalog.load(REPO / "skills").index


def _stage_reason(entry):
    return next(r for r in entry.reasons if r.criterion == "evidence:moe_stage")


# ---- the name alone --------------------------------------------------------------------------------

@pytest.mark.parametrize("op_name, launch_op", [
    (FUSED, None),
    (FUSED, "vllm::inplace_fused_experts"),
    (FUSED, "sglang::moe_sum_reduce"),  # a reduce word in a neighbour's name places nothing
    (CK_MOE, None),
])
def test_a_name_both_stages_share_abstains_on_the_stage_and_says_what_to_supply(index, op_name, launch_op):
    h = Hotspot(op_name=op_name, launch_op=launch_op, gen="gfx950", regime="prefill", dtype="fp8_e4m3",
                shape=GemmShape(M=16384, N=7168, K=2048), segment_kernels=["moe_sum_reduce"])
    r = match_hotspot(h, index)
    assert not r.matches and [a.card_id for a in r.abstained] == [MOE]
    stage = _stage_reason(r.abstained[0])
    assert stage.status == "unknown" and "states no stage" in stage.detail and "cannot place it" in stage.detail
    (need,) = r.abstained[0].missing
    assert "--stage stage2" in need and "match_profile" in need and "launch order" in need


def test_a_name_that_states_its_stage_still_places_it(index):
    for op, status in (("moe_ck2stages_gemm2_256x128x128x128_1x4_MulABScaleExpertWeight_v3", "matched"),
                       ("moe_ck2stages_gemm1_256x128x128x128_1x4_MulABScale_v3", "failed")):
        h = Hotspot(op_name=op, gen="gfx950", regime="prefill", segment_kernels=["moe_sum_reduce"])
        r = match_hotspot(h, index)
        entry = (r.matches + r.not_applicable)[0]
        assert _stage_reason(entry).status == status, (op, _stage_reason(entry).detail)


def test_a_given_stage_places_the_shared_name(index):
    h = Hotspot(op_name=FUSED, gen="gfx950", regime="prefill", stage="stage2", segment_kernels=["moe_sum_reduce"])
    assert [m.card_id for m in match_hotspot(h, index).matches] == [MOE]


def test_cli_match_on_the_name_alone_abstains_and_names_what_to_supply():
    proc = subprocess.run([*cli_command(), "match", "--op", FUSED, "--gen", "gfx950", "--regime", "prefill",
                           "--segment-kernel", "moe_sum_reduce", "--json"],
                          capture_output=True, text=True, timeout=120, env=subprocess_env())
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert not data["matches"] and [a["card_id"] for a in data["abstained"]] == [MOE]
    assert any("--stage" in m and "match-profile" in m for m in data["abstained"][0]["missing"])


def test_mcp_match_skill_on_the_name_alone_abstains():
    hotspot = {"op_name": FUSED, "gen": "MI355X", "regime": "prefill", "segment_kernels": ["moe_sum_reduce"]}
    result = with_client(build(), lambda c: c.call_tool("match_skill", {"hotspot": hotspot}))
    assert not result.is_error, text(result)
    data = result.structured_content
    assert not data.get("matches") and [a["card_id"] for a in data["abstained"]] == [MOE]
    assert "match_profile" in text(result) and "--stage stage2" in text(result)


# ---- a profile's launch order ----------------------------------------------------------------------

def _variants(csv_text: str) -> dict[str | None, Hotspot]:
    s = load_profile(content=csv_text, top=50)
    (ph,) = [ph for ph in s.hotspots if ph.hotspot.op_name == FUSED]
    return {h.stage: h for h in ph.per_variant(s.total_gpu_time_ns)}


def _card(result):
    return next(e for e in (*result.matches, *result.abstained, *result.not_applicable) if e.card_id == MOE)


@pytest.mark.parametrize("engine", list(LAUNCH_ORDERS))
def test_real_launch_orders_place_both_launches_of_the_shared_name(index, engine):
    split = _variants(kernel_trace_csv(LAUNCH_ORDERS[engine] * 3))
    assert set(split) == {"stage1", "stage2"}, {k: v.stage_basis for k, v in split.items()}
    r2 = match_hotspot(split["stage2"].model_copy(update={"gen": "gfx950", "regime": "prefill"}), index)
    r1 = match_hotspot(split["stage1"].model_copy(update={"gen": "gfx950", "regime": "prefill"}), index)
    assert _stage_reason(_card(r2)).status == "matched" and "launch sequence" in _stage_reason(_card(r2)).detail
    assert _stage_reason(_card(r1)).status == "failed" and MOE in [n.card_id for n in r1.not_applicable]
    if engine != "vllm_top2":  # with top_k == 2 an aten add sums the pair: no separate top-k reduce kernel
        assert [m.card_id for m in r2.matches] == [MOE]


def test_match_profile_over_mcp_places_the_stages_the_name_alone_cannot():
    trace = kernel_trace_csv(LAUNCH_ORDERS["sglang"] * 2)
    result = with_client(build(), lambda c: c.call_tool("match_profile", {
        "content": trace, "gen": "MI355X", "regime": "prefill"}))
    assert not result.is_error, text(result)
    fused = [h for h in result.structured_content["hotspots"] if h["op_name"] == FUSED]
    by_stage = {h["shape"]: h for h in fused}
    assert set(by_stage) == {"stage1", "stage2"}, list(by_stage)
    assert by_stage["stage2"]["match"]["card_id"] == MOE and "match" not in by_stage["stage1"]


def _runs(*runs: list[tuple[str, int]]) -> str:
    """Runs of one queue separated by idle gaps (a launch-bound step): each run is a new sequence."""
    header, *rows = kernel_trace_csv(runs[0]).strip().split("\r\n")
    start, first = 10**12, 1
    out = [header]
    for run in runs:
        out += kernel_trace_csv(run, start=start, first_dispatch=first).strip().split("\r\n")[1:]
        start += sum(d for _, d in run) + 2_000 * len(run) + 1_000_000  # 1 ms idle between runs
        first += len(run)
    return "\r\n".join(out) + "\r\n"


def test_a_launch_order_cut_by_idle_gaps_places_each_stage_or_leaves_it_open(index):
    # vLLM, launch-bound: [align, w13 GEMM, silu] | idle | [w2 GEMM, moe_sum], twice
    first, second = [(V_ALIGN, 5_000), (FUSED, 140_000), (V_SILU, 20_000)], [(FUSED, 110_000), (V_SUM, 40_000)]
    split = _variants(_runs(first, second, first, second))
    assert set(split) == {"stage1", "stage2"}
    assert "directly before its layer's top-k reduce" in split["stage2"].stage_basis
    # the w2 GEMM alone in its run (no reduce after it): nothing places it, and the placed
    # stage-1 launches do not lend it their stage
    split = _variants(_runs(first, [(FUSED, 110_000)], first, [(FUSED, 110_000)]))
    assert set(split) == {"stage1", None}
    # each keeps its own time: the placed stage-1 launches 2 x 140 us, the open ones 2 x 110 us
    assert split["stage1"].pct_gpu / split[None].pct_gpu == pytest.approx(140 / 110, rel=1e-3)
    open_one = split[None].model_copy(update={"gen": "gfx950", "regime": "prefill"})
    stage = _stage_reason(_card(match_hotspot(open_one, index)))
    assert stage.status == "unknown" and "does not tell the stages apart" in stage.detail, stage.detail


# ---- aiter / CK on MI355X: ck_tile entry points, per-GEMM token permutes ---------------------------

def _flatmm(kind: int) -> str:
    kernel = ("ck_tile::MoeFlatmmKernel<ck_tile::GemmSpatiallyLocalTilePartitioner<ck_tile::TileGemmShape<"
              "ck_tile::sequence<16, 128, 256>, ck_tile::sequence<1, 4, 1>, ck_tile::sequence<16, 16, 32>, false, "
              "false>, 1, 1>, ck_tile::F16xMXF4FlatmmPipelineAGmemBGmemCRegV1<ck_tile::F16xMXF4FlatmmPipelineProblem<"
              "std::bfloat16_t, ck_tile::pk_float4_e2m1_t, float> >, ck_tile::CShuffleEpilogue<void>, "
              f"(ck_tile::MoeFlatmmKind){kind}, ck_tile::moe::MoeSilu>")
    return (f"void ck_tile::kentry<2, {kernel}, {kernel}::MoeFlatmmKernelArgs<ck_tile::FlatmmScalePointer<1, 32, "
            f"ck_tile::e8m0_bexp_t> > >({kernel}::MoeFlatmmKernelArgs<int>) [clone .kd]")


A_TOPK = ("void aiter::grouped_topk_kernel<float, float __vector(4), 1, true, true, false>(float*, float const*, "
          "float*, int*, unsigned long, unsigned long, int, int, int, int, float) [clone .kd]")
A_SORT = ("void aiter::opus_moe_sorting_entry<aiter::MoeSortingKernel<aiter::MoeSortingProblemEx<int, float, 1, true, "
          "false, false, true, 0> >, aiter::MoeSortingKernel<int>::Kargs>(aiter::MoeSortingKernel<int>::Kargs) [clone .kd]")
A_FILL = ("void at::native::vectorized_elementwise_kernel<8, at::native::FillFunctor<c10::BFloat16>, std::array<char*, "
          "1ul> >(int, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul>) [clone .kd]")
A_SWIGLU = ("void aiter::swiglu_act_and_mul_kernel<std::bfloat16_t, std::bfloat16_t, 8>(std::bfloat16_t*, "
            "std::bfloat16_t const*, int) [clone .kd]")
A_AR = ("void aiter::cross_device_reduce_1stage<std::bfloat16_t, 4, false>(aiter::RankData*, aiter::RankData*, "
        "aiter::RankSignals, aiter::Signal*, std::bfloat16_t*, int, int) [clone .kd]")
CKT_SORT = ("void ck_tile::kentry<2, ck_tile::MoeSortingMultiPhaseKernel_P23<ck_tile::MoeSortingProblemMp<int, float, 2, "
            "8, true, 0> >, ck_tile::MoeSortingMultiPhaseKernel_P23<int>::Kargs>(int) [clone .kd]")
FP4_QUANT = "_ZN5aiter30dynamic_per_group_scaled_quantIDF16bN4opus5fp4_tELi32EEEvPT0_PKT_PfPKiii.kd"
FP4_PERMUTE = "_ZN5aiter21mxfp4_moe_sort_kernelILi32ELi24ELi32EEEvPhPKhPKiS4_iiii.kd"
MX_GEMM = ("void ck::kernel_moe_mxgemm_2lds<ck::GridwiseMoeGemmMX_BPreshuffle<ck::tensor_layout::gemm::RowMajor, "
           "ck::tensor_layout::gemm::ColumnMajor, ck::Tuple<>, ck::tensor_layout::gemm::RowMajor, ck::f4x2_pk_t, "
           "ck::e8m0_bexp_t, ck::f4x2_pk_t, ck::e8m0_bexp_t, float, float, ck::Tuple<>, ck::bhalf_t>, true>"
           "(ck::GridwiseMoeGemmMX_BPreshuffle<int>::Argument) [clone .kd]")


def test_a_ck_tile_entry_point_is_named_by_the_kernel_it_launches():
    from trace_readers.kernel_names import short_name

    assert short_name(_flatmm(3)) == short_name(_flatmm(2)) == "ck_tile::MoeFlatmmKernel"
    assert short_name(CKT_SORT) == "ck_tile::MoeSortingMultiPhaseKernel_P23"
    assert short_name("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, "
                      "int>, int> >(cutlass::gemm::kernel::GemmUniversal<int>::Params)") == \
        "cutlass::gemm::kernel::GemmUniversal"


def test_vllm_aiter_flatmm_moe_launch_order_places_both_stages():
    # vLLM on MI355X (aiter, MXFP4): route, sort, zero the output, gate/up flatmm, swiglu, down
    # flatmm accumulating into it, then the TP all-reduce
    layer = [(A_TOPK, 4_000), (A_SORT, 7_000), (A_FILL, 4_000), (_flatmm(3), 26_000), (A_SWIGLU, 4_000),
             (_flatmm(2), 15_000), (A_AR, 8_000)]
    s = load_profile(content=kernel_trace_csv(layer * 3), top=50)
    stages = {ph.full_name: (ph.hotspot.op_name, ph.hotspot.stage) for ph in s.hotspots}
    assert stages[_flatmm(3)] == ("ck_tile::MoeFlatmmKernel", "stage1")
    assert stages[_flatmm(2)] == ("ck_tile::MoeFlatmmKernel", "stage2")


def test_atom_ck_mxfp4_moe_launch_order_with_per_gemm_permutes_places_both_stages():
    # ATOM / aiter CK MXFP4: sort, then before each GEMM an fp4 quant and a token permute;
    # one kernel_moe_mxgemm_2lds name for both GEMMs (activation fused into gate/up)
    layer = [(CKT_SORT, 7_000), (FP4_QUANT, 4_000), (FP4_PERMUTE, 4_000), (MX_GEMM, 250_000),
             (FP4_QUANT, 4_000), (FP4_PERMUTE, 4_000), (MX_GEMM, 180_000)]
    s = load_profile(content=kernel_trace_csv(layer * 2), top=50)
    (ph,) = [ph for ph in s.hotspots if ph.full_name == MX_GEMM]
    split = {h.stage: h for h in ph.per_variant(s.total_gpu_time_ns)}
    assert set(split) == {"stage1", "stage2"} and "2nd MoE GEMM" in split["stage2"].stage_basis
    assert split["stage1"].pct_gpu > split["stage2"].pct_gpu

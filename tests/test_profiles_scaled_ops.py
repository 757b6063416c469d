"""Shapes, dtype and scale format of every scaled-GEMM op torch and the ROCm libraries emit,
read from a trace the real torch.profiler wrote (``fixtures/profiles/real_torch_ops.py``)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from profile_support import cpu_ops, graft_kernels
from skill_server.matching.hotspot import GemmShape
from skill_server.profiles import load_profile
from skill_server.service.facade import SkillService
from trace_readers.gemm_ops import op_gemm
from trace_readers.records import OpCall

REPO = Path(__file__).resolve().parents[1]
REAL = REPO / "tests" / "fixtures" / "profiles" / "torch_cpu_scaled_ops.json"
BS, MX = "flydsl_fp8_blockscale_gemm", "flydsl_mxfp8_8wave_gemm"
NVJET = "nvjet_sm90_qqtst_128x128_128x6_2x1_v_bz_coopA_Ablk128_Bvec128_TNT"
CK = ("void ck::kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle<ck::GridwiseGemmMultiD_ABScale<256, 128>, "
      "true, (ck::TailNumber)2>(ck::GridwiseGemmMultiD_ABScale<256, 128>::Argument)")


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(REAL.read_text())


def recorded(e: dict) -> OpCall:
    a = e["args"]
    return OpCall(e["name"], a.get("Input Dims"), a.get("Input type"), a.get("Concrete Inputs"))


def only(doc: dict, name: str, i: int = 0) -> dict:
    return cpu_ops(doc, name)[i]


@pytest.mark.parametrize("op, i, expected", [
    ("aten::_scaled_mm", 0, (256, 512, 1024, None, "fp8_e4m3", "per_tensor")),
    ("aten::_scaled_mm", 1, (256, 512, 1024, None, "fp8_e4m3", "per_row")),
    ("aten::_scaled_mm_v2", 0, (256, 512, 1024, None, "fp8_e4m3", "fp32_block")),  # BlockWise1x128 x 128x128
    ("aten::_scaled_mm_v2", 1, (256, 512, 1024, None, "fp8_e4m3", "ue8m0_1x32")),  # BlockWise1x32 (MX)
    ("aten::_scaled_grouped_mm", 0, (256, 512, 1024, 4, "fp8_e4m3", "per_row")),
    ("aten::_scaled_grouped_mm_v2", 0, (256, 512, 1024, 4, "fp8_e4m3", "per_row")),
    ("aiter::gemm_a8w8_blockscale", 0, (256, 512, 1024, None, "fp8_e4m3", "fp32_block")),
    ("aiter::gemm_a8w8_blockscale_ck", 0, (256, 512, 1024, None, "fp8_e4m3", "fp32_block")),
    ("aiter::gemm_a8w8_blockscale_bpreshuffle", 0, (256, 512, 1024, None, "fp8_e4m3", "fp32_block")),
    ("vllm::rocm_aiter_gemm_w8a8_blockscale", 0, (256, 512, 1024, None, "fp8_e4m3", "fp32_block")),
])
def test_every_scaled_gemm_op_in_a_real_trace(doc, op, i, expected) -> None:
    g = op_gemm(recorded(only(doc, op, i)))
    assert (g.M, g.N, g.K, g.groups, g.dtype, g.scale_format) == expected


def test_moe_ops_in_a_real_trace_give_one_stage_each(doc) -> None:
    s1 = op_gemm(recorded(only(doc, "aiter::ck_moe_stage1")))
    s2 = op_gemm(recorded(only(doc, "aiter::ck_moe_stage2")))
    assert (s1.stage, s1.M, s1.N, s1.K, s1.groups) == ("stage1", 512, 256, 256, 8)  # [E, 2I, hidden] weights
    assert (s2.stage, s2.M, s2.N, s2.K, s2.groups) == ("stage2", 512, 256, 128, 8)  # [M, topk, I] -> hidden
    fused = recorded(only(doc, "vllm::inplace_fused_experts"))
    assert op_gemm(fused) is None  # both stages in one op: only the launch sequence can pick
    assert (op_gemm(fused, "stage2").N, op_gemm(fused, "stage2").K) == (256, 128)


def test_h200_prefill_layers_under_one_kernel_name_stay_apart(doc) -> None:
    """The issue's H200 trace: F.scaled_mm with block scales -> aten::_scaled_mm_v2, one cuBLAS
    kernel name for several layer shapes; each shape keeps its share, dtype and scale format."""
    v2 = cpu_ops(doc, "aten::_scaled_mm_v2")[0]
    shapes = [([4096, 7168], [7168, 2048], [[4096, 56]], [[16, 56]]),
              ([4096, 2048], [2048, 7168], [[4096, 16]], [[56, 16]]),
              ([4096, 7168], [7168, 4096], [[4096, 56]], [[32, 56]])]
    copies = []
    for n, (a, b, sa, sb) in enumerate(shapes):
        e = json.loads(json.dumps(v2))
        e["args"]["External id"] = 90_000 + n
        dims = e["args"]["Input Dims"]
        dims[0], dims[1], dims[2], dims[5] = a, b, sa, sb
        e["ts"] = v2["ts"] + 1000 * (n + 1)
        copies.append(e)
    base = {**doc, "traceEvents": doc["traceEvents"] + copies}
    launches = [(90_000, NVJET)] * 4 + [(90_001, NVJET)] + [(90_002, NVJET)]
    s = load_profile(content=json.dumps(graft_kernels(base, launches)))
    (h,) = s.hotspots
    assert s.device_gen == "sm_90" and h.hotspot.shape is None
    got = {(str(v.shape), v.calls, v.dtype, v.scale_format, v.source_op) for v in h.variants}
    assert got == {("4096x2048x7168", 4, "fp8_e4m3", "fp32_block", "aten::_scaled_mm_v2"),
                   ("4096x7168x2048", 1, "fp8_e4m3", "fp32_block", "aten::_scaled_mm_v2"),
                   ("4096x4096x7168", 1, "fp8_e4m3", "fp32_block", "aten::_scaled_mm_v2")}
    assert h.hotspot.launch_op == "aten::_scaled_mm_v2" and h.hotspot.scale_format == "fp32_block"


@pytest.fixture(scope="module")
def service() -> SkillService:
    return SkillService(REPO / "skills", check_interval=3600.0)


def aiter_trace(doc, device: str) -> str:
    ck_ops = cpu_ops(doc, "aiter::gemm_a8w8_blockscale_ck")
    v2 = cpu_ops(doc, "aten::_scaled_mm_v2")
    launches = [(ck_ops[0]["args"]["External id"], CK), (v2[1]["args"]["External id"], NVJET)]
    return json.dumps(graft_kernels(doc, launches, device=device))


def test_target_gen_matches_a_trace_from_one_device_as_if_for_another(doc, service) -> None:
    h200 = aiter_trace(doc, "NVIDIA H200")
    plain = service.match_profile(content=h200, top=10)
    by_op = {h.op_name: h.result for h in plain.hotspots}
    ck = by_op["ck::kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle"]
    assert ck.hotspot.gen == "sm_90" and BS in [n.card_id for n in ck.not_applicable]
    ported = service.match_profile(content=h200, top=10, target_gen="MI355X")
    by_op = {h.op_name: h.result for h in ported.hotspots}
    ck = by_op["ck::kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle"]
    assert [m.card_id for m in ck.matches] == [BS]
    assert ck.target_gen == "gfx950" and ck.source_gen == "sm_90"
    assert any("as if for gfx950" in n for n in ck.notes)
    assert any("target generation" in n for n in ported.notes)
    mx = by_op[NVJET]  # the MX scaled_mm: launch op aten::_scaled_mm_v2, recipe BlockWise1x32
    assert [m.card_id for m in mx.matches] == [MX] and BS in [n.card_id for n in mx.not_applicable]


def test_the_traces_device_overriding_gen_says_so(doc, service) -> None:
    r = service.match_profile(content=aiter_trace(doc, "NVIDIA H200"), top=10, gen="gfx950")
    assert any("overrides gen='gfx950'" in n and "target_gen" in n for n in r.notes)
    assert all(h.result.hotspot.gen == "sm_90" for h in r.hotspots)
    quiet = service.match_profile(content=aiter_trace(doc, "AMD Instinct MI355X"), top=10, gen="MI355X")
    assert not any("overrides" in n for n in quiet.notes)


def test_shape_reaches_the_recipe_row(doc, service) -> None:
    r = service.match_profile(content=aiter_trace(doc, "AMD Instinct MI355X"), top=10)
    ck = next(h.result for h in r.hotspots if h.op_name.startswith("ck::"))
    assert ck.hotspot.shape == GemmShape(M=256, N=512, K=1024) and ck.hotspot.launch_op == "aiter::gemm_a8w8_blockscale_ck"
    (m,) = ck.matches
    assert m.card_id == BS and m.shape_class is not None


def test_the_real_h200_trace(service) -> None:
    """bench/results/h200_profile_ingest: torch.profiler on an H200 (CUDA + CPU, record_shapes)."""
    path = REPO / "bench" / "results" / "h200_profile_ingest" / "profile_ingest_cuda.pt.trace.json.gz"
    s = load_profile(path, top=20)
    assert s.device_names == ["NVIDIA H200"] and s.device_gen == "sm_90"
    scaled = next(h for h in s.hotspots if h.hotspot.launch_op == "aten::_scaled_mm")
    assert (str(scaled.hotspot.shape), scaled.hotspot.dtype, scaled.hotspot.scale_format) == (
        "4096x2048x7168", "fp8_e4m3", "per_tensor")
    r = service.match_profile(path=str(path), target_gen="gfx950")
    res = next(h.result for h in r.hotspots if h.result.hotspot.launch_op == "aten::_scaled_mm")
    # considered through torch's op name; a tensor-wise scale is no block-scale recipe, on any device
    assert BS in [n.card_id for n in res.not_applicable] and not res.matches

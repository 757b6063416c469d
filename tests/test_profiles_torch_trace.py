"""torch.profiler Chrome traces -> ranked hotspots with shapes and segments."""
from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

from skill_server.matching.hotspot import GemmShape
from skill_server.profiles import ProfileError, ProfileSummary, load_profile

FIXTURES = Path(__file__).parent / "fixtures" / "profiles"
ROCM = FIXTURES / "torch_rocm_trace.json"
CPU = FIXTURES / "torch_cpu_record_shapes.json"

CK = "ck::kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle"
SORTING = "aiter::moe_sorting_kernel"
MOE1 = "moe_gemm1_a8w4_mfma_moe1_silu_t128x128"
MOE2 = "moe_gemm2_a8w4_mfma_moe2_cshuffle_pf8_t128x256"
REDUCE = "moe_topk_reduce_infp8_bf16out"
HIPBLASLT = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_GRVWA8_GRVWB8_K1_LBSPPA128"
ELEMENTWISE = "at::native::vectorized_elementwise_kernel"
FILL = "__amd_rocclr_fillBufferAligned"
# two steps (µs): CK 90 (qkv) + 200 (scaled_mm), sorting 6, moe1 140, moe2 110, reduce 40,
# hipBLASLt 30 then 58, elementwise 5; one 3 µs fill kernel in step 1
TOTAL_NS = (2 * (90 + 200 + 6 + 140 + 110 + 40 + 5) + 30 + 58 + 3) * 1000


@pytest.fixture(scope="module")
def rocm() -> ProfileSummary:
    return load_profile(ROCM, top=100)


def find(summary: ProfileSummary, op_name: str, source_op: str | None = None):
    hits = [h for h in summary.hotspots if h.hotspot.op_name == op_name
            and (source_op is None or any(o.name == source_op for o in h.launch_ops))]
    assert len(hits) == 1, [h.hotspot.op_name for h in summary.hotspots]
    return hits[0]


# ---- the ROCm-shaped trace -------------------------------------------------------------

def test_device_kernels_are_ranked_by_share_of_gpu_time(rocm: ProfileSummary) -> None:
    assert rocm.format == "torch_trace"
    assert rocm.total_gpu_time_ns == TOTAL_NS
    assert rocm.dispatch_count == 17 and rocm.kernel_count == 9
    totals = [h.total_ns for h in rocm.hotspots]
    assert totals == sorted(totals, reverse=True)
    assert rocm.hotspots[0].hotspot.op_name == CK and rocm.hotspots[0].total_ns == 400_000
    assert sum(h.hotspot.pct_gpu for h in rocm.hotspots) == pytest.approx(100.0, abs=1e-3)


def test_memcpy_is_skipped_and_not_gpu_kernel_time(rocm: ProfileSummary) -> None:
    assert rocm.skipped == {"gpu_memcpy": 2}
    assert all("Memcpy" not in h.full_name for h in rocm.hotspots)


def test_device_name_gives_the_generation(rocm: ProfileSummary) -> None:
    assert rocm.device_names == ["AMD Instinct MI355X"] and rocm.device_gen == "gfx950"
    assert {h.hotspot.gen for h in rocm.hotspots} == {"gfx950"}


def test_shape_and_dtype_come_from_the_op_linked_by_external_id(rocm: ProfileSummary) -> None:
    qkv = find(rocm, CK, "aiter::gemm_a8w8_blockscale")
    assert qkv.hotspot.shape == GemmShape(M=4096, N=2048, K=7168)
    assert qkv.hotspot.dtype == "fp8_e4m3"
    assert qkv.hotspot.label == "nn.Module: QKVParallelLinear_0"
    op = qkv.launch_ops[0]
    assert (op.name, op.calls) == ("aiter::gemm_a8w8_blockscale", 2)
    assert op.input_dims[2:4] == [[4096, 56], [16, 56]]  # the scale tensors stay available as evidence
    assert op.input_types[:2] == ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn"]


def test_kernel_linked_by_correlation_only_finds_its_op(rocm: ProfileSummary) -> None:
    # the hipBLASLt kernel carries no External id: correlation -> hipExtModuleLaunchKernel -> aten::addmm
    blas = find(rocm, HIPBLASLT)
    assert [o.name for o in blas.launch_ops] == ["aten::addmm"]
    assert blas.hotspot.dtype == "bf16"


def test_kernel_linked_by_ac2g_flow_only_finds_its_op(rocm: ProfileSummary) -> None:
    # the scaled_mm kernel has neither External id nor correlation, only the ac2g flow
    scaled = find(rocm, CK, "aten::_scaled_mm")
    assert scaled.hotspot.shape == GemmShape(M=4096, N=65536, K=1536)
    assert scaled.hotspot.dtype == "fp8_e4m3"
    assert scaled.full_name != find(rocm, CK, "aiter::gemm_a8w8_blockscale").full_name


def test_a_kernel_at_several_shapes_lists_them_and_splits_on_request(rocm: ProfileSummary) -> None:
    blas = find(rocm, HIPBLASLT)
    assert blas.hotspot.shape is None  # ambiguous: never pick one silently
    assert [(str(v.shape), v.calls, v.total_ns, v.source_op) for v in blas.variants] == [
        ("8192x7168x2048", 1, 58_000, "aten::addmm"), ("4096x7168x2048", 1, 30_000, "aten::addmm")]
    assert blas.unplaced_calls == 0
    split = blas.per_variant(rocm.total_gpu_time_ns)
    assert [h.shape for h in split] == [GemmShape(M=8192, N=7168, K=2048), GemmShape(M=4096, N=7168, K=2048)]
    assert sum(h.pct_gpu for h in split) == pytest.approx(blas.hotspot.pct_gpu, abs=1e-3)
    assert all(h.op_name == HIPBLASLT and h.dtype == "bf16" for h in split)
    single = find(rocm, CK, "aiter::gemm_a8w8_blockscale")
    assert single.per_variant(rocm.total_gpu_time_ns) == [single.hotspot]


def test_moe_segment_is_every_kernel_of_the_module_scope(rocm: ProfileSummary) -> None:
    # stage-2 GEMM and the top-k reduce come from different ops in one nn.Module: one segment
    moe2 = find(rocm, MOE2)
    assert sorted(moe2.hotspot.segment_kernels) == sorted([SORTING, MOE1, REDUCE])
    assert moe2.hotspot.label == "nn.Module: FusedMoE_0"
    assert MOE2 in find(rocm, REDUCE).hotspot.segment_kernels
    assert CK not in moe2.hotspot.segment_kernels  # the QKV linear is a sibling module


def test_a_kernel_launched_from_python_joins_its_module_segment(rocm: ProfileSummary) -> None:
    # the reduce is a Triton launch with no op: Kineto links it to ProfilerStep#N, which is no
    # launching op and no scope; the runtime call's place in the module tree is
    reduce = find(rocm, REDUCE)
    assert reduce.launch_ops == [] and reduce.hotspot.shape is None
    assert reduce.hotspot.label == "nn.Module: FusedMoE_0"
    assert sorted(reduce.hotspot.segment_kernels) == sorted([SORTING, MOE1, MOE2])


def test_without_a_module_the_top_level_op_is_the_scope(rocm: ProfileSummary) -> None:
    copy_kernel = find(rocm, ELEMENTWISE)
    assert [o.name for o in copy_kernel.launch_ops] == ["aten::copy_"]
    assert copy_kernel.scopes == ["aten::to"]
    assert copy_kernel.hotspot.segment_kernels == []


def test_unlinked_kernels_are_counted_with_a_note(rocm: ProfileSummary) -> None:
    fill = find(rocm, FILL)
    assert fill.launch_ops == [] and fill.hotspot.segment_kernels == [] and fill.hotspot.label is None
    assert any("1 of 17 kernel launches could not be linked" in n for n in rocm.notes)


def test_resources_from_kernel_and_launch_events(rocm: ProfileSummary) -> None:
    qkv = find(rocm, CK, "aiter::gemm_a8w8_blockscale")
    assert qkv.resources.lds_bytes == 8192  # hipModuleLaunchKernel's "shared memory"
    assert qkv.resources.workgroup_size == [256, 1, 1]


def test_gzip_file_and_gzip_bytes_read_like_the_plain_trace(tmp_path: Path, rocm: ProfileSummary) -> None:
    packed = gzip.compress(ROCM.read_bytes())
    gz = tmp_path / "rank0.pt.trace.json.gz"
    gz.write_bytes(packed)
    from_file = load_profile(gz, top=100)
    from_bytes = load_profile(content=packed, top=100)
    assert from_file.model_dump(exclude={"source"}) == rocm.model_dump(exclude={"source"})
    assert from_bytes.hotspots == rocm.hotspots and from_bytes.source == "<content>"


def test_a_bare_event_list_is_accepted() -> None:
    doc = json.loads(ROCM.read_text())
    s = load_profile(content=json.dumps(doc["traceEvents"]), top=100)
    assert s.total_gpu_time_ns == TOTAL_NS and s.device_names == []


# ---- real torch.profiler CPU traces ----------------------------------------------------

def attach_kernels(doc: dict, launches: dict[int, str]) -> dict:
    """Add CUDA-style launches under real CPU ops: ``{External id of the op: kernel name}``."""
    doc = copy.deepcopy(doc)
    ops = {e["args"]["External id"]: e for e in doc["traceEvents"]
           if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    gpu_ts = max(e["ts"] + e.get("dur", 0) for e in doc["traceEvents"] if isinstance(e.get("ts"), (int, float)))
    for n, (ext, kernel) in enumerate(launches.items()):
        op = ops[ext]
        corr = 7000 + n
        launch_ts = op["ts"] + op["dur"] / 2
        doc["traceEvents"] += [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": op["pid"], "tid": op["tid"],
             "ts": launch_ts, "dur": 0.01, "args": {"External id": ext, "cbid": 211, "correlation": corr}},
            {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": gpu_ts + 20 * n, "dur": 10.0 + n,
             "args": {"External id": ext, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": corr,
                      "registers per thread": 128, "shared memory": 16384, "grid": [64, 1, 1], "block": [128, 1, 1]}},
        ]
    return doc


def real_gemm_ops(doc: dict) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "cpu_op" and e["name"] in ("aten::mm", "aten::addmm"):
            found.setdefault(e["name"], []).append(e["args"]["External id"])
    return found


def test_a_cpu_only_trace_is_refused_with_the_fix() -> None:
    with pytest.raises(ProfileError) as err:
        load_profile(CPU)
    assert "no device kernels" in str(err.value) and "ProfilerActivity.CUDA" in str(err.value)


def test_shapes_from_a_real_record_shapes_trace() -> None:
    doc = json.loads(CPU.read_text())
    ops = real_gemm_ops(doc)  # torch.mm, nn.Linear's addmm, matmul's inner mm, torch.addmm
    mm_direct, mm_in_matmul = ops["aten::mm"]
    addmm_linear, addmm_direct = ops["aten::addmm"]
    s = load_profile(content=json.dumps(attach_kernels(doc, {
        mm_direct: "sgemm_mm", mm_in_matmul: "sgemm_matmul", addmm_linear: "sgemm_linear", addmm_direct: "sgemm_addmm",
    })), top=100)
    shapes = {h.hotspot.op_name: h.hotspot.shape for h in s.hotspots}
    assert shapes == {
        "sgemm_mm": GemmShape(M=64, N=48, K=32),
        "sgemm_matmul": GemmShape(M=64, N=48, K=32),  # (2, 32, 32) @ (32, 48) through matmul -> mm
        "sgemm_linear": GemmShape(M=64, N=16, K=32),  # Linear(32, 16) -> addmm(bias, x, W^T)
        "sgemm_addmm": GemmShape(M=64, N=48, K=32),
    }
    linear = next(h for h in s.hotspots if h.hotspot.op_name == "sgemm_linear")
    assert linear.hotspot.label == "nn.Module: Linear_0"
    assert linear.hotspot.dtype == "fp32"
    assert linear.resources.registers_per_thread == 128 and linear.resources.lds_bytes == 16384
    matmul = next(h for h in s.hotspots if h.hotspot.op_name == "sgemm_matmul")
    assert matmul.scopes == ["aten::matmul"]  # the top-level op, no module around it


@pytest.mark.slow  # imports torch (seconds on a cold 2-core box)
def test_shapes_from_a_fresh_torch_profiler_run(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        torch.mm(torch.randn(96, 40), torch.randn(40, 24))
    path = tmp_path / "cpu.json"
    prof.export_chrome_trace(str(path))
    doc = json.loads(path.read_text())
    (mm,) = real_gemm_ops(doc)["aten::mm"]
    s = load_profile(content=json.dumps(attach_kernels(doc, {mm: "gemm_kernel"})))
    assert s.hotspots[0].hotspot.shape == GemmShape(M=96, N=24, K=40)


# ---- generation and dtype only in the matcher's vocabulary --------------------------------

def one_kernel_trace(device: str, op: str = "aten::mm", types: list[str] | None = None) -> str:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0,
         "args": {"External id": 1, "Input Dims": [[64, 32], [32, 48]], "Input type": types or ["float", "float"]}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 5.0, "dur": 2.0, "args": {"External id": 1}},
    ]
    return json.dumps({"deviceProperties": [{"id": 0, "name": device}], "traceEvents": events})


@pytest.mark.parametrize("device, gen", [
    ("NVIDIA H200", "sm_90"),
    ("AMD Instinct MI300X", "gfx942"),
    ("AMD Radeon Graphics gfx950", "gfx950"),
    ("AMD Instinct MI355X", "gfx950"),
    ("gfx950:sramecc+:xnack-", "gfx950"),
    ("NVIDIA GeForce RTX 4090", None),
])
def test_generation_from_the_device_name(device: str, gen: str | None) -> None:
    s = load_profile(content=one_kernel_trace(device))
    assert s.hotspots[0].hotspot.gen == gen
    assert any("not one known generation" in n for n in s.notes) == (gen is None)


def test_dtypes_outside_the_vocabulary_are_left_empty() -> None:
    s = load_profile(content=one_kernel_trace("NVIDIA H200", types=["double", "double"]))
    h = s.hotspots[0]
    assert h.hotspot.shape == GemmShape(M=64, N=48, K=32) and h.hotspot.dtype is None
    assert h.launch_ops[0].input_types == ["double", "double"]  # the raw evidence stays


def test_every_fixture_hotspot_is_accepted_by_the_matcher() -> None:
    from skill_server.cards.catalog import Catalog
    from skill_server.matching.matcher import match_hotspot

    index = Catalog.load(Path(__file__).resolve().parents[1] / "skills").index
    for name in ("torch_rocm_trace.json", "rocprofv3_kernel_trace.csv", "rocprofv3_kernel_stats.csv"):
        summary = load_profile(FIXTURES / name, top=100)
        for ph in summary.hotspots:
            for hotspot in ph.per_variant(summary.total_gpu_time_ns):
                match_hotspot(hotspot, index)  # raises MatchInputError on an unknown gen/dtype


def test_scale_format_from_the_launching_ops_scale_tensors(rocm: ProfileSummary) -> None:
    assert find(rocm, CK, "aiter::gemm_a8w8_blockscale").hotspot.scale_format == "fp32_block"
    assert find(rocm, CK, "aten::_scaled_mm").hotspot.scale_format == "per_tensor"
    assert find(rocm, HIPBLASLT).hotspot.scale_format is None


def test_profile_evidence_lets_the_matcher_pick_the_blockscale_card(rocm: ProfileSummary) -> None:
    from skill_server.cards.catalog import Catalog
    from skill_server.matching.matcher import match_hotspot

    index = Catalog.load(Path(__file__).resolve().parents[1] / "skills").index
    qkv = match_hotspot(find(rocm, CK, "aiter::gemm_a8w8_blockscale").hotspot, index)
    assert [m.card_id for m in qkv.matches] == ["flydsl_fp8_blockscale_gemm"]
    moe2 = find(rocm, MOE2).hotspot
    assert moe2.stage == "stage2" and "moe2" in moe2.stage_basis  # the kernel's name states it
    assert [a.card_id for a in match_hotspot(moe2, index).abstained] == ["flydsl_prefill_moe_stage2_fp8partial"]
    prefill = match_hotspot(moe2.model_copy(update={"regime": "prefill"}), index)  # no shape: regime must be given
    assert [m.card_id for m in prefill.matches] == ["flydsl_prefill_moe_stage2_fp8partial"]

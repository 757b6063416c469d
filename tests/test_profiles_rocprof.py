"""rocprofv3 kernel-trace CSV and --stats kernel_stats.csv -> ranked hotspots."""
from __future__ import annotations

from pathlib import Path

import pytest

from skill_server.profiles import ProfileSummary, load_profile

FIXTURES = Path(__file__).parent / "fixtures" / "profiles"
TRACE = FIXTURES / "rocprofv3_kernel_trace.csv"
STATS = FIXTURES / "rocprofv3_kernel_stats.csv"

CK = "ck::kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle"
ASM = "aiter::fp8gemm_bf16_blockscale_BpreShuffle_128x128"
ATTN = "aiter::fmha_fwd_hd128_bf16_causal_a32_pssk"
NORM = "aiter::add_rmsnorm_quant_kernel"
SORTING = "aiter::moe_sorting_kernel"
MOE1 = "moe_gemm1_a8w4_mfma_moe1_silu_t128x128"
MOE2 = "moe_gemm2_a8w4_mfma_moe2_cshuffle_pf8_t128x256"
REDUCE = "moe_topk_reduce_infp8_bf16out"
FILL = "__amd_rocclr_fillBufferAligned"
ELEMENTWISE = "at::native::vectorized_elementwise_kernel"
# per iteration (ns): norm 8k, CK 90k + 60k, attn 120k, sorting 6k, moe1 140k, moe2 110k, reduce 40k, asm 70k;
# two iterations, plus fill 3k and elementwise 5k on a second queue
TOTAL_NS = 2 * 644_000 + 8_000
EXPECTED_ORDER = [CK, MOE1, ATTN, MOE2, ASM, REDUCE, NORM, SORTING, ELEMENTWISE, FILL]


def by_name(summary: ProfileSummary) -> dict:
    return {h.hotspot.op_name: h for h in summary.hotspots}


@pytest.fixture(scope="module")
def trace() -> ProfileSummary:
    return load_profile(TRACE, top=100)


@pytest.fixture(scope="module")
def stats() -> ProfileSummary:
    return load_profile(STATS, top=100)


# ---- kernel trace ----------------------------------------------------------------------

def test_trace_format_is_detected_and_totals_are_summed(trace: ProfileSummary) -> None:
    assert trace.format == "rocprofv3_kernel_trace"
    assert trace.source == str(TRACE)
    assert trace.total_gpu_time_ns == TOTAL_NS
    assert trace.dispatch_count == 20
    assert trace.kernel_count == 10


def test_trace_ranks_kernels_by_share_of_gpu_time(trace: ProfileSummary) -> None:
    assert [h.hotspot.op_name for h in trace.hotspots] == EXPECTED_ORDER
    assert [h.rank for h in trace.hotspots] == list(range(1, 11))
    ck = trace.hotspots[0]
    assert ck.hotspot.pct_gpu == pytest.approx(100 * 300_000 / TOTAL_NS, abs=1e-4)
    assert sum(h.hotspot.pct_gpu for h in trace.hotspots) == pytest.approx(100.0, abs=1e-3)


def test_trace_aggregates_dispatches_by_full_kernel_name(trace: ProfileSummary) -> None:
    ck = by_name(trace)[CK]
    assert (ck.calls, ck.total_ns, ck.min_ns, ck.max_ns, ck.avg_ns) == (4, 300_000, 60_000, 90_000, 75_000.0)
    assert ck.full_name.startswith("void ck::kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle<ck::Gridwise")
    assert ck.full_name.endswith("::Argument)")


def test_trace_demangles_assembly_kernels_but_keeps_the_raw_name(trace: ProfileSummary) -> None:
    asm = by_name(trace)[ASM]
    assert asm.full_name == "_ZN5aiter43fp8gemm_bf16_blockscale_BpreShuffle_128x128E.kd"
    assert asm.demangled_name == ASM


def test_trace_skips_and_counts_rows_that_are_not_kernel_dispatches(trace: ProfileSummary) -> None:
    assert trace.skipped == {"MEMORY_COPY": 2}


def test_trace_reports_resource_columns(trace: ProfileSummary) -> None:
    moe1 = by_name(trace)[MOE1].resources
    assert moe1 is not None
    assert (moe1.vgpr_count, moe1.accum_vgpr_count, moe1.sgpr_count) == (192, 64, 80)
    assert (moe1.scratch_bytes, moe1.lds_bytes, moe1.workgroup_size) == (1024, 65536, [256, 1, 1])
    assert by_name(trace)[CK].resources.scratch_bytes == 0


def test_trace_segment_is_the_neighbouring_kernels_on_the_queue(trace: ProfileSummary) -> None:
    # the stage-2 GEMM sits between moe1 and the reduce kernel: the reduce is in its segment
    assert by_name(trace)[MOE2].hotspot.segment_kernels == [SORTING, MOE1, REDUCE, ASM]
    assert by_name(trace)[REDUCE].hotspot.segment_kernels == [MOE1, MOE2, ASM]


def test_trace_segment_stops_at_an_idle_gap(trace: ProfileSummary) -> None:
    # the assembly GEMM ends iteration 1; the next norm starts after a 500 us host sync
    assert by_name(trace)[ASM].hotspot.segment_kernels == [MOE2, REDUCE]
    assert by_name(trace)[NORM].hotspot.segment_kernels == [CK, ATTN]


def test_trace_segments_stay_on_their_queue(trace: ProfileSummary) -> None:
    assert by_name(trace)[FILL].hotspot.segment_kernels == [ELEMENTWISE]
    assert FILL not in by_name(trace)[CK].hotspot.segment_kernels
    assert trace.segment_rule.startswith("kernel trace:")
    assert all(h.segment_known for h in trace.hotspots)


def test_trace_has_no_shape_or_scope_information(trace: ProfileSummary) -> None:
    ck = by_name(trace)[CK]
    assert ck.hotspot.shape is None and ck.variants == [] and ck.launch_ops == []
    assert ck.hotspot.model_dump(exclude_none=True).keys() == {"op_name", "segment_kernels", "pct_gpu"}


def test_top_keeps_the_biggest_and_counts_the_rest(trace: ProfileSummary) -> None:
    s = load_profile(TRACE, top=3)
    assert [h.hotspot.op_name for h in s.hotspots] == EXPECTED_ORDER[:3]
    assert s.omitted_kernels == 7
    assert s.total_gpu_time_ns == TOTAL_NS  # shares stay relative to all kernels


def test_min_pct_drops_small_kernels_and_keeps_global_ranks() -> None:
    s = load_profile(TRACE, min_pct=10.0)
    assert [h.hotspot.op_name for h in s.hotspots] == [CK, MOE1, ATTN, MOE2, ASM]
    assert all(h.hotspot.pct_gpu >= 10.0 for h in s.hotspots)
    s = load_profile(TRACE, min_pct=10.0, top=2)
    assert [h.rank for h in s.hotspots] == [1, 2]
    s = load_profile(TRACE, min_pct=5.0)
    assert s.hotspots[-1].hotspot.op_name == REDUCE and s.hotspots[-1].rank == 6


OLD_COLUMNS = (
    '"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name","Correlation_Id",'
    '"Start_Timestamp","End_Timestamp","Private_Segment_Size","Group_Segment_Size","Workgroup_Size_X",'
    '"Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"\n'
    '"KERNEL_DISPATCH","Agent 4",1,2,123,1,11,"addition_kernel",1,1000000,1012200,16,0,64,1,1,1024,1024,1\n'
    '"KERNEL_DISPATCH","Agent 4",2,3,123,6,14,"subtract_kernel",6,1049960,1059880,0,0,64,1,1,1024,1024,1\n'
    '"KERNEL_DISPATCH","Agent 4",2,3,123,5,11,"addition_kernel",5,1040080,1049960,0,0,64,1,1,1024,1024,1\n'
    '"KERNEL_DISPATCH","Agent 4",1,2,123,4,12,"divide_kernel",4,1013000,1030760,0,2048,64,1,1,1024,1024,1\n'
)


def test_trace_with_older_column_names_and_unordered_rows() -> None:
    # ROCm 6.x wrote Private_/Group_Segment_Size, string agent ids, no register columns,
    # and does not sort rows by time.
    s = load_profile(content=OLD_COLUMNS)
    assert s.format == "rocprofv3_kernel_trace"
    names = by_name(s)
    assert [h.hotspot.op_name for h in s.hotspots] == ["addition_kernel", "divide_kernel", "subtract_kernel"]
    assert names["addition_kernel"].calls == 2
    assert names["addition_kernel"].resources.scratch_bytes == 16
    assert names["divide_kernel"].resources.lds_bytes == 2048
    assert names["divide_kernel"].resources.vgpr_count is None
    # queue 2 ran addition (starts 1040080) then subtraction: neighbours despite the row order
    assert names["subtract_kernel"].hotspot.segment_kernels == ["addition_kernel"]
    assert names["divide_kernel"].hotspot.segment_kernels == ["addition_kernel"]


def test_minimal_trace_needs_only_name_and_timestamps() -> None:
    s = load_profile(content="Kernel_Name,Start_Timestamp,End_Timestamp\nk1,0,30\nk2,31,41\n")
    assert [(h.hotspot.op_name, h.total_ns) for h in s.hotspots] == [("k1", 30), ("k2", 10)]
    assert s.hotspots[0].resources is None
    assert s.hotspots[0].hotspot.segment_kernels == ["k2"]


# ---- kernel stats ----------------------------------------------------------------------

def test_stats_format_is_detected_and_ranked_like_the_trace(stats: ProfileSummary, trace: ProfileSummary) -> None:
    assert stats.format == "rocprofv3_kernel_stats"
    assert stats.total_gpu_time_ns == trace.total_gpu_time_ns
    assert [h.hotspot.op_name for h in stats.hotspots] == EXPECTED_ORDER
    for s_h, t_h in zip(stats.hotspots, trace.hotspots):
        assert (s_h.calls, s_h.total_ns, s_h.min_ns, s_h.max_ns) == (t_h.calls, t_h.total_ns, t_h.min_ns, t_h.max_ns)
        assert s_h.hotspot.pct_gpu == t_h.hotspot.pct_gpu  # recomputed, not the rounded Percentage column


def test_stats_have_no_segments(stats: ProfileSummary) -> None:
    assert all(not h.segment_known and h.hotspot.segment_kernels == [] for h in stats.hotspots)
    assert stats.segment_rule.startswith("kernel stats: none")


def test_stats_accept_float_formatted_numbers_and_optional_columns() -> None:
    text = ('"Name","Calls","TotalDurationNs","Percentage"\n'
            '"big_kernel",3,1.5e+05,75.0\n"small_kernel",1,50000.000000,25.0\n')
    s = load_profile(content=text)
    assert [(h.hotspot.op_name, h.total_ns, h.calls, h.min_ns) for h in s.hotspots] == [
        ("big_kernel", 150_000, 3, None), ("small_kernel", 50_000, 1, None)]
    assert s.hotspots[0].avg_ns == pytest.approx(50_000.0)
    assert s.hotspots[0].hotspot.pct_gpu == 75.0


def test_format_can_be_forced_by_name_or_alias() -> None:
    assert load_profile(TRACE, format="rocprofv3_kernel_trace").format == "rocprofv3_kernel_trace"
    assert load_profile(STATS, format="kernel_stats").format == "rocprofv3_kernel_stats"
    assert load_profile(content=TRACE.read_bytes(), format="Kernel-Trace").total_gpu_time_ns == TOTAL_NS


# ---- the block fast paths read exactly what the csv module reads ---------------------------------

@pytest.mark.parametrize("block_chars", [64, 700, 1 << 20])
def test_fast_paths_agree_with_the_csv_module(monkeypatch, block_chars) -> None:
    import csv
    import io
    import random

    from profile_support import kernel_trace_csv
    import trace_readers.rocprof_csv as rocprof_csv
    from trace_readers import read_trace

    rng = random.Random(block_chars)
    names = ["void ck::gemm<ck::Tuple<int, float>, 256>(ck::Argument)", 'k_with_"quote"', "plain_triton_kernel",
             "_ZN5aiter3fooE.kd", "multi\nline<int, 2>"]
    text = kernel_trace_csv([(rng.choice(names), 1000 + rng.randrange(5000)) for _ in range(300)])
    rows = text.splitlines(keepends=True)
    rows.insert(40, '"MEMORY_COPY","Agent 4",1,1,3071,0,0,,0,1,2,0,0,0,0,0,0,0,0,0,0,0,0\r\n')  # another kind
    text = "".join(rows)
    monkeypatch.setattr(rocprof_csv, "_BLOCK_CHARS", block_chars)
    got = read_trace(content=text)
    ref = [r for r in csv.DictReader(io.StringIO(text, newline="")) if r["Kind"] == "KERNEL_DISPATCH"]
    assert [d.name for d in got.dispatches] == [r["Kernel_Name"] for r in ref]
    assert [(d.start_ns, d.end_ns, d.correlation_id, d.dispatch_id) for d in got.dispatches] == [
        (int(r["Start_Timestamp"]), int(r["End_Timestamp"]), int(r["Correlation_Id"]), int(r["Dispatch_Id"])) for r in ref]
    assert {d.lane for d in got.dispatches} == {("Agent 4", "1", "1")}
    assert {d.resources.vgpr_count for d in got.dispatches} == {128} and got.skipped == {"MEMORY_COPY": 1}


def _records(trace):
    return [(d.name, d.start_ns, d.end_ns, d.lane, d.correlation_id, d.dispatch_id,
             None if d.resources is None else (d.resources.vgpr_count, d.resources.lds_bytes, d.resources.workgroup_size))
            for d in trace.dispatches]


@pytest.mark.parametrize("variant", ["rocm6_fixture", "rocm7_agent_names_crlf", "bom_and_memory_copies",
                                     "every_field_quoted"])
def test_the_numpy_block_parse_reads_what_the_generic_paths_read(monkeypatch, variant) -> None:
    """rocprofv3's own rows go through one numpy parse per block; without numpy (or for any
    block it does not take) the generic paths read the same records."""
    from profile_support import kernel_trace_csv
    import trace_readers.rocprof_csv as rocprof_csv
    from trace_readers import read_trace

    if variant == "rocm6_fixture":
        text = (Path(__file__).parent / "fixtures" / "profiles" / "rocprofv3_kernel_trace.csv").read_text()
    else:
        text = kernel_trace_csv([(f"void ck::gemm<{i % 3}, float>(ck::Arg)", 100 + i) for i in range(400)])
        if variant == "bom_and_memory_copies":
            rows = text.replace('"Agent 4"', "4").splitlines(keepends=True)
            rows.insert(7, rows[7].replace('"KERNEL_DISPATCH"', '"MEMORY_COPY"'))
            text = "\ufeff" + "".join(rows)
        if variant == "every_field_quoted":  # csv.QUOTE_ALL: numbers quoted too (the generic paths read them)
            import csv
            import io

            out = io.StringIO()
            csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(
                csv.reader(io.StringIO(text, newline="")))
            text = out.getvalue()
    monkeypatch.setattr(rocprof_csv, "_BLOCK_CHARS", 997)  # many blocks, cut anywhere
    taken = []
    real = rocprof_csv._KernelTraceReader.numeric
    monkeypatch.setattr(rocprof_csv._KernelTraceReader, "numeric",
                        lambda self, block, n: taken.append(real(self, block, n)) or taken[-1])
    fast = read_trace(content=text)
    assert any(taken) == (variant != "every_field_quoted"), taken
    monkeypatch.setattr(rocprof_csv, "_numpy", lambda: None)
    generic = read_trace(content=text)
    assert _records(fast) == _records(generic) and fast.skipped == generic.skipped
    assert fast.dispatches[0].resources is not None and len(fast.dispatches) > 3
    ref = [r for r in csv_rows(text) if r["Kind"] == "KERNEL_DISPATCH"]
    assert [(d.start_ns, d.end_ns) for d in fast.dispatches] == [
        (int(r["Start_Timestamp"]), int(r["End_Timestamp"])) for r in ref]


def csv_rows(text: str) -> list[dict]:
    import csv
    import io

    return list(csv.DictReader(io.StringIO(text.lstrip("\ufeff"), newline="")))

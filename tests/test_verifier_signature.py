"""Runtime signature and segment scoring: ghost branches, side streams, the MoE filter trap,
ROCm's kernel-name suffixes, a whole rocprofv3 profile run, the cross-kernel scale-tag rule."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from verifiers.judge.kernel_trace import from_chrome_trace, from_rocprofv3_csv, normalise_name
from verifiers.problem import SegmentSpec, SignatureSpec
from verifiers.judge.segment import score_segment, segment_speedup
from verifiers.judge.signature import check_signature

FIXTURES = Path(__file__).parent / "fixtures"
FLUSH = SegmentSpec().flush_pattern
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int> >"
GEMM = "moe_stage2_gemm_cshuffle_pf8_t64x256"
REDUCE = "moe_topk_reduce_infp8_k8"


def gpu_trace(kernels_per_call, calls=3, stray=(), runtime=True):
    """A torch.profiler chrome trace as Kineto writes it on CUDA/ROCm: user ranges on the
    host thread, runtime launches with correlation ids, device kernels on streams. With
    ``runtime=False`` only the aten op (linked by External id) records the launch."""
    events, corr, t = [], 0, 0.0
    def launch(name, stream, host_ts, dev_ts, dur):
        nonlocal corr
        corr += 1
        if runtime:
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "hipModuleLaunchKernel", "ts": host_ts, "dur": 2.0,
                           "tid": 7, "pid": 1, "args": {"correlation": corr, "External id": corr}})
        else:
            events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": host_ts, "dur": 2.0,
                           "tid": 7, "pid": 1, "args": {"External id": corr}})
        kernel_args = {"stream": stream, "device": 0, "External id": corr}
        if runtime:
            kernel_args["correlation"] = corr
        events.append({"ph": "X", "cat": "kernel", "name": name, "ts": dev_ts, "dur": dur, "tid": stream, "pid": 0,
                       "args": kernel_args})
    for i in range(calls):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"verifier::flush::{i}", "ts": t, "dur": 5.0, "tid": 7, "pid": 1})
        launch(FILL, 7, t + 1, t + 10, 60.0)
        t += 10
        events.append({"ph": "X", "cat": "user_annotation", "name": f"verifier::call::{i}", "ts": t, "dur": 20.0, "tid": 7, "pid": 1})
        dev = t + 80
        for j, (name, dur, stream) in enumerate(kernels_per_call):
            launch(name, stream, t + 1 + j, dev, dur)
            dev += dur if stream == 7 else 0
        t += 2000
    for name in stray:  # launched by another thread, outside every range
        corr += 1
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t + 5, "dur": 2.0,
                       "tid": 99, "pid": 1, "args": {"correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": name, "ts": t + 50, "dur": 100.0, "tid": 7, "pid": 0,
                       "args": {"correlation": corr, "stream": 7}})
    return {"traceEvents": events}


def test_segment_scores_every_kernel_and_fails_a_filter_that_misses_the_reduce():
    records = from_chrome_trace(gpu_trace([(GEMM, 840.0, 7), (REDUCE, 157.0, 7)]))
    assert {r.window for r in records} == {"flush", "call"}
    gemm_only = score_segment(records, SegmentSpec(kernels=(r"moe_stage2_gemm",)), "candidate")
    assert gemm_only.status == "FAIL"
    assert gemm_only.unmatched_kernels == [REDUCE]
    assert "misses kernel" in gemm_only.failures[0]
    full = score_segment(records, SegmentSpec(kernels=(r"moe_stage2_gemm", r"topk_reduce")), "candidate")
    assert full.status == "PASS"
    assert full.score_us == pytest.approx(840.0 + 157.0)  # the flush is excluded, both kernels summed
    shares = {k.name: k.share for k in full.breakdown}
    assert shares[REDUCE] == pytest.approx(157.0 / 997.0)


def test_declared_segment_kernel_absent_fails():
    records = from_chrome_trace(gpu_trace([(GEMM, 840.0, 7)]))
    score = score_segment(records, SegmentSpec(kernels=(r"moe_stage2_gemm", r"topk_reduce")), "candidate")
    assert score.status == "FAIL"
    assert score.missing_declared == ["topk_reduce"]


def test_side_stream_kernels_count_for_the_call_that_launched_them():
    records = from_chrome_trace(gpu_trace([(GEMM, 500.0, 7), (REDUCE, 300.0, 13)]))
    side = [r for r in records if r.name == REDUCE]
    assert all(r.window == "call" and r.stream == "13" for r in side)
    score = score_segment(records, SegmentSpec(), "candidate")
    assert score.score_us == pytest.approx(800.0)


def test_kernels_link_to_their_call_through_the_aten_op_without_runtime_records():
    records = from_chrome_trace(gpu_trace([(GEMM, 500.0, 7), (REDUCE, 100.0, 7)], runtime=False))
    assert [r.window for r in records if r.name == REDUCE] == ["call"] * 3
    assert score_segment(records, SegmentSpec(), "candidate").score_us == pytest.approx(600.0)


def test_kernels_launched_outside_every_call_fail_the_signature():
    records = from_chrome_trace(gpu_trace([(GEMM, 500.0, 7)], stray=["deferred_work_kernel"]))
    check = check_signature(records, SignatureSpec(required=("gemm",)), "candidate", FLUSH)
    assert check.status == "FAIL"
    assert check.unattributed == ["deferred_work_kernel"]


def test_signature_required_forbidden_and_launch_count():
    records = from_chrome_trace(gpu_trace([(GEMM, 500.0, 7), (REDUCE, 100.0, 7)]))
    ok = check_signature(records, SignatureSpec(required=("cshuffle_pf8", "infp8"), forbidden=("inbf16",), launches_per_iter=2), "cand", FLUSH)
    assert ok.status == "PASS" and ok.launches_per_iter == [2, 2, 2]
    bad = check_signature(records, SignatureSpec(required=("inbf16",), forbidden=("infp8",), launches_per_iter=1), "cand", FLUSH)
    assert bad.status == "FAIL"
    assert bad.required_missing == ["inbf16"] and "infp8" in bad.forbidden_found
    assert any("declares 1" in f for f in bad.failures)


def test_launch_count_varying_across_calls_fails():
    trace = gpu_trace([(GEMM, 500.0, 7)])
    # a fourth call that launches an extra kernel
    extra = from_chrome_trace(gpu_trace([(GEMM, 500.0, 7), (REDUCE, 10.0, 7)], calls=1))
    records = from_chrome_trace(trace) + [r.model_copy(update={"iteration": 3}) for r in extra if r.window == "call"]
    check = check_signature(records, SignatureSpec(), "cand", FLUSH)
    assert check.status == "FAIL" and "vary" in check.failures[0]


def test_rocprofv3_kernel_trace_csv():
    records = from_rocprofv3_csv(FIXTURES / "traces" / "moe_stage2_kernel_trace.csv")
    assert len(records) == 9 and {r.iteration for r in records} == {0, 1, 2}
    score = score_segment(records, SegmentSpec(kernels=(r"moe_stage2_gemm",)), "candidate (rocprofv3)")
    assert score.status == "FAIL" and score.unmatched_kernels == [REDUCE]
    full = score_segment(records, SegmentSpec(kernels=(r"moe_stage2_gemm", r"reduce")), "candidate")
    assert full.iterations == 3 and full.score_us == pytest.approx(840.0 + 157.0)
    sig = check_signature(records, SignatureSpec(required=("cshuffle_pf8", "infp8"), launches_per_iter=2), "cand", FLUSH)
    assert sig.status == "PASS"


def test_rocprofv3_csv_with_wrong_columns_is_a_clear_error(tmp_path):
    bad = tmp_path / "stats.csv"
    bad.write_text("Name,Calls,TotalDurationNs\nfoo,1,2\n")
    with pytest.raises(ValueError, match="missing column"):
        from_rocprofv3_csv(bad)
    secret = tmp_path / "secret.txt"  # not a CSV: the error names no content
    secret.write_text("root:$6$hash-of-a-password:19000:0:99999:7:::\n")
    with pytest.raises(ValueError) as err:
        from_rocprofv3_csv(secret)
    assert "hash-of-a-password" not in str(err.value)


def test_segment_speedup_is_baseline_over_candidate():
    base = score_segment(from_chrome_trace(gpu_trace([(GEMM, 885.0, 7), ("moe_topk_reduce_inbf16", 321.0, 7)])), SegmentSpec(), "b")
    cand = score_segment(from_chrome_trace(gpu_trace([(GEMM, 840.0, 7), (REDUCE, 157.0, 7)])), SegmentSpec(), "c")
    assert segment_speedup(base, cand) == pytest.approx(1206.0 / 997.0)


# ---- ROCm forms (issue 17): names with the HSA code-object suffix, a whole profile run
ROCPROF_HEADER = ("Kind,Agent_Id,Queue_Id,Stream_Id,Thread_Id,Dispatch_Id,Kernel_Id,Kernel_Name,Correlation_Id,"
                  "Start_Timestamp,End_Timestamp,LDS_Block_Size,Scratch_Size,VGPR_Count,Accum_VGPR_Count,SGPR_Count,"
                  "Workgroup_Size_X,Workgroup_Size_Y,Workgroup_Size_Z,Grid_Size_X,Grid_Size_Y,Grid_Size_Z")
SETUP_KERNELS = (
    "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, "
    "at::native::templates::cuda::normal_and_transform<float, float, at::CUDAGeneratorImpl*>(at::TensorIteratorBase&, "
    "at::CUDAGeneratorImpl*, at::native::templates::cuda::normal_kernel<at::CUDAGeneratorImpl*>(at::TensorBase const&, "
    "double, double, at::CUDAGeneratorImpl*)::{lambda(curandStatePhilox4_32_10*)#2}> [clone .kd]",
    "void at::native::vectorized_elementwise_kernel<4, at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}"
    "::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> > [clone .kd]",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul> > [clone .kd]",
)


def rocprof_run_csv(iterations: int, gemm: str, reduce: str, warmup: int = 3) -> str:
    """The kernel trace rocprofv3 writes for ``python -m verifiers.arms.rocprof_run``: input set-up,
    a poison fill, a host-to-device copy, warm-up calls, then marker + call per iteration."""
    rows, t, n = [], 1_143_263_119_836_160, 0

    def add(kind, name, dur):
        nonlocal t, n
        n += 1
        if kind == "MEMORY_COPY":
            rows.append(["MEMORY_COPY", "Agent 4", 1, 1, 3071, "", "", "", n, t, t + dur] + [""] * 11)
        else:
            rows.append(["KERNEL_DISPATCH", 4, 1, 1, 3071, n, n, name, n, t, t + dur, 0, 0, 64, 0, 32, 256, 1, 1, 65536, 1, 1])
        t += dur + 2000

    for name in SETUP_KERNELS:
        add("KERNEL_DISPATCH", name, 40_000)
    add("MEMORY_COPY", "", 9000)
    for _ in range(warmup):
        add("KERNEL_DISPATCH", gemm, 840_000)
        add("KERNEL_DISPATCH", reduce, 157_000)
    for _ in range(iterations):
        add("KERNEL_DISPATCH", "verifier_cache_flush.kd", 60_000)
        add("KERNEL_DISPATCH", gemm, 840_000)
        add("KERNEL_DISPATCH", reduce, 157_000)
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\r\n")
    w.writerow(ROCPROF_HEADER.split(","))
    w.writerows(rows)
    return "\ufeff" + out.getvalue()


def test_rocm_suffixes_are_normalised_before_matching():
    assert normalise_name("moe2_gemm_bf16.kd") == "moe2_gemm_bf16"
    assert normalise_name("moe_reduce_inbf16 [clone .kd]") == "moe_reduce_inbf16"
    assert normalise_name("_ZN5aiter35fmha_fwd_hd128_bf16E.kd") == "_ZN5aiter35fmha_fwd_hd128_bf16E"


def test_a_whole_rocprofv3_profile_run_splits_into_its_calls(tmp_path):
    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.arms import BASELINE_SIGNATURE, FP8_SIGNATURE

    path = tmp_path / "run_kernel_trace.csv"
    path.write_text(rocprof_run_csv(5, "moe2_gemm_bf16.kd", "moe_reduce_inbf16 [clone .kd]"), newline="")
    records = from_rocprofv3_csv(path)
    setup = [r for r in records if r.iteration is None]
    assert len(setup) == len(SETUP_KERNELS) + 6  # set-up, the poison fill, warm-up calls: no iteration
    assert {r.raw_name for r in records if r.name == "moe_reduce_inbf16"} == {"moe_reduce_inbf16 [clone .kd]"}
    ok = check_signature(records, BASELINE_SIGNATURE, "baseline triton_bf16 (rocprofv3)", FLUSH)
    assert ok.status == "PASS", ok.failures
    assert ok.launches_per_iter == [2, 2, 2, 2, 2]
    # the anchored forbidden patterns of the fp8 candidate catch a bf16 fallback with the suffix
    bad = check_signature(records, FP8_SIGNATURE, "candidate (rocprofv3)", FLUSH)
    assert bad.status == "FAIL" and "^moe2_gemm_bf16$" in bad.forbidden_found
    seg = score_segment(records, SegmentSpec(kernels=(r"moe2_(gemm|store)", r"moe_reduce")), "baseline")
    assert seg.status == "PASS" and seg.iterations == 5 and seg.score_us == pytest.approx(840.0 + 157.0)


def test_fp8_names_with_the_suffix_satisfy_the_fp8_signature(tmp_path):
    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.arms import BASELINE_SIGNATURE, FP8_SIGNATURE

    path = tmp_path / "fp8_kernel_trace.csv"
    path.write_text(rocprof_run_csv(3, "moe2_gemm_pf8_s3a378034.kd", "moe_reduce_infp8_s3a378034 [clone .kd]"), newline="")
    records = from_rocprofv3_csv(path)
    assert check_signature(records, FP8_SIGNATURE, "candidate", FLUSH).status == "PASS"
    assert check_signature(records, BASELINE_SIGNATURE, "baseline", FLUSH).status == "FAIL"


def test_the_scale_tag_rule_runs_in_the_signature_stage():
    """The MoE problem's cross-kernel rule: a reducer unscaling with another scale than the
    producer stored with (0.4 %: inside every parity bound) fails the candidate's signature."""
    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.problem import PROBLEM as MOE

    from verifiers.options import VerifyOptions
    from verifiers.judge.profiling import candidate_signature, judge_traces

    base = from_chrome_trace(gpu_trace([("moe2_gemm_bf16.kd", 800.0, 7), ("moe_reduce_inbf16.kd", 300.0, 7)]))
    good = from_chrome_trace(gpu_trace([("moe2_gemm_pf8_s3a378034", 800.0, 7), ("moe_reduce_infp8_s3a378034", 150.0, 7)]))
    drift = from_chrome_trace(gpu_trace([("moe2_gemm_pf8_s3a378034", 800.0, 7), ("moe_reduce_infp8_s3a37d2d1", 150.0, 7)]))
    arm = MOE.arm("triton_bf16")
    spec = candidate_signature(MOE, VerifyOptions(), arm, None, is_aa=False)
    assert judge_traces(MOE, VerifyOptions(), arm, spec, base, good, "x.py:build").signature_status == "PASS"
    out = judge_traces(MOE, VerifyOptions(), arm, spec, base, drift, "x.py:build")
    assert out.signature_status == "FAIL" and "differ" in out.signature_reason


def test_a_baseline_whose_signature_cannot_be_observed_is_an_error_on_every_platform():
    """On CPU the block-scale card's cuBLAS-style names never show: ERROR, never SKIPPED-and-pass."""
    from skill_kernels.flydsl_fp8_blockscale_gemm.problem import PROBLEM as BLOCKSCALE

    from verifiers.options import VerifyOptions
    from verifiers.judge.profiling import candidate_signature, judge_traces

    aten_only = from_chrome_trace(gpu_trace([("aten::mm", 500.0, 7)]))
    arm = BLOCKSCALE.arm("cublas_blockscale")
    twin = from_chrome_trace(gpu_trace([("blockscale_fp8_gemm_promote_kernel", 500.0, 7)]))
    spec = candidate_signature(BLOCKSCALE, VerifyOptions(), arm, "triton_twin", is_aa=False)
    out = judge_traces(BLOCKSCALE, VerifyOptions(), arm, spec, aten_only, twin, "arm:triton_twin")
    assert out.signature_status == "ERROR" and out.segment_status == "ERROR"


def test_on_cpu_a_trace_of_operators_cannot_show_kernel_names_skipped_not_fail():
    """Triton's CPU interpreter launches no named kernel: the twin's trace is aten ops only. Its
    required name and launch count cannot be observed there: the signature is SKIPPED with the
    reason (never FAIL, never a pass); a forbidden kernel that does show still fails; on a GPU the
    same trace fails."""
    from skill_kernels.flydsl_fp8_blockscale_gemm.problem import PROBLEM as BLOCKSCALE

    from verifiers.judge.profiling import candidate_signature, judge_traces
    from verifiers.options import VerifyOptions

    ops = from_chrome_trace(gpu_trace([("aten::mm", 500.0, 7), ("aten::copy_", 20.0, 7)]))
    base = BLOCKSCALE.arm("torch_dequant")
    spec = candidate_signature(BLOCKSCALE, VerifyOptions(), base, "triton_twin", is_aa=False)
    out = judge_traces(BLOCKSCALE, VerifyOptions(), base, spec, ops, ops, "arm:triton_twin", "cpu")
    assert out.signature_status == "SKIPPED" and "not observable on cpu" in out.signature_reason
    assert "blockscale_fp8_gemm_promote" in out.signature_reason
    assert judge_traces(BLOCKSCALE, VerifyOptions(), base, spec, ops, ops, "arm:triton_twin",
                        "cuda").signature_status == "FAIL"
    forbidden = SignatureSpec(required=("never_shows",), forbidden=(r"aten::mm",))
    check = check_signature(ops, forbidden, "candidate", FLUSH, opaque=True)
    assert check.status == "FAIL" and check.unobservable and "forbidden" in " ".join(check.failures)


def test_cpu_profiles_show_the_kernel_names_a_problem_annotates():
    """On CPU the MoE arms run Triton's interpreter inside ``record_function(<kernel name>)``:
    the trace reports those names (one record per range), not the aten ops inside."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "verifier::call::0", "ts": 0.0, "dur": 1000.0, "tid": 1, "pid": 1},
              {"ph": "X", "cat": "user_annotation", "name": "moe2_gemm_bf16", "ts": 10.0, "dur": 500.0, "tid": 1, "pid": 1},
              {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "ts": 20.0, "dur": 5.0, "tid": 1, "pid": 1},
              {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 40.0, "dur": 5.0, "tid": 1, "pid": 1},
              {"ph": "X", "cat": "user_annotation", "name": "moe_reduce_inbf16", "ts": 600.0, "dur": 300.0, "tid": 1, "pid": 1},
              {"ph": "X", "cat": "cpu_op", "name": "aten::sum", "ts": 610.0, "dur": 50.0, "tid": 1, "pid": 1}]
    records = from_chrome_trace({"traceEvents": events}, cpu=True)
    assert [(r.name, r.window, r.iteration) for r in records] == [("moe2_gemm_bf16", "call", 0), ("moe_reduce_inbf16", "call", 0)]




def test_a_real_torch_profiler_trace_is_attributed_to_the_verifier_windows(tmp_path):
    """A trace the real torch.profiler writes here (CPU), read through trace_readers: on CPU the
    leaf compute ops per window (a named range once, views dropped); with device kernels
    grafted the way Kineto links them, each kernel lands in the window of its launching op."""
    import json

    import torch
    from profile_support import graft_kernels
    from torch.profiler import ProfilerActivity, profile, record_function

    a, b = torch.randn(64, 64), torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(2):
            with record_function(f"verifier::flush::{i}"):
                torch.zeros(4096).add_(1.0)
            with record_function(f"verifier::call::{i}"):
                c = (a @ b).t().contiguous()
                with record_function("moe2_gemm_bf16"):
                    torch.relu(c)
        torch.mm(a, b)  # outside every range
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    records = from_chrome_trace(path, cpu=True)
    calls = [(r.name, r.iteration) for r in records if r.window == "call"]
    assert {("aten::mm", 0), ("aten::mm", 1), ("moe2_gemm_bf16", 0), ("moe2_gemm_bf16", 1)} <= set(calls)
    assert calls.count(("moe2_gemm_bf16", 0)) == 1 and not any(r.name == "aten::relu" for r in records)
    assert not any(r.name in ("aten::t", "aten::transpose", "aten::contiguous", "aten::empty") for r in records)
    assert any(r.window == "flush" and r.iteration == 1 for r in records)
    assert any(r.name == "aten::mm" and r.window is None for r in records)
    doc = json.loads(path.read_text())
    assert from_chrome_trace(doc, cpu=True) == records  # the parsed document reads the same
    mms = sorted((e["ts"], e["args"]["External id"]) for e in doc["traceEvents"] if e.get("name") == "aten::mm")
    gpu = from_chrome_trace(graft_kernels(doc, [(ext, f"gemm_kernel_{n}") for n, (_, ext) in enumerate(mms)]))
    assert [(r.name, r.window, r.iteration) for r in gpu] == [
        ("gemm_kernel_0", "call", 0), ("gemm_kernel_1", "call", 1), ("gemm_kernel_2", None, None)]


def test_device_copies_in_a_call_window_are_records_too():
    """Device time a candidate spends in memcpy / memset is its time: those events stay records."""
    trace = gpu_trace([(GEMM, 500.0, 7)], calls=1)
    events = trace["traceEvents"]
    call = next(e for e in events if e.get("name") == "verifier::call::0")
    events += [{"ph": "X", "cat": "cuda_runtime", "name": "hipMemcpyAsync", "ts": call["ts"] + 5, "dur": 1.0, "tid": 7,
                "pid": 1, "args": {"correlation": 999}},
               {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "ts": call["ts"] + 700,
                "dur": 400.0, "tid": 7, "pid": 0, "args": {"correlation": 999, "stream": 7}}]
    records = from_chrome_trace(trace)
    copy = [r for r in records if r.name.startswith("Memcpy")]
    assert [(r.window, r.iteration, r.dur_us) for r in copy] == [("call", 0, 400.0)]

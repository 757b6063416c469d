"""Runtime signature and segment scoring: ghost branches, side streams, the MoE filter trap."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from verifiers import contract
from verifiers.device import Flusher, open_device
from verifiers.kernel_trace import from_chrome_trace, from_rocprofv3_csv, profile_launches
from verifiers.problem import SegmentSpec, SignatureSpec, load_problem
from verifiers.segment import score_segment, segment_speedup
from verifiers.signature import check_signature, merge

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
    records = from_rocprofv3_csv(FIXTURES / "traces" / "moe_stage2_kernel_trace.csv", FLUSH)
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
    with pytest.raises(ValueError, match="missing columns"):
        from_rocprofv3_csv(bad, FLUSH)


def test_segment_speedup_is_baseline_over_candidate():
    base = score_segment(from_chrome_trace(gpu_trace([(GEMM, 885.0, 7), ("moe_topk_reduce_inbf16", 321.0, 7)])), SegmentSpec(), "b")
    cand = score_segment(from_chrome_trace(gpu_trace([(GEMM, 840.0, 7), (REDUCE, 157.0, 7)])), SegmentSpec(), "c")
    assert segment_speedup(base, cand) == pytest.approx(1206.0 / 997.0)


def _candidate(name):
    path = FIXTURES / "candidates" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_sig_cand_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build


def test_ghost_branch_is_caught_by_the_cpu_profiler():
    problem = load_problem(str(FIXTURES / "cpu_matmul_problem.py"))
    device = open_device("cpu")
    flusher = Flusher(device, 1 << 20)
    dims = {"M": 48, "N": 40, "K": 32}
    pristine = problem.make_inputs(dims, 0, device.torch_device)
    make_out = lambda: problem.make_outputs(dims, device.torch_device)  # noqa: E731
    spec = merge(problem.candidate_signature, SignatureSpec(forbidden=problem.arm("torch_mm").signature.required))
    results = {}
    for name in ("ghost_branch", "honest_bmm"):
        bound = contract.bind(name, _candidate(name), pristine, make_out, device)
        records = profile_launches([bound.launch], device, flusher, calls=2)
        results[name] = check_signature(records, spec, name, FLUSH)
    ghost = results["ghost_branch"]
    assert ghost.status == "FAIL"
    assert ghost.required_missing == [r"aten::bmm"] and r"aten::mm" in ghost.forbidden_found
    assert results["honest_bmm"].status == "PASS", results["honest_bmm"].failures
    assert results["honest_bmm"].launches_per_iter == [1, 1]

"""The doctor's decisions on the figures a GPU box reports, checked here with the exact forms
real devices and ROCm tools produce (gcnArchName with feature suffixes, '.kd' kernel names)."""
from __future__ import annotations

import torch

from skill_server.doctor.plan import BY_ID, blocked, select
from skill_server.doctor import seams as doctor_seams
from skill_server.doctor.env_checks import judge_caches, judge_profiler
from skill_server.doctor.measure_checks import judge_flush, judge_kernel_names, judge_timer_floor, min_kernel_for_tolerance
from skill_server.doctor.result import FlushDetails, result
from skill_server.doctor.tool_checks import flydsl_pin

MIB = 1 << 20
PROBE = "skill_doctor_probe"


# ------------------------------------------------------------------------------ caches
def test_mi355x_flush_is_judged_against_l2s_plus_the_mall():
    arch = "gfx950:sramecc+:xnack-"
    known = doctor_seams.known_amd_cache(arch)
    assert known is not None and known.mall_bytes == 256 * MIB  # the feature suffixes do not hide the arch
    # without the arch the rule knows only its 512 MiB ROCm floor: 64 MiB short of 2 x (32 MiB of L2s + 256 MiB MALL)
    floor_only = doctor_seams.flush_rule_bytes("rocm", 4 * MIB)  # torch reports one XCD's 4 MiB L2
    verdict = judge_caches("rocm", arch, 4 * MIB, known, floor_only, "AMD Instinct MI355X")
    d = verdict.details
    assert d.llc_bytes == 8 * 4 * MIB + 256 * MIB and d.required_flush_bytes == 2 * d.llc_bytes
    assert floor_only == 512 * MIB and verdict.status == "warn" and "64 MiB short" in verdict.finding
    assert str(d.required_flush_bytes) in verdict.fix
    # with the arch the device reports, the verifier's own rule covers the L2s and the MALL
    flush = doctor_seams.flush_rule_bytes("rocm", 4 * MIB, arch)
    assert flush == d.required_flush_bytes == 576 * MIB
    assert judge_caches("rocm", arch, 4 * MIB, known, flush, "AMD Instinct MI355X").status == "ok"


def test_h200_l2_is_covered_and_an_unknown_amd_mall_is_said_so():
    flush = doctor_seams.flush_rule_bytes("cuda", 60 * MIB)
    assert judge_caches("cuda", None, 60 * MIB, None, flush, "NVIDIA H200").status == "ok"
    unknown = judge_caches("rocm", "gfx90a:sramecc+:xnack-", 8 * MIB, doctor_seams.known_amd_cache("gfx90a"),
                           doctor_seams.flush_rule_bytes("rocm", 8 * MIB, "gfx90a"))
    assert unknown.status == "warn" and "gfx90a" in unknown.finding and "not known" in unknown.finding


# ---------------------------------------------------------------------------- timer floor
def test_timer_floor_states_the_shortest_kernel_it_does_not_bias():
    c = 10.0  # us
    b = min_kernel_for_tolerance(c)
    measured = (1.3 * b + c) / (b + c)
    assert abs(measured - 0.99 * 1.3) < 1e-9
    steady = judge_timer_floor("device events", [0.010] * 200, [0.012] * 200, [0.014] * 200)
    assert steady.status == "ok" and steady.details.median_us == 10.0 and steady.details.launch_median_us == 14.0
    assert f"{b:.0f} us" in steady.finding
    noisy = judge_timer_floor("device events", [0.010] * 150 + [0.080] * 50, [0.1] * 200, None)
    assert noisy.status == "warn" and "noisy" in noisy.finding


# -------------------------------------------------------------------------- flush eviction
def _flush(warm: float, after_flush: float, after_ref: float) -> FlushDetails:
    return FlushDetails(buffer_bytes=72 * MIB, flush_bytes=512 * MIB, reference_bytes=1152 * MIB, samples=15,
                        warm_us=warm, after_flush_us=after_flush, after_reference_us=after_ref,
                        flush_ratio=after_flush / warm, reference_ratio=after_ref / warm)


def test_flush_that_evicts_one_that_does_not_and_no_cache_effect():
    assert judge_flush(_flush(20.0, 34.5, 35.0)).status == "ok"
    partial = judge_flush(_flush(20.0, 24.0, 35.0))
    assert partial.status == "warn" and "27% of a full eviction" in partial.finding and "1073741824" in partial.fix
    flat = judge_flush(_flush(20.0, 20.5, 21.0))
    assert flat.status == "warn" and "cannot be told" in flat.finding


# ---------------------------------------------------------------------------- kernel names
def _probe_records(name: str, flush_name: str = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int> >"):
    rows = []
    for i in range(3):
        rows.append(doctor_seams.kernel_record(flush_name, "flush", i, start_us=10.0 * i))
        rows.append(doctor_seams.kernel_record(name, "call", i, start_us=10.0 * i + 5))
    return rows


def _judge(name: str, **kw):
    records = _probe_records(name, **kw)
    gate = doctor_seams.signature_gate(records, [f"^{PROBE}$"], 1, "doctor probe")
    return judge_kernel_names(PROBE, records, gate, doctor_seams.default_flush_pattern()), gate


def test_plain_probe_name_passes_the_verifiers_gate():
    verdict, gate = _judge(PROBE)
    assert gate.status == "PASS" and verdict.status == "ok" and verdict.details.launches_per_iter == [1, 1, 1]
    assert verdict.details.flush_matched is True  # torch's fill kernel matches the verifier's flush pattern


def test_rocm_kd_names_follow_the_verifiers_own_gate():
    """ROCm's forms: Triton/FlyDSL 'name.kd', older tools' 'name [clone .kd]'. Doctor reports
    the raw name and says exactly what the verifier's signature gate does with it."""
    for raw in (f"{PROBE}.kd", f"{PROBE} [clone .kd]"):
        verdict, gate = _judge(raw)
        assert verdict.details.raw_names == [raw]
        if gate.status == "PASS":  # the verifier normalises the suffix
            assert verdict.status == "ok"
        else:
            assert verdict.status == "warn" and repr(raw) in verdict.finding and f"^{PROBE}$" in verdict.finding
            assert ".kd" in verdict.fix and not verdict.details.matched


def test_a_probe_that_never_shows_up_and_a_flush_the_pattern_misses():
    verdict, _ = _judge("some_other_kernel")
    assert verdict.status == "failed" and "never appeared" in verdict.finding
    verdict, _ = _judge(PROBE, flush_name="__amd_rocclr_fillBufferAligned")
    assert verdict.details.flush_matched is False and verdict.status == "warn" and "iterations" in verdict.finding


# ------------------------------------------------------------------------------ profiler
def test_profiler_judgement_uses_this_torchs_real_activities():
    supported = {a.name for a in torch.profiler.supported_activities()}
    assert judge_profiler(False, supported, ["aten::add_"])[0] == "ok"
    # this CPU build's profiler has no device activity: on a GPU box that would be missing
    status, finding, fix = judge_profiler(True, supported, [])
    assert status == "missing" and "no device activity" in finding and "--no-profile" in fix
    assert judge_profiler(True, supported | {"CUDA"}, [])[0] == "missing"
    assert judge_profiler(True, supported | {"CUDA"}, ["void at::native::vectorized_elementwise_kernel"])[0] == "ok"


# ---------------------------------------------------------------------------------- plan
def test_a_gpu_check_asks_for_the_device_check_and_inherits_its_reason():
    assert [s.id for s in select(["kernel_names"])] == ["torch", "device", "kernel_names"]
    done = {"torch": [result("torch", "t", "ok", "torch 2.13.0+cpu")],
            "device": [result("device", "d", "not_applicable", "no GPU: torch 2.13.0+cpu is a CPU build; more")]}
    skipped = blocked(BY_ID["flush_eviction"], done)
    assert skipped.status == "not_applicable" and skipped.finding.startswith("no GPU: torch 2.13.0+cpu is a CPU build")
    done["device"] = [result("device", "d", "missing", "torch is a ROCm build but sees no GPU", "check /dev/kfd")]
    skipped = blocked(BY_ID["flush_eviction"], done)
    assert "needs a usable GPU" in skipped.finding and skipped.fix == "check /dev/kfd"
    done["device"] = [result("device", "d", "ok", "MI355X")]
    assert blocked(BY_ID["flush_eviction"], done) is None


def test_the_flydsl_pin_comes_from_pyproject():
    assert flydsl_pin() == "0.5.0"

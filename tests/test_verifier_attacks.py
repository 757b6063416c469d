"""One test per attack class: a cheating candidate, the whole pipeline (runner, judge
process, zygote, arm processes), and what the verifier must conclude.

Every candidate here got a non-FAIL verdict -- most of them FASTER -- from the verifier
whose judge shared a process with the candidate (git 357582d). The honest work inside
each cheat is made slower than the baseline's on purpose, so only the cheat could make it
look fast: "not FASTER" then means the cheat gained nothing (which holds beside another pytest
worker too). Two tests are ``alone`` (tests/box_share.py): the baseline-drift bound, which
a busy box moves, and the one that plants bytecode in the checkout, where another worker's
processes would import it.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from verifier_support import HIDDEN_FILE, PARITY_ONLY, PROBLEM_FILE, candidate, fast_options, verifier_processes

from verifiers.api import verify
from verifiers.options import VerifyOptions

REPO = Path(__file__).resolve().parent.parent
SHAPE = ["192x192x192"]


def run(name: str, problem: str = PROBLEM_FILE, shapes=SHAPE, **options):
    report = verify(problem, candidate(name), shapes=shapes, options=fast_options(**options))
    assert verifier_processes() == [], "a verifier process outlived the run"
    return report


def stage(report, name: str):
    return report.shape_reports[0].stages[name]


# ---------------------------------------------------------------- the report itself
def test_exit_and_signal_handlers_cannot_rewrite_the_report():
    report = verify(PROBLEM_FILE, candidate("exit_handler_report"), shapes=["64x64x64"], options=VerifyOptions(**PARITY_ONLY))
    assert report.verdict == "FAIL"
    shape = report.shape_reports[0]
    # the report is the judge's: every stage it ran is there, and it failed the zero output
    assert shape.parity is not None and shape.stages["parity"].status == "FAIL" or shape.stages["integrity"].status == "FAIL"
    assert report.speedup is None


def test_walking_the_stack_and_gc_finds_no_run_oracle_or_rules():
    report = run("stack_walker", **PARITY_ONLY)
    assert report.verdict == "FAIL" and stage(report, "parity").status == "FAIL"
    assert "NaN" in stage(report, "parity").reason or "outside" in stage(report, "parity").reason


def test_loosening_the_rules_objects_changes_nothing_the_judge_applies():
    report = run("rules_loosener", **PARITY_ONLY)
    assert report.verdict == "FAIL"
    assert "outside rtol" in stage(report, "parity").reason or "relative L2" in stage(report, "parity").reason


# ---------------------------------------------------------------- calls that only look computed
def test_computing_only_when_the_output_is_poisoned_gains_nothing():
    report = run("poison_sniffer", profile=False)  # every call is poisoned first: it always does its slow work
    assert report.verdict != "FASTER", report.summary()
    assert stage(report, "timing").status == "PASS"


def test_writing_into_the_inputs_only_while_timed_fails_on_the_checked_calls():
    report = run("input_writer_when_timed", profile=False)  # the judge compares the inputs after every timed call
    assert report.verdict == "FAIL", report.summary()
    assert "modified its inputs ['a']" in stage(report, "timing").reason


def test_computing_only_under_the_profiler_fails_on_the_checked_calls():
    report = run("profiler_sniffer", profile=False)
    assert report.verdict == "FAIL", report.summary()
    failed = [st.reason for st in report.shape_reports[0].stages.values() if st.status == "FAIL"]
    assert any("not computed from this call's inputs" in r or "NaN" in r for r in failed), failed


def test_a_cache_keyed_by_a_fingerprint_of_the_values_never_hits():
    report = run("fingerprint_cache", profile=False)  # fresh values before every call: it always recomputes (slowly)
    assert report.verdict != "FASTER", report.summary()
    ab = report.shape_reports[0].timing.ab
    assert ab is None or ab.speedup < 1.0, ab.speedup  # twice the work on every miss: ~0.5; a hit ~2


def _stale(report) -> bool:
    """Caught serving an output computed for other inputs: in parity (a new buffer set may
    be mapped where an old one was) or on a checked timed call."""
    reasons = stage(report, "parity").reason + stage(report, "timing").reason
    return "not computed from this call's inputs" in reasons or "outside rtol" in reasons


def test_a_cache_keyed_by_version_counters_serves_stale_outputs_and_fails():
    report = run("version_cache", profile=False)  # the judge writes the inputs from its own process: counters never move
    assert report.verdict == "FAIL" and _stale(report), report.summary()


def test_a_result_cache_keyed_by_pointer_fails_on_the_checked_calls():
    report = run("cache_by_pointer", profile=False)
    assert report.verdict == "FAIL" and _stale(report), report.summary()


# ---------------------------------------------------------------- clocks and the baseline
def test_patching_the_timing_code_in_its_own_process_fails_on_the_judges_clock():
    report = run("timing_patcher", shapes=["256x256x256"], profile=False)
    assert report.verdict == "FAIL", report.summary()
    reason = stage(report, "timing").reason
    assert "clock" in reason and "not what the judge observed" in reason


@pytest.mark.alone
def test_wrapping_the_baselines_launch_is_impossible_from_another_process():
    report = run("baseline_wrapper", profile=False)
    assert report.verdict != "FASTER", report.summary()
    t = report.shape_reports[0].timing
    assert t.baseline_drift is not None
    # the baseline ran as it did alone; on a box other processes load, its two phases drift apart
    # by themselves (+76 % seen beside a CI run), and the verdict above is what the defence buys
    busy = t.box_load is not None and t.box_load.foreign_cores >= 0.5
    assert abs(t.baseline_drift) < 0.5 or busy, (t.baseline_drift, t.box_load)


def test_leaving_torch_thread_settings_for_the_baseline_changes_only_its_own_process():
    report = run("thread_sabotage", profile=False)
    assert report.verdict != "FASTER", report.summary()


# ---------------------------------------------------------------- processes
def test_work_done_in_a_forked_helper_fails():
    report = run("forked_helper", profile=False)
    assert report.verdict == "FAIL", report.summary()
    text = " ".join(report.shape_reports[0].integrity_changes) + stage(report, "timing").reason
    assert "forked helper" in text or "started" in text


def test_a_double_forked_helper_that_escaped_the_arm_is_adopted_and_fails():
    report = run("double_fork_helper", profile=False)
    assert report.verdict == "FAIL", report.summary()
    assert any("escaped its arm" in c or "started" in c for c in report.shape_reports[0].integrity_changes), \
        report.shape_reports[0].integrity_changes


@pytest.mark.parametrize("name,where", [
    ("crashes", "ended"), ("closes_fds", "ended"), ("raises_base_exception", "KeyboardInterrupt"),
    ("exits_process", "ended"),
])
def test_crashing_closing_its_channel_or_raising_is_the_candidates_failure(name, where):
    report = run(name, **PARITY_ONLY)
    assert report.verdict == "FAIL", report.summary()
    assert where in stage(report, "parity").reason or where in stage(report, "load").reason


def test_a_candidate_that_hangs_fails_at_the_time_limit():
    report = run("hangs", **{**PARITY_ONLY, "time_limit_s": 5, "load_timeout_s": 4})
    assert report.verdict == "FAIL"
    assert "hung" in stage(report, "parity").reason or "hung" in stage(report, "load").reason


# ---------------------------------------------------------------- hidden cases, files, traces
def test_nothing_in_argv_or_the_environment_tells_a_hidden_case_apart(monkeypatch):
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)  # this test's own name says "hidden"
    report = verify(HIDDEN_FILE, candidate("argv_env_sniffer"), options=VerifyOptions(**{**PARITY_ONLY, "hidden_shapes": True}))
    visible, hidden = report.shape_reports
    assert visible.stages["parity"].status == "PASS"
    assert hidden.stages["parity"].status == "FAIL" and report.verdict == "FAIL"


@pytest.mark.alone
def test_planted_bytecode_for_a_harness_module_fails_the_run_and_is_removed(monkeypatch):
    # the fallback where arms are not confined (no Landlock): with the sandbox the tree is read-only
    # to the candidate (tests/test_verifier_sandbox.py)
    monkeypatch.setenv("SKILL_SERVER_SANDBOX", "off")
    pyc = REPO / "verifiers" / "judge" / "__pycache__" / f"stats.{sys.implementation.cache_tag}.pyc"
    try:
        report = run("planted_pyc", **PARITY_ONLY)
        assert report.verdict == "FAIL"
        changes = " ".join(report.shape_reports[0].integrity_changes)
        assert "planted bytecode deleted" in changes and "stats" in changes
        assert not pyc.exists()
        # an ordinary import in a new process, and the next verification, see the real module
        fresh = subprocess.run([sys.executable, "-c", "import verifiers.judge.stats as s; print(s.decide(0.9, 1.1, 0.01))"],
                               capture_output=True, text=True, cwd=REPO, timeout=120)
        assert fresh.stdout.strip() == "NO_DIFFERENCE", fresh.stderr
        assert run("constant_zero", **PARITY_ONLY).verdict == "FAIL"
    finally:
        pyc.unlink(missing_ok=True)


def test_emptying_the_traces_only_empties_its_own():
    report = run("trace_emptier", timing=False)
    sig = report.shape_reports[0].signature
    assert stage(report, "signature").status == "FAIL"
    assert sig[0].arm.startswith("baseline") and sig[0].status == "PASS"  # the baseline's own process
    assert sig[1].status == "FAIL"


def test_the_servers_secrets_never_reach_an_arms_environment(monkeypatch):
    """Arms start from an allow-listed environment (verifiers.arms.env): the server's token,
    its database URL and any other credential in its environment are not in the arm's
    ``os.environ`` nor in its initial environment block (/proc/self/environ)."""
    planted = {"SKILL_SERVER_TOKEN": "planted-token-1", "SKILL_SERVER_LEDGER": "postgresql://u:planted-pass-2@h/db",
               "AWS_SECRET_ACCESS_KEY": "planted-aws-3", "HF_TOKEN": "planted-hf-4",
               "CUDA_SECRET_THING": "planted-cuda-5"}  # an allowed prefix, a secret-looking name
    for k, v in planted.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SKILL_SERVER_SANDBOX", "off")  # the environment is the defence here, not Landlock
    report = run("environ_reader", **PARITY_ONLY)
    text = report.model_dump_json()
    assert "planted-" not in text, [m for m in planted.values() if m in text]
    assert stage(report, "parity").status == "PASS", stage(report, "parity").reason


def test_the_operator_can_hand_an_arm_one_more_variable():
    from verifiers.arms.env import arm_environment

    env = {"PATH": "/bin", "MY_KERNEL_FLAG": "1", "MY_KERNEL_TOKEN": "t", "HIP_VISIBLE_DEVICES": "0",
           "HIP_AUTH_TOKEN": "x", "SKILL_SERVER_LEDGER": "postgresql://x", "SKILL_SERVER_SANDBOX": "off",
           "SKILL_SERVER_ARM_ENV": "MY_KERNEL_*, MY_KERNEL_TOKEN"}
    got = arm_environment(env)
    assert got == {"PATH": "/bin", "MY_KERNEL_FLAG": "1", "MY_KERNEL_TOKEN": "t", "HIP_VISIBLE_DEVICES": "0",
                   "SKILL_SERVER_SANDBOX": "off", "OPENBLAS_NUM_THREADS": "1"}


def test_numpys_blas_pool_is_one_thread_unless_the_operator_says_otherwise():
    """OpenBLAS threads spin after a call: arm CPU time outside launch() that the CPU clock check
    read as hidden work (the honest Triton twin FAILed by 6-8 ms per call on a quiet box)."""
    from verifiers.arms.env import arm_environment

    assert arm_environment({"PATH": "/bin"})["OPENBLAS_NUM_THREADS"] == "1"
    assert arm_environment({"PATH": "/bin", "OPENBLAS_NUM_THREADS": "4"})["OPENBLAS_NUM_THREADS"] == "4"


def test_lowering_the_baselines_priority_or_pinning_it_from_outside_fails():
    """As root an arm may renice, re-pin or limit other processes (Landlock mediates none of
    it). The candidate does that to every thread of the baseline processes, then computes
    honestly; the judge compares the trusted processes' scheduling and limits while the
    candidate exists."""
    report = run("baseline_renicer", profile=False)
    assert report.verdict == "FAIL", report.summary()
    reason = stage(report, "timing").reason
    assert "scheduling or resource limits were changed from outside" in reason and "nice 19" in reason, reason


def test_an_arms_memory_holds_no_byte_of_the_judges_key_or_job():
    """The judge forks its zygote before it reads the envelope (channel key, job, environment),
    and reads the preamble before it without buffering: a candidate scanning its own memory
    (the heap included) finds neither. Forking after the read, or reading the preamble
    through a buffered stream, makes this fail."""
    report = run("memory_scanner", **PARITY_ONLY)
    assert stage(report, "parity").status == "PASS", stage(report, "parity").reason
    assert "FOUND IN MEMORY" not in report.model_dump_json()


def test_computing_other_data_only_under_the_profiler_fails_on_the_profiled_calls():
    """Both arms' profilers start and stop side by side (verifiers.judge.profiling.profile_arms);
    every profiled call is still checked against its own oracle, one arm at a time."""
    report = run("wrong_under_profiler", timing=False)
    shape = report.shape_reports[0]
    assert report.verdict == "FAIL", report.summary()
    assert stage(report, "signature").status == "FAIL"
    assert "profiled call" in stage(report, "signature").reason, stage(report, "signature").reason
    assert stage(report, "parity").status == "PASS"  # right on every call the profiler does not record


def test_an_honest_run_reports_where_its_time_went():
    report = run("honest_bmm", timing=False)
    phases = report.shape_reports[0].phase_seconds
    assert stage(report, "signature").status in ("PASS", "SKIPPED"), stage(report, "signature").reason
    for key in ("start", "baseline_refs", "solo", "candidate_start", "candidate_parity",
                "profile_build", "profile_start", "profile_calls", "profile_stop"):
        assert key in phases and phases[key] >= 0, phases

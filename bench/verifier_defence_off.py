"""Disable one verifier defence at a time, in a throw-away copy of the tree, and run the test
that guards it: the test must fail (rc 1). Writes bench/results/verifier_defence_off.json.

    python bench/verifier_defence_off.py            # every experiment (~20 min on 2 loaded cores)
    python bench/verifier_defence_off.py 3 7        # by index
    python bench/verifier_defence_off.py extra      # the combinations where one defence covers another
    python bench/verifier_defence_off.py sandbox    # the arm sandbox's layers (verifier_defence_off_sandbox.json)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
SRC = Path(__file__).resolve().parents[1]
OUT = SRC / "bench" / "results"
EXTRA2 = [
 ("poison + checks + timer-floor guard off (profiling off too)", [("verifiers/judge/session.py", "        tensors.poison(bound.buffers.outputs, 0)\n        bound.poison_run = 0", "        bound.poison_run = 0"),
   ("verifiers/judge/session.py", "        pool.calls += 1\n        for name, (_, got) in samples.items():", "        pool.calls += 1\n        return []\n        for name, (_, got) in samples.items():"),
   ("verifiers/judge/timing.py", "        if short and result.inconclusive is None:", "        if False:"),
   ("tests/test_verifier_attacks.py", '    report = run("poison_sniffer")', '    report = run("poison_sniffer", profile=False)')],
  ["tests/test_verifier_attacks.py::test_computing_only_when_the_output_is_poisoned_gains_nothing"]),
]
FLOOR_OFF = ("verifiers/judge/timing.py", "        if short and result.inconclusive is None:", "        if False:")
# a cache hit is shorter than 1.5x the timer floor on CPU, so that guard alone already keeps
# these cheats from FASTER: it goes too, so the defence under test is the only one left
EXTRA3 = [
 ("fresh inputs + timer-floor guard off", [("verifiers/judge/session.py", '        """New values for the changing inputs, written into the judge\'s private copy."""\n', '        """New values for the changing inputs, written into the judge\'s private copy."""\n        return\n'), FLOOR_OFF],
  ["tests/test_verifier_attacks.py::test_a_cache_keyed_by_a_fingerprint_of_the_values_never_hits"]),
 ("poison + checks + timer-floor guard off", [("verifiers/judge/session.py", "        tensors.poison(bound.buffers.outputs, 0)\n        bound.poison_run = 0", "        bound.poison_run = 0"),
   ("verifiers/judge/session.py", "        pool.calls += 1\n        for name, (_, got) in samples.items():", "        pool.calls += 1\n        return []\n        for name, (_, got) in samples.items():"), FLOOR_OFF],
  ["tests/test_verifier_attacks.py::test_computing_only_when_the_output_is_poisoned_gains_nothing"]),
]
EXTRA = [
 ("fresh inputs off (profiling off too)", [("verifiers/judge/session.py", '        """New values for the changing inputs, written into the judge\'s private copy."""\n', '        """New values for the changing inputs, written into the judge\'s private copy."""\n        return\n'),
   ("tests/test_verifier_attacks.py", '    report = run("fingerprint_cache")', '    report = run("fingerprint_cache", profile=False)')],
  ["tests/test_verifier_attacks.py::test_a_cache_keyed_by_a_fingerprint_of_the_values_never_hits"]),
 ("poison + checks off (profiling off too)", [("verifiers/judge/session.py", "        tensors.poison(bound.buffers.outputs, 0)\n        bound.poison_run = 0", "        bound.poison_run = 0"),
   ("verifiers/judge/session.py", "        pool.calls += 1\n        for name, (_, got) in samples.items():", "        pool.calls += 1\n        return []\n        for name, (_, got) in samples.items():"),
   ("tests/test_verifier_attacks.py", '    report = run("poison_sniffer")', '    report = run("poison_sniffer", profile=False)')],
  ["tests/test_verifier_attacks.py::test_computing_only_when_the_output_is_poisoned_gains_nothing"]),
 ("candidate failures blamed as ERROR (really)", [("verifiers/judge/session.py", "        self.candidate = candidate if candidate is not None else (arm is not None and not arm.trusted)", "        self.candidate = False")],
  ["tests/test_verifier_attacks.py::test_crashing_closing_its_channel_or_raising_is_the_candidates_failure"]),
]
EXPS = [
 ("per-call sampled checks off", [("verifiers/judge/session.py", "        pool.calls += 1\n        for name, (_, got) in samples.items():", "        pool.calls += 1\n        return []\n        for name, (_, got) in samples.items():")],
  ["tests/test_verifier_attacks.py::test_computing_only_under_the_profiler_fails_on_the_checked_calls"]),
 ("fresh inputs before every call off", [("verifiers/judge/session.py", '        """New values for the changing inputs, written into the judge\'s private copy."""\n', '        """New values for the changing inputs, written into the judge\'s private copy."""\n        return\n')],
  ["tests/test_verifier_attacks.py::test_a_cache_keyed_by_a_fingerprint_of_the_values_never_hits"]),
 ("poison + checks off", [("verifiers/judge/session.py", "        tensors.poison(bound.buffers.outputs, 0)\n        bound.poison_run = 0", "        bound.poison_run = 0"),
                          ("verifiers/judge/session.py", "        pool.calls += 1\n        for name, (_, got) in samples.items():", "        pool.calls += 1\n        return []\n        for name, (_, got) in samples.items():")],
  ["tests/test_verifier_attacks.py::test_computing_only_when_the_output_is_poisoned_gains_nothing"]),
 ("judge's clock and clock checks off (arm's clock trusted)", [
     ("verifiers/judge/timing.py", "        return float(c.arm_ms) if self.gpu else c.judge_ms", "        return float(c.arm_ms)"),
     ("verifiers/judge/timing.py", "        return c.judge_ms if self.gpu else float(c.arm_ms)", "        return float(c.arm_ms)"),
     ("verifiers/judge/timing.py", "        ok = abs(gap_b - gap_a) <= bound", "        ok = True")],
  ["tests/test_verifier_attacks.py::test_patching_the_timing_code_in_its_own_process_fails_on_the_judges_clock"]),
 ("process-tree watch off", [("verifiers/judge/session.py", "        table = procwatch.all_processes()\n        found: list[Blame] = []", "        return []\n        table = procwatch.all_processes()\n        found: list[Blame] = []")],
  ["tests/test_verifier_attacks.py::test_work_done_in_a_forked_helper_fails",
   "tests/test_verifier_attacks.py::test_a_double_forked_helper_that_escaped_the_arm_is_adopted_and_fails"]),
 ("channel authentication off", [("verifiers/ipc/channel.py", "        if seq != self._seq + 1 or kind not in KINDS or not hmac.compare_digest(mac, _mac(self._key, seq, kind, body)):", "        if False:"),
                                 ("verifiers/launch/runner.py", '                listen.tamper = "the judge\'s channel carried two results"', "                pass")],
  ["tests/test_verifier_attacks.py::test_exit_and_signal_handlers_cannot_rewrite_the_report",
   "tests/test_verifier_integrity.py::test_the_channel_accepts_the_judges_lines_and_rejects_any_other"]),
 ("bytecode audit off", [("verifiers/launch/runner.py", "    planted = files.audit_pycache(pycache_before, files.pycache_snapshot())", "    planted = []")],
  ["tests/test_verifier_attacks.py::test_planted_bytecode_for_a_harness_module_fails_the_run_and_is_removed"]),
 ("file digests off", [("verifiers/launch/runner.py", "    changes = files.changed(listen.manifest, files.digest_files(listen.manifest)) if listen.manifest else []", "    changes = []")],
  ["tests/test_verifier_integrity.py::test_a_candidate_that_edits_a_file_the_judge_relies_on_fails"]),
 ("inputs-unchanged check of timed calls off", [("verifiers/judge/session.py", "        changed = [n for n, flag in zip(self.changing, record.changed) if bool(flag)]", "        changed = []")],
  ["tests/test_verifier_attacks.py::test_writing_into_the_inputs_only_while_timed_fails_on_the_checked_calls"]),
 ("profiling before the A/B rounds again", [("verifiers/judge/process.py", '        if not opts.timing:\n            self.stage(label, "timing", "SKIPPED"', '        if opts.profile and parity_ok:\n            self._profile(label, sessions[label], cand, gen)\n        if not opts.timing:\n            self.stage(label, "timing", "SKIPPED"')],
  ["tests/test_verifier_timing.py::test_no_arm_is_timed_after_it_ran_the_profiler"]),
 ("baseline drift check off", [("verifiers/judge/timing.py", "        self._drift(result)\n", "")],
  ["tests/test_verifier_timing.py::test_a_baseline_that_slows_down_once_the_candidate_exists_fails_the_run"]),
 ("timer-floor guard off", [("verifiers/judge/timing.py", "        if short and result.inconclusive is None:", "        if False:")],
  ["tests/test_verifier_timing.py::test_calls_shorter_than_the_timer_floor_are_inconclusive"]),
 ("load excuses any timing failure, gross ones too", [("verifiers/judge/timing.py", "GROSS = 4.0", "GROSS = 1e9")],
  ["tests/test_verifier_load.py::test_a_lying_clock_is_still_fail_on_a_loaded_box",
   "tests/test_verifier_load.py::test_a_check_failed_by_what_load_explains_is_inconclusive_not_fail"]),
 ("load never excuses (a busy box blames the candidate)", [("verifiers/judge/timing.py", "        excused = [text for text, how_far in self.soft if text in result.failures and how_far < GROSS]", "        excused = []")],
  ["tests/test_verifier_load.py::test_a_check_failed_by_what_load_explains_is_inconclusive_not_fail",
   "tests/test_verifier_load.py::test_a_neighbour_on_the_gpu_excuses_the_same_checks"]),
 ("opposite clock verdicts always excused on a loaded box", [("verifiers/judge/timing.py", "            self.soft.append((result.failures[-1], max(apart, 1.0 / apart) if apart > 0 else math.inf))", "            self.soft.append((result.failures[-1], 1.0))")],
  ["tests/test_verifier_load.py::test_clocks_of_opposite_direction_are_excused_by_load_only_when_close"]),
 ("rel-L2 floor back at eps", [("verifiers/judge/parity.py", "RATIO_FLOOR_OF_EPS = 1.0 / 64", "RATIO_FLOOR_OF_EPS = 1.0")],
  ["tests/test_verifier_parity.py::test_precision_downgrade_on_bf16_outputs_fails_the_relative_l2_rule"]),
 ("ROCm name normalisation off", [("verifiers/judge/kernel_trace.py", '    name = name.strip()\n    while True:', '    return name\n    while True:')],
  ["tests/test_verifier_signature.py::test_a_whole_rocprofv3_profile_run_splits_into_its_calls", "tests/test_verifier_signature.py::test_rocm_suffixes_are_normalised_before_matching"]),
 ("rocprofv3 split as before (fills are flushes, set-up in iteration 0)", [
     ("verifiers/judge/kernel_trace.py", 'def from_rocprofv3_csv(path: str | Path, marker: str = FLUSH_MARKER)', 'def from_rocprofv3_csv(path: str | Path, marker: str = r"flush|fill_|FillFunctor|memset")'),
     ("verifiers/judge/kernel_trace.py", '            window = "call" if iteration >= 0 else None  # before the first marker: set-up, not a call', '            window = "call"'),
     ("verifiers/judge/kernel_trace.py", '                iteration=iteration if iteration >= 0 else None, source="rocprofv3",', '                iteration=max(iteration, 0), source="rocprofv3",')],
  ["tests/test_verifier_signature.py::test_a_whole_rocprofv3_profile_run_splits_into_its_calls"]),
 ("scale-tag rule not run", [("verifiers/judge/profiling.py", "    if problem.kernel_name_check is not None:", "    if False:")],
  ["tests/test_verifier_signature.py::test_the_scale_tag_rule_runs_in_the_signature_stage"]),
 ("hidden shapes count for every stage in `complete`", [("verifiers/report.py", "        relevant = [s for s in shapes if not (s.hidden and name in HIDDEN_ONLY_STAGES)] or shapes", "        relevant = shapes")],
  ["tests/test_verifier_api.py::test_honest_candidate_passes_every_stage_and_the_run_is_complete"]),
 ("a hint in the arms' environment", [("verifiers/arms/zygote.py", "    sys.pycache_prefix = prefix\n", "    sys.pycache_prefix = prefix\n    os.environ['VERIFIER_CASES'] = 'visible+hidden'\n")],
  ["tests/test_verifier_attacks.py::test_nothing_in_argv_or_the_environment_tells_a_hidden_case_apart"]),
 ("unobservable baseline signature SKIPPED on CPU (as before)", [("verifiers/judge/profiling.py", '        return ProfileOutcome("ERROR", reason, "ERROR", reason, checks_, segments, out.segment_speedup)', '        return ProfileOutcome("SKIPPED", reason, "SKIPPED", reason, checks_, segments, out.segment_speedup)')],
  ["tests/test_verifier_signature.py::test_a_baseline_whose_signature_cannot_be_observed_is_an_error_on_every_platform"]),
 ("candidate failures blamed as ERROR", [("verifiers/judge/session.py", '        return "FAIL" if self.candidate else "ERROR"', '        return "ERROR"')],
  ["tests/test_verifier_attacks.py::test_crashing_closing_its_channel_or_raising_is_the_candidates_failure"]),
]
_T = "tests/test_verifier_sandbox.py::"
_ESC = _T + "test_an_escape_attempt_from_a_confined_arm_is_refused_and_harmless"
SANDBOX = [
 ("arm sandbox off (the zygote's child never enters its Landlock domain)",
  [("verifiers/arms/zygote.py", '        status = sandbox.enter(rules) if rules else sandbox.SandboxStatus(reason="the judge sent no policy")',
    "        status = sandbox.support()")],
  [_ESC, _T + "test_a_whole_verification_confines_the_candidate_and_says_so"]),
 ("network and scope layers off (filesystem rules only)",
  [("verifiers/arms/landlock.py", "        net = NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0", "        net = 0"),
   ("verifiers/arms/landlock.py", "        scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0", "        scoped = 0")],
  [f"{_ESC}[tcp_connect]", f"{_ESC}[abstract_unix]", f"{_ESC}[signal_judge]"]),
 ("per-role compile caches off (candidates compile into the baseline cache)",
  [("verifiers/arms/sandbox.py", '    jit = baseline_cache() if trusted else scratch / "jit"', "    jit = baseline_cache()"),
   ("verifiers/arms/sandbox.py", "    writes = [scratch] + ([prefix, jit] if trusted else [])", "    writes = [scratch, jit] + ([prefix] if trusted else [])")],
  [f"{_ESC}[plant_baseline_cache]", _T + "test_a_trusted_baseline_arm_writes_its_compile_cache_and_a_candidate_gets_its_own"]),
 ("read roots not split around secrets (a checkout on sys.path exposes var/)",
  [("verifiers/arms/sandbox.py", "    if not root.is_dir() or not any(s.is_relative_to(root) for s in secrets):", "    if True:")],
  [_T + "test_a_read_root_holding_the_state_folder_is_granted_around_it"]),
]
only = set(sys.argv[1:])
if "sandbox" in only:
    EXPS, only = SANDBOX, set()
if "extra" in only:
    EXPS, only = EXTRA, set()
if "extra2" in only:
    EXPS, only = EXTRA2, set()
    EXTRA = EXTRA2
if "extra3" in only:
    EXPS, only = EXTRA3, set()
    EXTRA = EXTRA3
results = []
for i, (name, patches, tests) in enumerate(EXPS):
    if only and str(i) not in only:
        continue
    dst = Path(tempfile.gettempdir()) / f"verifier-defence-off-{i}"
    shutil.rmtree(dst, ignore_errors=True)
    subprocess.run(f"cd {SRC} && git archive HEAD | (mkdir -p {dst} && tar -x -C {dst})", shell=True, check=True)
    ok = True
    for rel, old, new in patches:
        p = dst / rel
        text = p.read_text()
        if old not in text:
            ok = False
            print(f"!! patch for {name!r} does not apply in {rel}: {old[:60]!r}", flush=True)
        p.write_text(text.replace(old, new))
    env = dict(os.environ, PYTHONPATH=str(dst))
    stop = [] if EXPS is SANDBOX else ["-x"]  # every escape attempt is counted, not only the first
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *stop, *tests], cwd=dst, env=env,
                          capture_output=True, text=True, timeout=1500)
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-300:]
    results.append({"defence": name, "patch_applied": ok, "tests": tests, "rc": proc.returncode, "summary": tail})
    print(json.dumps(results[-1]), flush=True)
    for p in (SRC / "verifiers" / "__pycache__").glob("stats*.pyc"):
        p.unlink()
    shutil.rmtree(dst, ignore_errors=True)
name = ("verifier_defence_off_extra.json" if EXPS is EXTRA else "verifier_defence_off_sandbox.json" if EXPS is SANDBOX
        else "verifier_defence_off.json")
if EXPS is SANDBOX:  # with what ran it: the sandbox depends on the kernel
    import datetime

    from verifiers.arms import sandbox

    results = {"command": "python bench/verifier_defence_off.py sandbox",
               "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
               "device": f"CPU, {os.cpu_count()} cores, Linux {os.uname().release}",
               "sandbox": sandbox.support().text(), "results": results}
(OUT / name).write_text(json.dumps(results, indent=1))

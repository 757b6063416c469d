"""Starting judges (verifiers/launch/judge_launch.py, verifiers/launch/judge_start.py): forked from a warm
template kept per configuration, or exec'd; real processes throughout.

The template's security properties are tested where the attacks are: an arm's memory holds
no byte of the key, the job or the caller's environment
(test_verifier_attacks.py::test_an_arms_memory_holds_no_byte_of_the_judges_key_or_job) and
no secret of the caller's environment reaches an arm
(test_verifier_attacks.py::test_the_servers_secrets_never_reach_an_arms_environment).
"""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from verifier_support import PARITY_ONLY, PROBLEM_FILE, candidate, verifier_processes

from verifiers.launch import bytecode
from verifiers.launch import judge_launch
from verifiers.launch import procwatch
from verifiers.api import verify
from verifiers.options import VerifyOptions


def parity_run(progress=None, cand: str = "arm:torch_mm"):
    report = verify(PROBLEM_FILE, cand, shapes=["32x32x32"], options=VerifyOptions(**PARITY_ONLY),
                    progress=progress)
    assert report.shape_reports[0].stages["parity"].status == "PASS", report.summary()
    assert verifier_processes() == [], "a verifier process outlived the run"
    return report


@pytest.fixture
def warm(monkeypatch):
    """Warm judges on; whatever template an earlier test left (one per configuration, idle
    ones closed at the next launch) is reused, as a server would."""
    monkeypatch.delenv(judge_launch.WARM_ENV, raising=False)


def test_verifications_fork_their_judges_from_one_warm_template(warm):
    parity_run()
    (template,) = judge_launch.template_pids()
    forked: list[int] = []

    def watch(_done: int, _total: int, _message: str) -> None:
        forked.extend(p.pid for p in procwatch.descendants(template))

    parity_run(watch)
    assert judge_launch.template_pids() == [template]  # the same process served the second run
    assert forked, "no judge was forked from the template during the run"


def test_with_warm_judges_off_every_judge_is_execd(monkeypatch):
    judge_launch.close_templates()
    monkeypatch.setenv(judge_launch.WARM_ENV, "0")
    parity_run()
    assert judge_launch.template_pids() == []


def test_a_variable_an_arm_may_see_starts_another_template_and_the_idle_one_is_closed(warm, monkeypatch):
    parity_run()
    (first,) = judge_launch.template_pids()
    monkeypatch.setenv("SKILL_SERVER_TEST_UNLISTED", "1")  # not on the arm allow-list: the same template
    parity_run()
    assert judge_launch.template_pids() == [first]
    monkeypatch.setenv("SKILL_SERVER_SANDBOX", "off")  # the verifier's own switch: applied per run, same template
    monkeypatch.setenv("XDG_TEST_PROBE", "1")  # allowed, applied per run
    report = parity_run(cand=candidate("env_echo"))
    assert judge_launch.template_pids() == [first]
    assert report.provenance.sandbox.startswith("unavailable: turned off by the operator"), report.provenance.sandbox
    assert "arm sees XDG_TEST_PROBE=1 OMP_TEST_LISTED=None" in report.shape_reports[0].log_tail
    monkeypatch.delenv("SKILL_SERVER_SANDBOX")
    assert "landlock" in parity_run().provenance.sandbox
    monkeypatch.setenv("OMP_TEST_LISTED", "1")  # an allowed prefix an import may read: another template
    report = parity_run(cand=candidate("env_echo"))
    assert "arm sees XDG_TEST_PROBE=1 OMP_TEST_LISTED=1" in report.shape_reports[0].log_tail
    (second,) = judge_launch.template_pids()
    assert second != first and procwatch.proc_info(first) is None


@pytest.mark.parametrize("warm_judge", ["1", "0"])
def test_a_judge_that_cannot_read_its_job_ends_with_its_exit_code_and_leaves_no_zygote(monkeypatch, warm_judge,
                                                                                       tmp_path):
    monkeypatch.setenv(judge_launch.WARM_ENV, warm_judge)
    prefix = bytecode.CACHE.fresh_prefix()
    env = dict(os.environ)
    proc = judge_launch.launch(prefix, env, [p for p in __import__("sys").path if p], str(tmp_path))
    try:
        proc.stdin.write(json.dumps({"sys_path": []}) + "\n")
        proc.stdin.write("not an envelope\n")
        proc.stdin.close()
        assert proc.wait(timeout=120) == 2
        assert "unreadable job" in proc.stderr.read()
        deadline = time.monotonic() + 10
        while verifier_processes() and time.monotonic() < deadline:  # its zygote saw the judge go
            time.sleep(0.05)
        assert verifier_processes() == []
        assert isinstance(proc, judge_launch.ForkedJudge) == (warm_judge == "1")
    finally:
        bytecode.remove(Path(prefix))


def test_a_template_reniced_or_killed_is_never_forked_from_again(warm):
    """As root a candidate may renice or re-pin any process, the template too; every later
    judge would inherit that. The runner compares the template's scheduling and limits with
    those it started with before every fork; a dead template is replaced too."""
    parity_run()
    (first,) = judge_launch.template_pids()
    os.setpriority(os.PRIO_PROCESS, first, 10)
    parity_run()
    (second,) = judge_launch.template_pids()
    assert second != first and procwatch.proc_info(first) is None
    os.kill(second, signal.SIGKILL)
    parity_run()
    (third,) = judge_launch.template_pids()
    assert third not in (first, second)

"""The session marker the "no process is left behind" checks rely on (tests/process_owner.py)
reaches every process a verification starts: the judge (forked from a warm template, or
exec'd), its zygote and the arms. A process without it would be invisible to those checks."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from process_owner import SESSION_ENV, started_by_this_session
from verifier_support import PARITY_ONLY, PROBLEM_FILE

from verifiers.api import verify
from verifiers.launch import judge_launch, procwatch
from verifiers.options import VerifyOptions


@pytest.mark.parametrize("warm_judge", ["1", "0"])
def test_every_process_of_a_verification_carries_the_session_marker(monkeypatch, warm_judge):
    monkeypatch.setenv(judge_launch.WARM_ENV, warm_judge)
    marked: dict[int, bool] = {}

    def watch(_done: int, _total: int, _message: str) -> None:
        for info in procwatch.descendants(os.getpid()):
            mark = started_by_this_session(info.pid)
            if info.state != "Z" and procwatch.proc_info(info.pid) is not None:  # still there after the read
                marked[info.pid] = marked.get(info.pid, True) and mark

    report = verify(PROBLEM_FILE, "arm:torch_mm", shapes=["32x32x32"], options=VerifyOptions(**PARITY_ONLY),
                    progress=watch)
    assert report.shape_reports[0].stages["parity"].status == "PASS", report.summary()
    assert len(marked) >= 4, marked  # judge, zygote, baseline arm, candidate arm (and a template when warm)
    assert all(marked.values()), f"processes without {SESSION_ENV}: {[p for p, m in marked.items() if not m]}"


def test_a_process_of_another_session_is_not_counted():
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             env={**os.environ, SESSION_ENV: "another"})
    mine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not started_by_this_session(other.pid) and started_by_this_session(mine.pid)
    finally:
        for p in (other, mine):
            p.kill()
            p.wait()
    assert not started_by_this_session(mine.pid)  # gone

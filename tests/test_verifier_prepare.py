"""An arm's prepare step (the CK baseline's JIT build) runs in the judge before any arm
process, outside the time limit; what the baseline's dispatch picked is in the report."""
from __future__ import annotations

import subprocess
import sys
import time

from verifier_support import FIXTURES, PARITY_ONLY
from verifiers.launch import runner
from verifiers.api import verify
from verifiers.options import VerifyOptions

PREPARED = str(FIXTURES / "cpu_matmul_prepared.py")


def test_prepare_runs_first_for_every_shape_and_the_instance_is_reported(tmp_path, monkeypatch):
    log = tmp_path / "prepared.txt"
    monkeypatch.setenv("VERIFIER_TEST_PREPARE_LOG", str(log))
    options = VerifyOptions(**{**PARITY_ONLY, "hidden_shapes": True})
    report = verify(PREPARED, "arm:bmm", shapes=["64x48x32"], options=options)
    assert report.verdict != "ERROR", report.summary()
    # the hidden shape is prepared too: the judge gives the step every shape it will run
    assert sorted(log.read_text().splitlines()) == ["40x24x56: mm_instance_7 ready", "64x48x32: mm_instance_7 ready"]
    visible = report.shape_reports[0]
    assert "torch_mm: 64x48x32: mm_instance_7 ready" in visible.prepared
    assert visible.baseline_instance == "kernel_instance: mm_instance_7; variant: torch.mm(out=c)"


def test_a_failed_prepare_is_an_error_of_the_problem_before_any_arm_runs(monkeypatch):
    monkeypatch.setenv("VERIFIER_TEST_PREPARE_FAIL", "1")
    report = verify(PREPARED, "arm:bmm", shapes=["64x48x32"], options=VerifyOptions(**PARITY_ONLY))
    shape = report.shape_reports[0]
    assert report.verdict == "ERROR" and shape.stages["load"].status == "ERROR"
    assert "preparing arm torch_mm failed: RuntimeError: the module build failed: no compiler" in shape.stages["load"].reason
    assert shape.stages["parity"].status == "SKIPPED"


def test_the_time_limit_pauses_while_an_arm_prepares():
    def judge(seconds: float) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])

    listen = runner._Listen(reader=None, progress=None)  # type: ignore[arg-type]
    proc, t0 = judge(3.0), time.monotonic()
    assert runner._wait(proc, listen, t0, limit=1.0) is True  # no prepare step: 1 s is the limit
    proc.kill()
    proc.wait()
    listen.preparing_since = time.monotonic()
    proc, t0 = judge(3.0), time.monotonic()
    assert runner._wait(proc, listen, t0, limit=1.0) is False  # the judge was preparing all along

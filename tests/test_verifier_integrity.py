"""Tamper evidence: patched timers / synchronize / comparisons, edited harness files,
a candidate that ends the process, a worker that runs past its time limit."""
from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from verifiers import integrity, runner
from verifiers.api import verify
from verifiers.options import VerifyOptions

FIXTURES = Path(__file__).parent / "fixtures"
PROBLEM = str(FIXTURES / "cpu_matmul_problem.py")
FAST = VerifyOptions(rounds=5, timing=False, profile=False, seeds=[0], secret_seed=False, time_limit_s=300)


@pytest.mark.parametrize(
    "name,patched",
    [
        ("patch_timer", "time.perf_counter_ns was replaced"),
        ("patch_allclose", "torch.allclose was replaced"),
        ("patch_synchronize", "torch.cuda.synchronize was replaced"),
    ],
)
def test_monkey_patching_the_harness_fails(name, patched):
    report = verify(PROBLEM, f"{FIXTURES / 'candidates' / name}.py:build", shapes=["32x32x32"], options=FAST)
    assert report.verdict == "FAIL"
    shape = report.shape_reports[0]
    assert shape.stages["integrity"].status == "FAIL"
    assert any(patched in c for c in shape.integrity_changes), shape.integrity_changes
    # nothing after the import was trusted enough to run
    assert shape.stages["parity"].status == "SKIPPED"


def test_a_candidate_ending_the_process_fails():
    report = verify(PROBLEM, f"{FIXTURES / 'candidates' / 'exits_process'}.py:build", shapes=["32x32x32"], options=FAST)
    assert report.verdict == "FAIL"
    assert "without a report" in report.shape_reports[0].flags[0].message


def test_time_limit_kills_the_worker_and_fails(monkeypatch):
    monkeypatch.setattr(runner, "worker_command", lambda *a, **k: [sys.executable, "-c", "import time; time.sleep(60)"])
    report = runner.run_worker(PROBLEM, "x.py:build", "32x32x32", None, FAST.model_copy(update={"time_limit_s": 1.0}))
    assert report.verdict == "FAIL"
    assert any("time limit" in f.message for f in report.flags)


def test_snapshot_sees_replaced_functions_code_and_hooks():
    module = types.ModuleType("verifiers_test_guarded")
    def f():
        return 1
    module.f = f
    sys.modules[module.__name__] = module
    try:
        snap = integrity.Snapshot.take(extra_modules=(module.__name__,))
        assert snap.changes() == []
        f.__code__ = (lambda: 2).__code__
        assert any("__code__" in c for c in snap.changes())
        module.f = lambda: 3
        assert any("was replaced" in c for c in snap.changes())
        module.f = f
    finally:
        del sys.modules[module.__name__]


def test_harness_digest_covers_extra_files(tmp_path):
    extra = tmp_path / "problem.py"
    extra.write_text("A = 1\n")
    before = integrity.harness_digest([extra])
    assert integrity.harness_digest([extra]) == before
    extra.write_text("A = 2\n")
    assert integrity.harness_digest([extra]) != before

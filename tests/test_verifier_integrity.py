"""Files, bytecode, the judge's channel and the caller's time limit."""
from __future__ import annotations

import importlib.util
import marshal
import py_compile
import shutil
import sys
from pathlib import Path

import pytest
from verifier_support import PARITY_ONLY, PROBLEM_FILE, candidate, fast_options, verifier_processes

from verifiers.launch import bytecode
from verifiers.ipc import channel
from verifiers.launch import files
from verifiers.launch import judge_launch
from verifiers.launch import runner
from verifiers.api import verify
from verifiers.arms.candidate import parse_candidate
from verifiers.options import VerifyOptions

FIXTURES = Path(__file__).parent / "fixtures"


def test_a_candidate_that_edits_a_file_the_judge_relies_on_fails(tmp_path, monkeypatch):
    # the fallback where arms are not confined (no Landlock): with the sandbox the candidate cannot
    # write the problem's folder at all (tests/test_verifier_sandbox.py)
    monkeypatch.setenv("SKILL_SERVER_SANDBOX", "off")
    problem = tmp_path / "cpu_matmul_problem.py"
    shutil.copy(FIXTURES / "cpu_matmul_problem.py", problem)
    monkeypatch.setenv("VERIFIER_TEST_TARGET", str(problem))
    report = verify(str(problem), candidate("edits_problem_file"), shapes=["32x32x32"], options=VerifyOptions(**PARITY_ONLY))
    assert report.verdict == "FAIL"
    shape = report.shape_reports[0]
    assert shape.stages["integrity"].status == "FAIL"
    assert any(str(problem) in c and "changed" in c for c in shape.integrity_changes), shape.integrity_changes
    assert report.provenance.sandbox.startswith("unavailable: turned off by the operator")


def test_the_callers_time_limit_kills_the_judge_and_fails(monkeypatch):
    monkeypatch.setattr(runner, "STARTUP_ALLOWANCE_S", 0.0)
    monkeypatch.setenv("SKILL_SERVER_WARM_JUDGE", "0")  # an exec'd judge that only sleeps
    monkeypatch.setattr(judge_launch, "judge_command", lambda prefix: [sys.executable, "-c", "import time; time.sleep(60)"])
    reports = runner.run_judge(PROBLEM_FILE, parse_candidate("x.py:build"), ["32x32x32"], None, {},
                               VerifyOptions(time_limit_s=1.0))
    assert reports[0].verdict in ("ERROR", "FAIL") and "time limit" in reports[0].stages["load"].reason
    assert verifier_processes() == []


def _pyc_of(source: Path) -> Path:
    return Path(importlib.util.cache_from_source(str(source)))


def test_the_bytecode_audit_deletes_a_planted_pyc_and_keeps_an_honest_one(tmp_path, monkeypatch):
    pkg = tmp_path / "verifiers"
    pkg.mkdir()
    real, other = pkg / "real.py", pkg / "other.py"
    real.write_text("def f():\n    return 1\n")
    other.write_text("X = 2\n")
    before = files.pycache_snapshot(tmp_path)
    py_compile.compile(str(other), cfile=str(_pyc_of(other)))  # honest: exactly the source's compilation
    planted = _pyc_of(real)
    planted.parent.mkdir(exist_ok=True)
    st = real.stat()
    header = importlib.util.MAGIC_NUMBER + b"\0\0\0\0" + int(st.st_mtime).to_bytes(4, "little") + st.st_size.to_bytes(4, "little")
    planted.write_bytes(header + marshal.dumps(compile("def f():\n    return 2\n", str(real), "exec")))
    found = files.audit_pycache(before, files.pycache_snapshot(tmp_path))
    assert len(found) == 1 and "real" in found[0] and "not the compilation" in found[0]
    assert not planted.exists() and _pyc_of(other).exists()


def test_file_digests_name_what_changed(tmp_path):
    a = tmp_path / "a.py"
    a.write_text("A = 1\n")
    before = files.digest_files([a, tmp_path / "gone.py"])
    a.write_text("A = 2\n")
    assert files.changed(before, files.digest_files([a, tmp_path / "gone.py"])) == [f"{a} changed"]
    assert files.combined_digest(before) != files.combined_digest(files.digest_files([a]))


def test_the_channel_accepts_the_judges_lines_and_rejects_any_other():
    key = channel.new_key()
    lines = []

    class Sink:
        def write(self, text):
            lines.append(text)

        def flush(self):
            pass

    writer = channel.Writer(key, Sink())
    writer.send("progress", {"done": 1})
    writer.send("result", {"shapes": []})
    reader = channel.Reader(key)
    assert reader.parse("torch says hello\n") is None
    assert reader.parse(lines[0]).payload == {"done": 1}
    forged = lines[1].replace('"shapes":[]', '"shapes":[{"verdict":"FASTER"}]')
    with pytest.raises(channel.TamperError):
        reader.parse(forged)
    with pytest.raises(channel.TamperError):  # replayed, out of sequence
        channel.Reader(key).parse(lines[1])
    with pytest.raises(channel.TamperError):  # another key
        channel.Reader(channel.new_key()).parse(lines[0])


def test_the_bytecode_cache_never_hands_out_a_tampered_file(tmp_path):
    cache = bytecode.BytecodeCache()
    prefix = tmp_path / "prefix"
    (prefix / "x").mkdir(parents=True)
    (prefix / "x" / "m.cpython-311.pyc").write_bytes(b"trusted")
    (prefix / "x" / "n.cpython-311.pyc").write_bytes(b"late")
    digests = bytecode.tree_digests(prefix)
    (prefix / "x" / "n.cpython-311.pyc").write_bytes(b"changed after the digest was taken")
    assert cache.merge(prefix, digests) == 1  # only the file that still matches joins
    root = cache._root()
    (root / "x" / "m.cpython-311.pyc").write_bytes(b"tampered in the cache")
    fresh = cache.fresh_prefix()
    assert not (fresh / "x" / "m.cpython-311.pyc").exists()
    shutil.rmtree(fresh)


def _stamps(log: str, label_part: str, event: str) -> list[float]:
    return [float(line.rsplit(" ", 1)[1]) for line in log.splitlines()
            if label_part in line.split("]", 1)[0] and f"fixture-load-{event} " in line]


def test_the_second_baseline_has_loaded_before_any_candidate_code_runs():
    """A' loads beside A (the judge's start is shorter by its load), but the judge waits for it
    before the candidate's probe: no candidate code runs while a trusted process loads (a build
    helper or a settling scheduler profile of A' would be blamed on the candidate)."""
    report = verify(str(FIXTURES / "cpu_matmul_slow_second_baseline.py"), "arm:torch_mm", baseline="torch_mm",
                    shapes=["32x32x32"], options=fast_options())
    log = report.shape_reports[0].log_tail
    a2_end = _stamps(log, "(A')", "end")
    probe_start = _stamps(log, "(probe)", "start")
    assert len(a2_end) == 1 and len(probe_start) == 1, log
    assert a2_end[0] < probe_start[0], log
    assert report.shape_reports[0].stages["load"].status == "PASS", report.shape_reports[0].stages

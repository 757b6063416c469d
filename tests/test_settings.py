"""The SKILL_SERVER_* environment as one typed object: every variable parses, a bad value is a
one-line error naming the variable, and the readers use it."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from skill_server.settings import Settings, SettingsError, env_name, settings
from verifiers.launch import judge_launch
from verifiers.settings import VerifierSettings


def test_every_variable_reads_into_its_field(tmp_path):
    env = {env_name(f): "1" for f in ("sandbox", "require_sandbox", "warm_judge")} | {
        env_name("ledger"): "postgresql://x@h/db", env_name("state_dir"): str(tmp_path),
        env_name("profile_max_bytes"): "2000", env_name("user"): "ci", "UNRELATED": "x"}
    s = settings(env)
    assert s.require_sandbox and s.sandbox and s.warm_judge
    assert s.ledger == "postgresql://x@h/db" and s.state_dir == tmp_path and s.profile_max_bytes == 2000
    assert isinstance(s, VerifierSettings)  # the application's settings include the verifier's


@pytest.mark.parametrize("name,value", [("require_sandbox", "maybe"), ("profile_max_bytes", "-3"),
                                        ("warm_judge", "sometimes")])
def test_a_bad_value_names_the_variable_in_one_line(name, value):
    with pytest.raises(SettingsError) as err:
        settings({env_name(name): value})
    text = str(err.value)
    assert env_name(name) in text and value in text and "\n" not in text


def test_empty_counts_as_unset():
    assert settings({env_name("sandbox"): "", env_name("ledger"): "  "}) == Settings()


def test_the_readers_follow_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(env_name("warm_judge"), "off")
    assert judge_launch.warm_enabled() is False
    monkeypatch.setenv(env_name("warm_judge"), "1")
    assert judge_launch.warm_enabled() is True
    from skill_server.ledger.results import default_ledger_path
    monkeypatch.setenv(env_name("ledger"), str(tmp_path / "l.sqlite"))
    assert default_ledger_path(tmp_path) == (tmp_path / "l.sqlite").resolve()


def test_the_cli_reports_a_bad_variable_without_a_traceback(tmp_path):
    out = subprocess.run([sys.executable, "-m", "skill_server.cli.entry", "history", "flydsl_fp8_blockscale_gemm"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={"PATH": "/usr/bin:/bin", env_name("user"): "ci", env_name("profile_max_bytes"): "x",
                              "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert "Traceback" not in out.stderr
    assert out.returncode == 2 and "SKILL_SERVER_PROFILE_MAX_BYTES" in out.stderr

"""Toolchain discovery for the gfx950 compile: ROCm's own ld.lld first ($ROCM_PATH, then
/opt/rocm), then Debian's lld-22, else one line naming every place looked at.

The ROCm trees are fake ones in tmp whose ``llvm/bin/ld.lld`` is a wrapper that logs its
call and runs the real linker, so the end-to-end test can show FlyDSL really linked with it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from verifiers.gfx950 import env as genv
from verifiers.gfx950.compile import compile_target

REAL_LLD = next((p for p in (shutil.which("ld.lld-22"), *genv.LLD_CANDIDATES) if p and os.access(p, os.X_OK)), None)
needs_lld = pytest.mark.skipif(REAL_LLD is None, reason="no system ld.lld-22 (apt-get install -y lld-22)")


def test_ci_has_the_system_linker():
    """CI must not skip the linker tests: a missing lld-22 fails there (a skip elsewhere)."""
    if REAL_LLD is None:
        from tests.emulator_support import toolchain_missing

        toolchain_missing("no system ld.lld-22")


def fake_rocm(root: Path, log: Path | None = None) -> Path:
    """``root/llvm/bin/ld.lld``: a wrapper around the real linker (logging to ``log``)."""
    lld = root / "llvm" / "bin" / "ld.lld"
    lld.parent.mkdir(parents=True)
    record = f'echo "$@" >> {log}\n' if log else ""
    lld.write_text(f'#!/bin/sh\n{record}exec {REAL_LLD} "$@"\n')
    lld.chmod(0o755)
    return root


@pytest.fixture
def no_system_lld(monkeypatch):
    """A box whose only linker is the ROCm tree's: Debian's lld-22 hidden."""
    monkeypatch.setattr(genv.shutil, "which", lambda name: None)
    monkeypatch.setattr(genv, "LLD_CANDIDATES", ("/nonexistent/ld.lld-22",))


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    monkeypatch.delenv("SKILL_SERVER_LD_LLD", raising=False)
    monkeypatch.delenv("ROCM_PATH", raising=False)
    monkeypatch.setattr(genv, "ROCM_DEFAULT_ROOT", tmp_path / "no-opt-rocm")


@needs_lld
def test_rocm_path_linker_comes_first_and_is_used_as_rocm_path(monkeypatch, tmp_path):
    rocm = fake_rocm(tmp_path / "rocm-7.0")
    monkeypatch.setenv("ROCM_PATH", str(rocm))
    linker = genv.find_linker()  # Debian's lld-22 is installed here too: ROCm's still wins
    assert (linker.origin, linker.path, linker.rocm_path) == ("rocm", rocm / "llvm" / "bin" / "ld.lld", rocm)
    assert "LLD" in subprocess.run([str(linker.path), "--version"], capture_output=True, text=True).stdout
    env = genv.compile_only_env(cache_dir=tmp_path / "cache")
    assert env["ROCM_PATH"] == str(rocm)  # the ROCm tree itself, no generated link folder
    assert not (tmp_path / "cache" / "rocm").exists()


@needs_lld
def test_opt_rocm_is_found_without_rocm_path_and_the_capability_probe_sees_it(monkeypatch, tmp_path, no_system_lld):
    monkeypatch.setattr(genv, "ROCM_DEFAULT_ROOT", fake_rocm(tmp_path / "opt" / "rocm"))
    assert genv.find_linker().origin == "rocm"
    assert genv.toolchain_problem() is None  # gates run, gfx950_scaled_mfma is not read as missing


@needs_lld
def test_a_broken_rocm_path_falls_back_to_debian_lld(monkeypatch, tmp_path):
    (tmp_path / "rocm" / "llvm" / "bin").mkdir(parents=True)  # a partial install: no ld.lld
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "rocm"))
    linker = genv.find_linker()
    assert linker.origin == "system" and linker.rocm_path is None
    rocm_path = Path(genv.compile_only_env(cache_dir=tmp_path / "cache")["ROCM_PATH"])
    assert (rocm_path / "llvm" / "bin" / "ld.lld").resolve() == linker.path.resolve()


def test_no_linker_anywhere_names_each_place_and_the_fix(monkeypatch, tmp_path, no_system_lld):
    (tmp_path / "rocm").mkdir()
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "rocm"))
    problem = genv.toolchain_problem()
    assert problem is not None
    assert str(tmp_path / "rocm" / "llvm" / "bin" / "ld.lld") in problem and "broken ROCm install" in problem
    assert str(tmp_path / "no-opt-rocm" / "llvm" / "bin" / "ld.lld") in problem
    assert "apt-get install -y lld-22" in problem and "ROCM_PATH" in problem and "\n" not in problem


@needs_lld
def test_the_override_wins_and_a_bad_one_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("ROCM_PATH", str(fake_rocm(tmp_path / "rocm")))
    monkeypatch.setenv("SKILL_SERVER_LD_LLD", REAL_LLD)
    assert genv.find_linker().origin == "override"
    monkeypatch.setenv("SKILL_SERVER_LD_LLD", str(tmp_path / "nope"))
    with pytest.raises(genv.ToolchainMissing, match="SKILL_SERVER_LD_LLD"):
        genv.find_linker()


@needs_lld
@pytest.mark.flydsl
@pytest.mark.timeout(600)
def test_flydsl_links_with_the_rocm_trees_ld_lld(monkeypatch, tmp_path):
    log = tmp_path / "lld.log"
    monkeypatch.setenv("ROCM_PATH", str(fake_rocm(tmp_path / "rocm", log)))
    art = compile_target("flydsl_prefill_moe_stage2_fp8partial", "reduce_infp8_k4_n2880", use_cache=False,
                         cache_dir=tmp_path / "cache")
    assert art.status == "ok", art.reason
    assert log.is_file() and "-shared" in log.read_text()  # FlyDSL's link step ran through ROCm's ld.lld

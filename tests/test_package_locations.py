"""Where files are found and written, in a checkout (this test run) and for an installed
wheel (copies of the modules that decide it placed in a fake site-packages layout): the code
layout and the caches in verifiers/locations.py, the application's state in
skill_server/locations.py."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import skill_kernels
import skill_server
from skill_server import locations as app_locations
from skill_server.ledger.results import default_ledger_path
from verifiers import locations

REPO = Path(__file__).resolve().parents[1]


def test_a_checkout_uses_the_repository_folders():
    assert locations.INSTALLED is False
    assert locations.PROJECT_ROOT == locations.CODE_ROOT == REPO
    assert skill_server.DEFAULT_SKILLS_DIR == REPO / "skills"
    assert skill_kernels.__path__ == [str(REPO / "kernels")]


def test_checkout_state_and_cache_defaults_and_overrides(monkeypatch, tmp_path):
    for var in ("SKILL_SERVER_STATE_DIR", "SKILL_SERVER_CACHE", "SKILL_SERVER_LEDGER"):
        monkeypatch.delenv(var, raising=False)
    assert app_locations.state_dir() == REPO / "var"
    assert default_ledger_path(REPO) == REPO / "var" / "ledger.sqlite"
    own = tmp_path / "my_cards_project"
    assert default_ledger_path(own) == own.resolve() / "var" / "ledger.sqlite"  # a --skills-dir of one's own
    assert locations.cache_dir() == REPO / ".cache"
    monkeypatch.setenv("SKILL_SERVER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SKILL_SERVER_CACHE", str(tmp_path / "cache"))
    assert default_ledger_path(REPO) == tmp_path / "state" / "ledger.sqlite"
    assert locations.cache_dir() == tmp_path / "cache"
    monkeypatch.setenv("SKILL_SERVER_LEDGER", str(tmp_path / "x.sqlite"))
    assert default_ledger_path(REPO) == tmp_path / "x.sqlite"  # the narrower override wins


def test_repo_paths_round_trip():
    for rel in ("kernels/fp8_common/layouts.py", "verifiers/gfx950/env.py", "skill_kernels/__init__.py"):
        assert locations.repo_path(rel).is_file()
        assert locations.repo_relative(locations.repo_path(rel)) == rel
    assert locations.repo_relative("/") is None


def test_a_flydsl_kernels_package_wins_over_the_checkout_kernels_folder(tmp_path):
    # run from the repository root (on sys.path first): its kernels/ has no __init__.py, so a
    # FlyDSL checkout's regular `kernels` package still wins, and our kernels import by their own name
    assert not (REPO / "kernels" / "__init__.py").exists()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "__init__.py").write_text("WHO = 'flydsl'\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path)]))
    code = "import kernels, skill_kernels.fp8_common.layouts as l; print(kernels.WHO, l.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["flydsl", str(REPO / "kernels" / "fp8_common" / "layouts.py")], out.stderr


#: the modules that decide where files are, and the settings they read (the code they import)
DECIDING = ("verifiers/locations.py", "verifiers/settings.py", "skill_server/locations.py", "skill_server/settings.py")


def _fake_install(root: Path) -> Path:
    """site-packages with our three packages, laid out as the wheel lays them out."""
    site = root / "site-packages"
    for rel in DECIDING:
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).parent.joinpath("__init__.py").touch()
        shutil.copy(REPO / rel, site / rel)
    shutil.copytree(REPO / "skill_kernels", site / "skill_kernels", ignore=shutil.ignore_patterns("__pycache__"))
    (site / "skill_kernels" / "kernels" / "demo").mkdir(parents=True)
    (site / "skill_kernels" / "kernels" / "demo" / "__init__.py").write_text("WHERE = __file__\n")
    (site / "skill_kernels" / "skills" / "demo").mkdir(parents=True)
    return site


@pytest.mark.parametrize("xdg", [False, True])
def test_an_installed_layout_reads_embedded_cards_and_writes_to_user_folders(tmp_path, xdg):
    site = _fake_install(tmp_path)
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILL_SERVER_", "XDG_"))}
    env.update(PYTHONPATH=str(site), HOME=str(home))
    if xdg:
        env.update(XDG_STATE_HOME=str(tmp_path / "xs"), XDG_CACHE_HOME="relative/is/ignored")
    code = ("import json, sys, verifiers.locations as l, skill_server.locations as app, skill_kernels.demo as d;"
            "print(json.dumps([l.INSTALLED, str(l.PROJECT_ROOT), str(app.state_dir()), str(l.cache_dir()),"
            " d.WHERE, l.is_embedded(l.PROJECT_ROOT), str(app.state_dir('/elsewhere/proj')),"
            " sorted(m.__file__ for n, m in sys.modules.items()"
            "        if n.split('.')[0] in ('verifiers', 'skill_server', 'skill_kernels') and m.__file__)]))")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    installed, project, state, cache, where, embedded, elsewhere, loaded = json.loads(out.stdout)
    # every module of ours came from the fake install (none from this checkout's editable install)
    assert loaded and all(f.startswith(str(site)) for f in loaded), loaded
    assert installed and embedded and project == str(site / "skill_kernels")
    assert where == str(site / "skill_kernels" / "kernels" / "demo" / "__init__.py")
    assert state == (str(tmp_path / "xs" / "gpu-skill-server") if xdg
                     else str(home / ".local" / "state" / "gpu-skill-server"))
    assert cache == str(home / ".cache" / "gpu-skill-server")
    assert elsewhere == "/elsewhere/proj/var"  # a card folder of one's own keeps its var/

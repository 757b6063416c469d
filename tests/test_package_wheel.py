"""The installable package: a wheel built from this tree, installed into a fresh venv, works
on its own: the embedded cards lint and match, a CPU verification runs through
`skill-server verify` (and fails a wrong candidate), FlyDSL's own `kernels` package is not
shadowed, and state goes to the user's folders, never into site-packages.

The venv reuses this interpreter's site-packages for the dependencies (torch, mcp, ...) and
holds only our wheel; every command runs outside the repository with no PYTHONPATH, so
nothing can come from the checkout. About 45 s on the 2-core CI machine.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# what the build may read: never tests, benchmarks or local state
_JUNK = {".git", "tests", "bench", "build", "dist", "var", ".cache", "__pycache__", ".pytest_cache"}

pytestmark = pytest.mark.slow

CANDIDATE = '''
def build(inputs, outputs, factor={factor}):
    a, sa, b, sb, c = inputs["a"], inputs["a_scale"], inputs["b"], inputs["b_scale"], outputs["c"]

    def launch():
        af = a.float() * sa.repeat_interleave(128, dim=1)
        bf = b.float() * sb.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)
        c.copy_((factor * (af @ bf.T)).to(c.dtype))

    return launch
'''
QUICK = ["--baseline", "torch_dequant", "--shape", "128x256x512", "--no-timing", "--no-profile", "--seed", "0",
         "--no-secret-seed", "--options", '{"hidden_shapes": false}', "--quiet"]


def _source_files() -> list[Path]:
    """The files a commit would carry (tracked and not ignored), else a filtered walk."""
    try:
        out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True, timeout=60).stdout
        files = [Path(p) for p in out.decode().split("\0") if p]
    except (OSError, subprocess.SubprocessError):
        files = [p.relative_to(REPO) for p in REPO.rglob("*") if p.is_file()]
    return [f for f in files if not _JUNK & set(f.parts) and not f.name.endswith(".egg-info")
            and (REPO / f).is_file()]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """An sdist and a wheel built from a copy of the tree (what `pip install .` does)."""
    root = tmp_path_factory.mktemp("pkg")
    src = root / "src"
    for rel in _source_files():
        dest = src / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dest)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    dist = root / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(dist)], cwd=src, env=env, check=True, timeout=300)
    subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta as b; b.build_sdist(sys.argv[1])",
                    str(dist)], cwd=src, env=env, check=True, timeout=300, capture_output=True)
    return {"wheel": next(dist.glob("*.whl")), "sdist": next(dist.glob("*.tar.gz")), "root": root}


@pytest.fixture(scope="module")
def venv(built) -> dict:
    root = built["root"]
    home = root / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "SKILL_SERVER_LEDGER", "SKILL_SERVER_CACHE", "SKILL_SERVER_SKILLS_DIR",
                        "SKILL_SERVER_STATE_DIR", "XDG_STATE_HOME", "XDG_CACHE_HOME")}
    env["HOME"] = str(home)
    vdir = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(vdir)], check=True, timeout=300)
    py = vdir / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               env=env, cwd=home, capture_output=True, text=True, check=True).stdout.strip())
    # dependencies come from this interpreter's site-packages (the project's .venv), nothing is
    # downloaded. A plain path line, not --system-site-packages: a venv made from a venv gets the
    # *base* interpreter's site, and the .pth files there (this checkout's editable install) stay unread
    ours = sysconfig.get_paths()
    (site / "_deps_of_the_test_runner.pth").write_text("\n".join(dict.fromkeys([ours["purelib"], ours["platlib"]])) + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(built["wheel"])],
                   env=env, cwd=home, check=True, timeout=300)
    return {"py": py, "bin": vdir / "bin", "env": env, "home": home, "site": site}


def _run(v: dict, *cmd: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    exe = str(v["bin"] / cmd[0]) if cmd[0] in ("skill-server", "python") else cmd[0]
    return subprocess.run([exe, *cmd[1:]], env=env or v["env"], cwd=v["home"], capture_output=True, text=True,
                          timeout=timeout)


def _site_snapshot(site: Path) -> set[str]:
    return {str(p.relative_to(site)) for p in site.rglob("*") if "__pycache__" not in p.parts}


def test_wheel_embeds_every_card_and_kernel_file_under_skill_kernels(built):
    names = set(zipfile.ZipFile(built["wheel"]).namelist())
    tops = {n.split("/")[0] for n in names}
    assert tops == {"skill_server", "verifiers", "trace_readers", "skill_kernels",
                    "gpu_skill_server-0.1.0.dist-info"}, tops
    assert "kernels" not in tops and "skills" not in tops  # never a top-level `kernels` package
    shipped = [f for f in _source_files() if f.parts[0] in ("kernels", "skills")]
    assert len(shipped) > 10
    missing = [str(f) for f in shipped if f"skill_kernels/{f.as_posix()}" not in names]
    assert not missing, f"files of kernels/ or skills/ missing from the wheel: {missing}"
    assert "skill_server/data/vocabulary.yaml" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    # an sdist (what an index serves) carries the same folders, so a wheel built from it is whole
    with tarfile.open(built["sdist"]) as tar:
        in_sdist = {"/".join(n.split("/")[1:]) for n in tar.getnames()}
    assert not [str(f) for f in shipped if f.as_posix() not in in_sdist]


def test_installed_package_runs_from_the_venv_and_keeps_state_in_user_folders(venv):
    probe = ("import json, skill_server, skill_kernels, verifiers.locations as l, skill_server.locations as app;"
             "import skill_kernels.flydsl_fp8_blockscale_gemm.problem as p;"
             "print(json.dumps({'server': skill_server.__file__, 'problem': p.__file__, 'installed': l.INSTALLED,"
             "'skills': str(skill_server.DEFAULT_SKILLS_DIR), 'state': str(app.state_dir()), 'cache': str(l.cache_dir())}))")
    got = json.loads(_run(venv, "python", "-c", probe).stdout)
    site, home = str(venv["site"]), str(venv["home"])
    assert got["installed"] is True
    assert got["server"].startswith(site) and got["problem"].startswith(site), got
    assert got["skills"] == f"{site}/skill_kernels/skills"
    assert got["state"] == f"{home}/.local/state/gpu-skill-server"
    assert got["cache"] == f"{home}/.cache/gpu-skill-server"


def test_installed_judge_manifest_and_sandbox_list_the_problem_files(venv):
    """The judge's integrity manifest and the arms' sandbox code list both come from
    ``problem_sources``: in the wheel they must name the embedded problem's files."""
    probe = ("import json; from verifiers.launch import files;"
             "print(json.dumps([str(p) for p in files.problem_sources('flydsl_fp8_blockscale_gemm')]))")
    out = _run(venv, "python", "-c", probe)
    listed = json.loads(out.stdout or "[]")
    folder = f"{venv['site']}/skill_kernels/kernels/flydsl_fp8_blockscale_gemm"
    assert f"{folder}/problem.py" in listed, out.stdout + out.stderr
    assert f"{folder}/triton_twin.py" in listed and all(p.startswith(folder) for p in listed)


def test_installed_cli_lints_lists_and_matches_the_embedded_cards(venv):
    before = _site_snapshot(venv["site"])
    lint = _run(venv, "skill-server", "lint")
    assert lint.returncode == 0 and "0 error(s)" in lint.stdout, lint.stdout + lint.stderr
    listed = json.loads(_run(venv, "skill-server", "list", "--json").stdout)
    cards = {p.name for p in (REPO / "skills").iterdir() if (p / "SKILL.md").is_file()}
    assert {c["id"] for c in listed["skills"]} == cards
    match = _run(venv, "skill-server", "match", "--op", "gemm_a8w8_blockscale_bpreshuffle", "--gen", "MI355X",
                 "--scale-format", "fp32_block", "--shape", "16384x7168x768")
    assert match.returncode == 0 and "MATCH flydsl_fp8_blockscale_gemm" in match.stdout, match.stdout + match.stderr
    history = json.loads(_run(venv, "skill-server", "history", "flydsl_fp8_blockscale_gemm", "--json").stdout)
    assert history["ledger"] == f"{venv['home']}/.local/state/gpu-skill-server/ledger.sqlite"
    export = _run(venv, "skill-server", "export", "flydsl_fp8_blockscale_gemm")  # would write beside the card
    assert export.returncode != 0 and "read-only" in export.stderr and "Traceback" not in export.stderr
    assert _site_snapshot(venv["site"]) == before, "a command wrote into site-packages"
    assert (venv["home"] / ".cache" / "gpu-skill-server" / "catalog").is_dir()


def test_installed_verify_passes_a_right_candidate_and_fails_a_wrong_one(venv):
    for name, factor in (("right.py", 1.0), ("wrong.py", 1.02)):
        (venv["home"] / name).write_text(CANDIDATE.format(factor=factor))
    ok = _run(venv, "skill-server", "verify", "flydsl_fp8_blockscale_gemm", "--candidate", "right.py:build",
              "--json", *QUICK)
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    report = json.loads(ok.stdout)
    assert report["stages"]["parity"]["status"] == "PASS"
    bad = _run(venv, "skill-server", "verify", "flydsl_fp8_blockscale_gemm", "--candidate", "wrong.py:build", *QUICK)
    assert bad.returncode == 1 and "FAIL" in bad.stdout, bad.stdout[-2000:] + bad.stderr[-2000:]


def test_a_flydsl_kernels_package_on_the_path_is_not_shadowed(venv, tmp_path):
    flydsl_checkout = tmp_path / "FlyDSL"
    (flydsl_checkout / "kernels").mkdir(parents=True)
    (flydsl_checkout / "kernels" / "__init__.py").write_text("WHO = 'flydsl'\n")
    env = dict(venv["env"], PYTHONPATH=str(flydsl_checkout))
    probe = ("import kernels, skill_kernels.flydsl_fp8_blockscale_gemm.problem as p;"
             "print(kernels.WHO, p.PROBLEM.card_id)")
    out = _run(venv, "python", "-c", probe, env=env)
    assert out.stdout.split() == ["flydsl", "flydsl_fp8_blockscale_gemm"], out.stdout + out.stderr

"""One provenance model: the platform a report names and the one this box is come from the
same function; the git revision recorded is the project's own, also when it is vendored."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from verifiers.provenance import Provenance, platform_of, read_git_revision, git_state


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True,
                         env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                              "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin:/usr/local/bin"})
    return out.stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def outer(tmp_path):
    """A repository that vendors the project at vendor/gpu-skill-server."""
    repo = tmp_path / "outer"
    project = repo / "vendor" / "gpu-skill-server"
    project.mkdir(parents=True)
    git(repo, "init", "-q")
    (project / "pyproject.toml").write_text("[project]\nname='x'\n")
    (repo / "app.py").write_text("print(1)\n")
    return repo, project


def test_a_vendored_project_records_its_own_last_commit_not_the_enclosing_head(outer):
    repo, project = outer
    vendored_at = commit_all(repo, "vendor the project")
    (repo / "app.py").write_text("print(2)\n")
    head = commit_all(repo, "unrelated change in the enclosing repository")
    found = read_git_revision(project)
    assert found.scope == "vendored" and found.revision == vendored_at != head
    assert "vendored at vendor/gpu-skill-server" in found.note and found.dirty is False
    (repo / "app.py").write_text("print(3)\n")  # dirt outside the project is not the project's
    assert read_git_revision(project).dirty is False
    (project / "pyproject.toml").write_text("[project]\nname='y'\n")
    assert read_git_revision(project).dirty is True and read_git_revision(project).text == f"{vendored_at}-dirty"
    with pytest.warns(UserWarning, match="vendored"):
        assert git_state(project) == (vendored_at, True)


def test_a_project_that_is_its_own_repository_records_head(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "f").write_text("x")
    head = commit_all(tmp_path, "one")
    found = read_git_revision(tmp_path)
    assert (found.scope, found.revision, found.dirty) == ("project", head, False)


def test_a_project_an_enclosing_repository_does_not_track_has_no_revision(outer):
    repo, project = outer
    (repo / ".gitignore").write_text("vendor/\n")
    git(repo, "add", ".gitignore", "app.py")
    git(repo, "commit", "-qm", "ignores the vendored copy")
    found = read_git_revision(project)
    assert found.revision is None and found.scope == "none" and "does not track it" in found.note


def test_no_git_at_all(tmp_path):
    found = read_git_revision(tmp_path)
    assert found.revision is None and found.scope == "none"


@pytest.mark.parametrize(("runtime", "props", "machine", "key"), [
    ("rocm", {"gcnArchName": "gfx950:sramecc+:xnack-"}, None, "rocm/gfx950"),
    ("cuda", {"capability": "9.0"}, None, "cuda/sm_90"),
    ("cpu", {"threads": 1}, "aarch64", "cpu/aarch64"),
    ("rocm", {}, None, "rocm/amd-instinct-mi355x"),
])
def test_a_reports_platform_and_this_boxs_platform_come_from_one_function(runtime, props, machine, key):
    prov = Provenance(device_name="AMD Instinct MI355X" if runtime != "cpu" else "AMD EPYC", platform=runtime,
                      device_properties=props, machine=machine or "x86_64", torch_version="2.13.0",
                      hip_runtime="7.0" if runtime == "rocm" else None)
    info = prov.platform_info()
    assert info == platform_of(runtime, prov.device_name, props, info.libraries, machine=prov.machine)
    assert info.key == key and info.libraries["torch"] == "2.13.0"
    assert Provenance(platform="").platform_info() is None


def test_a_malformed_git_revision_is_not_recorded():
    assert Provenance(git_revision="HEAD; rm -rf /", git_dirty=True).git_text() is None
    assert Provenance(git_revision="41a379d7", git_dirty=True).git_text() == "41a379d7-dirty"

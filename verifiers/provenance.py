"""Where and with what a verification ran: one model and one detector for the whole project.

- ``Provenance``: what a verification report carries (device, runtime, versions, git
  revision, host, time, harness digest). Its fields are the report's wire format.
- ``PlatformInfo``: the platform as the results ledger groups it (runtime, device,
  generation, libraries). It is always *derived*, never typed in twice:
  ``Provenance.platform_info()`` for a report, ``detect_platform()`` for this box; both go
  through ``platform_of``, the one place that turns device properties into a generation.
- ``GitRevision`` / ``read_git_revision``: the one git reader. It records the project's own
  revision: when the project is vendored inside another repository, the enclosing
  repository's HEAD says nothing about the project's files, so the reader takes the last
  commit of that repository that touched the project folder (and dirtiness of that folder
  only), and says so.

``verifiers`` never imports ``skill_server``: generation aliases (MI355X -> gfx950) are
resolved by the ledger against its vocabulary, not here.
"""
from __future__ import annotations

import datetime as _dt
import functools
import glob
import importlib.metadata
import importlib.util
import os
import platform as _platform
import re
import socket
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from verifiers import locations

REPO_ROOT = locations.CODE_ROOT
LIBRARIES = ("torch", "triton", "flydsl", "numpy", "pydantic", "mcp", "gpu-skill-server")
Runtime = Literal["cuda", "rocm", "cpu"]
EMULATED_PLATFORM = "gfx950-emulated"  # verifiers.problem.EMULATED_PLATFORM (no import: provenance stays light)
_HEX_REV = re.compile(r"[0-9a-f]{7,40}")


# =========================================================================== platform
class PlatformInfo(BaseModel):
    """The platform a result was measured on, as the ledger keys it."""

    model_config = ConfigDict(extra="forbid", str_max_length=200)

    device: str = Field(min_length=1, max_length=200, description="device name, e.g. 'AMD Instinct MI355X'")
    generation: str | None = Field(None, max_length=40, description="gfx950, sm_90, ... (CPU: the machine arch)")
    runtime: Runtime
    libraries: dict[str, str] = Field(default_factory=dict, description="package -> version")

    @model_validator(mode="after")
    def _bounded(self) -> "PlatformInfo":
        if len(self.libraries) > 64:
            raise ValueError(f"libraries: at most 64 entries, got {len(self.libraries)}")
        for name, version in self.libraries.items():
            if not (0 < len(name) <= 100 and 0 < len(version) <= 100):
                raise ValueError(f"libraries: names and versions are 1-100 characters ({name!r}: {version!r})")
        return self

    @property
    def key(self) -> str:
        """What statuses are grouped by: ``rocm/gfx950``, ``cuda/sm_90``, ``cpu/x86_64``."""
        tail = self.generation or re.sub(r"[^a-z0-9]+", "-", self.device.lower()).strip("-")[:40]
        return f"{self.runtime}/{tail}"


def platform_of(runtime: str, device_name: str, properties: dict[str, Any] | None,
                libraries: dict[str, str] | None = None, machine: str | None = None) -> PlatformInfo:
    """The one place device facts become a platform: ROCm -> the gfx arch of
    ``gcnArchName``; CUDA -> ``sm_<major><minor>`` of ``capability``; CPU -> the machine arch."""
    props = properties or {}
    gen: str | None = None
    if runtime == "rocm":
        gen = str(props.get("gcnArchName", "")).split(":")[0] or None
    elif runtime == "cuda" and props.get("capability"):
        gen = "sm_" + str(props["capability"]).replace(".", "")
    elif runtime == "cpu":
        gen = machine or None
    if gen is not None and not re.fullmatch(r"[A-Za-z0-9_.\-]{1,40}", gen):
        gen = None
    return PlatformInfo(device=(device_name or runtime)[:200], generation=gen, runtime=runtime,  # type: ignore[arg-type]
                        libraries=dict(libraries or {}))


def emulated_platform(device_name: str = "", libraries: dict[str, str] | None = None) -> PlatformInfo:
    """The ``gfx950-emulated`` platform as the ledger keys it: runtime ``cpu`` (what really
    ran), generation ``gfx950-emulated`` (key ``cpu/gfx950-emulated``): never ``rocm/gfx950``,
    so an emulated result is never grouped, matched or compared as an MI355X one."""
    return PlatformInfo(device=(device_name or "gfx950 emulator on CPU")[:200], generation=EMULATED_PLATFORM,
                        runtime="cpu", libraries=dict(libraries or {}))


def installed_libraries(names: tuple[str, ...] = LIBRARIES) -> dict[str, str]:
    out = {}
    for name in names:
        version = package_version(name)
        if version:
            out[name] = version
    return out


def detect_platform() -> PlatformInfo:
    """This box: runtime, device, generation, library versions. torch is imported (to ask
    for the GPU) only when GPU device files exist, so a CPU box answers in milliseconds."""
    libs = installed_libraries()
    runtime, device, props = "cpu", f"cpu ({_platform.machine() or 'unknown'})", {}
    if _gpu_device_nodes() and importlib.util.find_spec("torch") is not None:
        import torch

        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            device, props = p.name, {"capability": f"{p.major}.{p.minor}"}
            if getattr(torch.version, "hip", None):
                runtime, props["gcnArchName"] = "rocm", str(getattr(p, "gcnArchName", ""))
                libs["rocm"] = str(torch.version.hip)
            else:
                runtime = "cuda"
                libs["cuda"] = str(torch.version.cuda)
    return platform_of(runtime, device, props, libs, machine=_platform.machine() or None)


def _gpu_device_nodes() -> list[str]:
    """Device files a CUDA or ROCm GPU brings (/dev/nvidia0, /dev/kfd, WSL's /dev/dxg)."""
    return glob.glob("/dev/nvidia[0-9]*") + [p for p in ("/dev/kfd", "/dev/dxg") if os.path.exists(p)]


# ======================================================================== provenance
class Provenance(BaseModel):
    device_name: str = ""
    platform: str = ""  # cuda | rocm | cpu | gfx950-emulated
    device_properties: dict[str, Any] = Field(default_factory=dict)
    machine: str = Field(default_factory=lambda: _platform.machine() or "", description="host CPU architecture")
    torch_version: str | None = None
    triton_version: str | None = None
    flydsl_version: str | None = None
    cuda_runtime: str | None = None
    hip_runtime: str | None = None
    python_version: str = ""
    git_revision: str | None = None
    git_dirty: bool | None = None
    hostname: str = ""
    time_utc: str = ""
    harness_digest: str | None = None
    sandbox: str | None = Field(None, description="what confined the arms: 'landlock ABI 7: fs, net, scope' "
                                                  "or 'unavailable: <why>' (verifiers.arms.sandbox)")

    def platform_info(self) -> PlatformInfo | None:
        """The platform this report ran on, or None when the report names none."""
        if self.platform not in ("cuda", "rocm", "cpu", EMULATED_PLATFORM):
            return None
        libs = {name: str(value) for name, value in (
            ("torch", self.torch_version), ("triton", self.triton_version), ("flydsl", self.flydsl_version),
            ("cuda", self.cuda_runtime), ("rocm", self.hip_runtime)) if value}
        if self.platform == EMULATED_PLATFORM:
            return emulated_platform(self.device_name, libs)
        return platform_of(self.platform, self.device_name, self.device_properties, libs, machine=self.machine or None)

    def git_text(self) -> str | None:
        """``<hex>`` or ``<hex>-dirty``; None when the revision is unknown or malformed."""
        rev = self.git_revision
        if not rev or not _HEX_REV.fullmatch(str(rev)):
            return None
        return f"{rev}-dirty" if self.git_dirty else str(rev)


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def runtime_versions() -> dict[str, Any]:
    """Versions visible in this process (call in the worker, where torch is imported)."""
    out: dict[str, Any] = {
        "torch_version": package_version("torch"),
        "triton_version": package_version("triton"),
        "flydsl_version": package_version("flydsl"),
        "python_version": sys.version.split()[0],
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch_version"] = torch.__version__
        out["cuda_runtime"] = getattr(torch.version, "cuda", None)
        out["hip_runtime"] = getattr(torch.version, "hip", None)
    return out


def host_and_time() -> dict[str, str]:
    return {
        "hostname": socket.gethostname() or _platform.node(),
        "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


# =============================================================================== git
class GitRevision(BaseModel):
    """The project's own revision."""

    revision: str | None = Field(None, description="commit (40 hex); None: unknown")
    dirty: bool | None = Field(None, description="tracked files of the project changed since that commit")
    scope: Literal["project", "vendored", "none"] = Field(
        "none", description="project: the project is its repository's root; vendored: it is a folder inside "
        "another repository (revision = that repository's last commit touching the folder); none: no git")
    note: str | None = None

    @property
    def text(self) -> str | None:
        if not self.revision:
            return None
        return f"{self.revision}-dirty" if self.dirty else self.revision


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def read_git_revision(root: Path = REPO_ROOT) -> GitRevision:
    """The revision of the project at ``root`` (see the module docstring for vendoring)."""
    root = Path(root).resolve()
    if locations.INSTALLED and (root == REPO_ROOT or locations.is_embedded(root)):
        # an installed wheel has no repository of its own (site-packages may sit inside another one)
        return GitRevision(scope="none", note="an installed package: no repository of its own")
    top_text = _git(["rev-parse", "--show-toplevel"], root)
    if not top_text:
        return GitRevision(scope="none", note=f"{root} is not inside a git repository")
    top = Path(top_text).resolve()
    if top == root:
        rev = _git(["rev-parse", "HEAD"], root)
        status = _git(["status", "--porcelain", "--untracked-files=no"], root)
        return GitRevision(revision=rev if rev and _HEX_REV.fullmatch(rev) else None,
                           dirty=None if status is None else bool(status), scope="project")
    rel = root.relative_to(top).as_posix() if root.is_relative_to(top) else str(root)
    rev = _git(["log", "-1", "--format=%H", "--", rel], top)
    if not rev or not _HEX_REV.fullmatch(rev):
        return GitRevision(scope="none", note=f"the project lies at {rel} inside the repository {top}, "
                                              "which does not track it: its revision is unknown")
    status = _git(["status", "--porcelain", "--untracked-files=no", "--", rel], top)
    return GitRevision(revision=rev, dirty=None if status is None else bool(status), scope="vendored",
                       note=f"the project is vendored at {rel} inside the repository {top}: the revision is that "
                            "repository's last commit touching the folder, not its HEAD")


@functools.lru_cache(maxsize=8)
def _warn_vendored_once(note: str) -> None:
    warnings.warn(note, stacklevel=3)


def git_state(root: Path = REPO_ROOT) -> tuple[str | None, bool | None]:
    """(revision, dirty) of the project holding the harness (see ``read_git_revision``)."""
    found = read_git_revision(root)
    if found.scope == "vendored" and found.note:
        _warn_vendored_once(found.note)
    return found.revision, found.dirty

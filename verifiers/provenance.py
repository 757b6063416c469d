"""Where and with what a verification ran: device, platform, versions, repository, host, time."""
from __future__ import annotations

import datetime as _dt
import importlib.metadata
import platform as _platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from verifiers import locations

REPO_ROOT = Path(__file__).resolve().parent.parent


class Provenance(BaseModel):
    device_name: str = ""
    platform: str = ""  # cuda | rocm | cpu
    device_properties: dict[str, Any] = Field(default_factory=dict)
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


def git_state(root: Path = REPO_ROOT) -> tuple[str | None, bool | None]:
    """(HEAD revision, working tree dirty?) of the repository holding the harness."""
    if locations.INSTALLED and root == REPO_ROOT:  # an installed wheel has no repository (site-packages may sit in another one)
        return None, None
    try:
        rev = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        revision = rev.stdout.strip() if rev.returncode == 0 else None
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10,
        )
        dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
        return revision, dirty
    except (OSError, subprocess.SubprocessError):
        return None, None


def host_and_time() -> dict[str, str]:
    return {
        "hostname": socket.gethostname() or _platform.node(),
        "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }

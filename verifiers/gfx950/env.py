"""The compile-only environment for FlyDSL on a machine with no AMD GPU.

FlyDSL 0.5.0 needs, to compile for gfx950 without ROCm:
- ``ARCH=gfx950`` and ``FLYDSL_GPU_ARCH=gfx950`` (without ``rocm_agent_enumerator`` the
  arch silently defaults to gfx942 otherwise);
- ``COMPILE_ONLY=1`` (else calling a jit function loads libamdhip64 and aborts);
- ``ROCM_PATH`` pointing at a folder with ``llvm/bin/ld.lld`` (it links the code object
  with ``$ROCM_PATH/llvm/bin/ld.lld``): on a ROCm box that is the ROCm tree itself
  (``$ROCM_PATH``, else ``/opt/rocm``); elsewhere we build such a folder in the cache dir
  holding a symlink to Debian's ``ld.lld-22`` (:func:`find_linker` says which and why).

Nothing here mutates ``os.environ`` except ``compile_only_environment()``, which callers
use explicitly (the compile subprocess does). A process that runs kernels on a real ROCm
box is never touched unless it asks for compile-only mode.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from verifiers import locations
from verifiers.settings import verifier_settings

ARCH = "gfx950"
#: where a ROCm install lives when ``$ROCM_PATH`` is not set
ROCM_DEFAULT_ROOT = Path("/opt/rocm")
#: the linker inside a ROCm tree, the path FlyDSL itself links with
ROCM_LLD = Path("llvm") / "bin" / "ld.lld"
LLD_CANDIDATES = (
    "/usr/lib/llvm-22/bin/ld.lld",
    "/usr/bin/ld.lld-22",
)
LLD_NAMES = ("ld.lld-22",)
LLD_OVERRIDE_ENV = "SKILL_SERVER_LD_LLD"
#: the folder holding ``verifiers/`` (the repository root in a checkout)
REPO_ROOT = locations.CODE_ROOT


class ToolchainMissing(RuntimeError):
    """A compile prerequisite (flydsl, ld.lld for gfx950) is absent; the message says how to fix it."""


@dataclass(frozen=True)
class Linker:
    """The ld.lld a gfx950 compile links with, and where it came from.

    origin: ``override`` ($SKILL_SERVER_LD_LLD), ``rocm`` (``<ROCm>/llvm/bin/ld.lld``; then
      ``rocm_path`` is that ROCm tree and serves as ROCM_PATH as it is), ``system``
      (Debian's lld-22).
    """

    path: Path
    origin: Literal["override", "rocm", "system"]
    rocm_path: Path | None = None


def cache_root() -> Path:
    """``$SKILL_SERVER_CACHE/gfx950`` when set, else the project's cache folder (``<repo>/.cache/gfx950``
    in a checkout, the user's cache folder for an installed package)."""
    return locations.cache_dir() / "gfx950"


def _executable(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def rocm_roots() -> list[Path]:
    """The ROCm trees to look in, in order: ``$ROCM_PATH`` when set, then ``/opt/rocm``."""
    roots = [Path(os.environ["ROCM_PATH"]).expanduser()] if os.environ.get("ROCM_PATH") else []
    roots.append(ROCM_DEFAULT_ROOT)
    return list(dict.fromkeys(roots))


def find_linker() -> Linker:
    """Locate an ld.lld that knows gfx950 (LLVM >= 20 upstream, or a ROCm tree's own).

    Order: ``$SKILL_SERVER_LD_LLD``; ROCm's ``$ROCM_PATH/llvm/bin/ld.lld`` then
    ``/opt/rocm/llvm/bin/ld.lld`` (what FlyDSL links with on a ROCm box); Debian's
    ``ld.lld-22`` on PATH and its known paths. Raises ToolchainMissing naming every place
    looked at and how to fix it.
    """
    override = str(verifier_settings().ld_lld or "") or None
    if override:
        p = Path(override).expanduser()
        if _executable(p):
            return Linker(p, "override")
        raise ToolchainMissing(f"{LLD_OVERRIDE_ENV}={override!r} is not an executable file")
    looked: list[str] = []
    for root in rocm_roots():
        lld = root / ROCM_LLD
        if _executable(lld):
            return Linker(lld, "rocm", rocm_path=root)
        if root.is_dir():
            looked.append(f"{lld} (the ROCm tree {root} has no executable ld.lld: a partial or broken ROCm install?)")
        else:
            looked.append(str(lld))
    for name in LLD_NAMES:
        found = shutil.which(name)
        if found:
            return Linker(Path(found), "system")
    looked.append(f"{', '.join(LLD_NAMES)} on PATH")
    for cand in LLD_CANDIDATES:
        if _executable(Path(cand)):
            return Linker(Path(cand), "system")
        looked.append(cand)
    raise ToolchainMissing(
        f"no ld.lld for gfx950 found (looked at {'; '.join(looked)}); on a ROCm box set ROCM_PATH to the "
        "ROCm install, elsewhere install it with `apt-get install -y lld-22`, "
        f"or point {LLD_OVERRIDE_ENV} at an ld.lld from LLVM >= 20"
    )


def find_ld_lld() -> Path:
    """The path of :func:`find_linker`'s ld.lld."""
    return find_linker().path


def fake_rocm_path(cache_dir: Path | None = None, lld: Path | None = None) -> Path:
    """Create (idempotently) ``<cache>/rocm/llvm/bin/ld.lld -> <lld>`` (default: the found
    linker) and return ``<cache>/rocm`` for use as ROCM_PATH where there is no ROCm tree."""
    lld = lld or find_ld_lld()
    root = (cache_dir or cache_root()) / "rocm"
    link = root / ROCM_LLD
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        if link.resolve() == lld.resolve():
            return root
        link.unlink()
    tmp = link.with_name(f"ld.lld.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(lld)
    os.replace(tmp, link)  # atomic: parallel test workers may race here
    return root


def rocm_path_for_compile(cache_dir: Path | None = None) -> Path:
    """ROCM_PATH for a compile-only process: the ROCm tree itself when its ld.lld is the one
    found, else a generated folder linking to the found ld.lld."""
    linker = find_linker()
    if linker.origin == "rocm" and linker.rocm_path is not None:
        return linker.rocm_path
    return fake_rocm_path(cache_dir, linker.path)


def flydsl_version() -> str:
    """Installed flydsl version, or raise ToolchainMissing (without importing flydsl)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("flydsl")
    except PackageNotFoundError:
        raise ToolchainMissing(
            "flydsl is not installed; install the pinned version with `pip install flydsl==0.5.0`"
        ) from None


def toolchain_problem() -> str | None:
    """None when flydsl and ld.lld are present, else the reason (for a SKIPPED report)."""
    try:
        flydsl_version()
        find_ld_lld()
    except ToolchainMissing as exc:
        return str(exc)
    return None


def compile_only_env(dump_dir: Path | None = None, cache_dir: Path | None = None) -> dict[str, str]:
    """The variables to add for a gfx950 compile-only FlyDSL process.

    dump_dir: when given, FlyDSL writes every pipeline stage there (FLYDSL_DUMP_IR); this
      also turns FlyDSL's own disk cache off, which is what we want (our cache is keyed by
      source hash).
    """
    env = {
        "ARCH": ARCH,
        "FLYDSL_GPU_ARCH": ARCH,
        "COMPILE_ONLY": "1",
        "ROCM_PATH": str(rocm_path_for_compile(cache_dir)),
    }
    if dump_dir is not None:
        env["FLYDSL_DUMP_IR"] = "1"
        env["FLYDSL_DUMP_DIR"] = str(dump_dir)
    return env


class compile_only_environment:  # noqa: N801 - used as a context manager
    """Set ``compile_only_env(...)`` in ``os.environ`` for the block, then restore it.

    Only the compile subprocess (or a test that asked for compile-only mode) uses this.
    """

    def __init__(self, dump_dir: Path | None = None, cache_dir: Path | None = None) -> None:
        self._env = compile_only_env(dump_dir, cache_dir)
        self._saved: dict[str, str | None] = {}

    def __enter__(self) -> dict[str, str]:
        for k, v in self._env.items():
            self._saved[k] = os.environ.get(k)
            os.environ[k] = v
        return dict(self._env)

    def __exit__(self, *exc: object) -> None:
        for k, old in self._saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old

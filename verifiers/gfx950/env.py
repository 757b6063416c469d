"""The compile-only environment for FlyDSL on a machine with no AMD GPU.

FlyDSL 0.5.0 needs, to compile for gfx950 without ROCm:
- ``ARCH=gfx950`` and ``FLYDSL_GPU_ARCH=gfx950`` (without ``rocm_agent_enumerator`` the
  arch silently defaults to gfx942 otherwise);
- ``COMPILE_ONLY=1`` (else calling a jit function loads libamdhip64 and aborts);
- ``ROCM_PATH`` pointing at a folder with ``llvm/bin/ld.lld`` (it links the code object
  with ``$ROCM_PATH/llvm/bin/ld.lld``): we build such a folder in the cache dir holding a
  symlink to the system ``ld.lld-22``.

Nothing here mutates ``os.environ`` except ``compile_only_environment()``, which callers
use explicitly (the compile subprocess does). A process that runs kernels on a real ROCm
box is never touched unless it asks for compile-only mode.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

ARCH = "gfx950"
LLD_CANDIDATES = (
    "/usr/lib/llvm-22/bin/ld.lld",
    "/usr/bin/ld.lld-22",
)
LLD_NAMES = ("ld.lld-22",)
REPO_ROOT = Path(__file__).resolve().parents[2]


class ToolchainMissing(RuntimeError):
    """A compile prerequisite (flydsl, ld.lld for gfx950) is absent; the message says how to fix it."""


def cache_root() -> Path:
    """``$SKILL_SERVER_CACHE/gfx950`` when set, else ``<repo>/.cache/gfx950`` (git-ignored)."""
    base = os.environ.get("SKILL_SERVER_CACHE")
    return (Path(base).expanduser() / "gfx950") if base else REPO_ROOT / ".cache" / "gfx950"


def find_ld_lld() -> Path:
    """Locate an ld.lld that knows gfx950 (LLVM >= 20; we pin lld-22).

    Order: ``$SKILL_SERVER_LD_LLD``, ``ld.lld-22`` on PATH, the known Debian paths.
    Raises ToolchainMissing with the install command when none is found.
    """
    override = os.environ.get("SKILL_SERVER_LD_LLD")
    if override:
        p = Path(override)
        if p.is_file() and os.access(p, os.X_OK):
            return p
        raise ToolchainMissing(f"SKILL_SERVER_LD_LLD={override!r} is not an executable file")
    for name in LLD_NAMES:
        found = shutil.which(name)
        if found:
            return Path(found)
    for cand in LLD_CANDIDATES:
        p = Path(cand)
        if p.is_file() and os.access(p, os.X_OK):
            return p
    raise ToolchainMissing(
        "no ld.lld for gfx950 found (looked for ld.lld-22 on PATH and "
        f"{', '.join(LLD_CANDIDATES)}); install it with `apt-get install -y lld-22` "
        "or point SKILL_SERVER_LD_LLD at an ld.lld from LLVM >= 20"
    )


def fake_rocm_path(cache_dir: Path | None = None) -> Path:
    """Create (idempotently) ``<cache>/rocm/llvm/bin/ld.lld -> <system ld.lld-22>`` and
    return ``<cache>/rocm`` for use as ROCM_PATH."""
    lld = find_ld_lld()
    root = (cache_dir or cache_root()) / "rocm"
    link = root / "llvm" / "bin" / "ld.lld"
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
        "ROCM_PATH": str(fake_rocm_path(cache_dir)),
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

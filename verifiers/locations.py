"""Where this installation's code is (the embedded cards and kernels), and the verifier's caches.

One answer for two layouts (``verifiers/``, ``skill_server/`` and ``skill_kernels/`` are
always siblings, so the folder above this package tells them apart):

checkout (a git clone, also ``pip install -e .``)
    the repository root holds ``skills/`` and ``kernels/``; caches go to
    ``<repo>/.cache/`` (git-ignored).
installed (``pip install .``, a built wheel)
    the package folder ``skill_kernels/`` holds ``skills/`` and ``kernels/`` (the
    wheel embeds the repository's two folders there, same layout, read-only); caches go
    to ``$XDG_CACHE_HOME/gpu-skill-server`` (``~/.cache/...``). Nothing is written into
    site-packages.

``kernels/`` is never an importable top-level package in either layout (FlyDSL users put
a checkout with its own ``kernels`` package on ``sys.path``): code imports the card kernels
as ``skill_kernels.<card>``, whose ``__path__`` is :data:`KERNELS_DIR`.

The cache folder (:func:`cache_dir`, ``SKILL_SERVER_CACHE`` through ``verifiers.settings``) is
decided here because its files are the verifier's own (gfx950 compiles, decoded code objects,
trusted bytecode, the baseline compile cache); the application keeps its catalog cache there
too. The application's *state* (ledger, signing key, drafts) is not decided here:
``skill_server.locations`` decides it, and the application tells the arm sandbox to keep arms
out of it (``verifiers.arms.sandbox.protect``).
"""
from __future__ import annotations

import os
from pathlib import Path
from verifiers.settings import verifier_settings

APP_NAME = "gpu-skill-server"
CACHE_ENV = "SKILL_SERVER_CACHE"

#: the folder holding the ``verifiers``, ``skill_server`` and ``skill_kernels`` packages
CODE_ROOT = Path(__file__).resolve().parent.parent
_EMBEDDED_ROOT = CODE_ROOT / "skill_kernels"
#: True when running from an installed wheel, False in a checkout
INSTALLED = (_EMBEDDED_ROOT / "kernels").is_dir() and (_EMBEDDED_ROOT / "skills").is_dir()
#: the folder holding the ``skills/`` and ``kernels/`` that ship with this code
PROJECT_ROOT = _EMBEDDED_ROOT if INSTALLED else CODE_ROOT
KERNELS_DIR = PROJECT_ROOT / "kernels"
SKILLS_DIR = PROJECT_ROOT / "skills"


def user_folder(var: str, fallback: str) -> Path:
    """This application's folder in the user's XDG base folder ``$var`` (else ``~/<fallback>``)."""
    base = os.environ.get(var)
    # the XDG spec: a relative path is invalid and must be ignored
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / fallback
    return root / APP_NAME


def is_embedded(project_root: Path | str) -> bool:
    """True when ``project_root`` is the read-only project inside an installed package."""
    return INSTALLED and Path(project_root).resolve() == PROJECT_ROOT


def cache_dir() -> Path:
    """``$SKILL_SERVER_CACHE``; else ``<repo>/.cache`` in a checkout, the user's cache folder when installed."""
    chosen = verifier_settings().cache
    if chosen:
        return Path(chosen).expanduser()
    return user_folder("XDG_CACHE_HOME", ".cache") if INSTALLED else CODE_ROOT / ".cache"


def repo_path(rel: str) -> Path:
    """A repository-relative path (``kernels/...``, ``skills/...``, ``verifiers/...``) in this layout."""
    parts = Path(rel).parts
    return (PROJECT_ROOT if parts and parts[0] in ("kernels", "skills") else CODE_ROOT) / rel


def repo_relative(path: Path | str) -> str | None:
    """The inverse of :func:`repo_path`: the repository-relative name of ``path``, or None outside."""
    p = Path(path).resolve()
    if p.is_relative_to(PROJECT_ROOT):
        rel = p.relative_to(PROJECT_ROOT)
        if rel.parts and rel.parts[0] in ("kernels", "skills"):
            return rel.as_posix()
    if p.is_relative_to(CODE_ROOT):
        return p.relative_to(CODE_ROOT).as_posix()
    return None


CHECKOUT_PACKAGES = ("verifiers", "skill_kernels", "kernels", "skill_server", "trace_readers")


def child_pythonpath(existing: str | None, links_in: Path | None = None) -> str:
    """PYTHONPATH for a subprocess that must import this code: a checkout goes first; an
    installed package is already on the interpreter's path (and site-packages must not be
    put ahead of the standard library).

    ``links_in``: a folder of the caller's (created if needed) that gets one symlink per
    package of the checkout and goes on the path instead of the checkout itself. A confined
    arm may read the packages but not list the checkout's root (its state folder may lie
    there), and Python finds nothing in a path entry it cannot list."""
    parts: list[str] = []
    if not INSTALLED:
        if links_in is None:
            parts = [str(CODE_ROOT)]
        else:
            links_in.mkdir(parents=True, exist_ok=True)
            for name in CHECKOUT_PACKAGES:
                target, link = CODE_ROOT / name, links_in / name
                if target.is_dir() and not link.exists():
                    link.symlink_to(target, target_is_directory=True)
            parts = [str(links_in)]
    return os.pathsep.join(parts + ([existing] if existing else []))


def embedded_write_problem(path: Path | str) -> str | None:
    """Why ``path`` must not be written (it lies in an installed package's embedded cards), else None."""
    if not INSTALLED or not Path(path).resolve().is_relative_to(PROJECT_ROOT):
        return None
    return (f"{path} lies inside the installed package ({PROJECT_ROOT}), whose cards are read-only: "
            "copy the card folder out (skills/<id>/) and pass --skills-dir, or give an output path outside it")

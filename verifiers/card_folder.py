"""The card-folder convention, owned here and nowhere else.

A card's executable side is one folder, ``kernels/<folder>/`` (``<folder>`` is the card's
``verifier.problem``), imported as the package ``skill_kernels.<folder>`` in every layout
(a checkout, an installed wheel: :data:`verifiers.locations.KERNELS_DIR`). Its modules, by
name (kernels/README.md says what each must define):

=====================  ===========  ===========================================================
module                 required     defines
=====================  ===========  ===========================================================
``problem.py``         yes          ``PROBLEM``: the verifier's problem (arms, oracle, parity)
``arms.py``            yes          the arm specs ``PROBLEM`` lists
``gfx950_targets.py``  no           ``TARGETS``: FlyDSL kernels compiled and gated for gfx950
``probes.py``          no           ``PROBES``: capability probes for the card's prerequisites
``doctor_checks.py``   no           ``CHECKS``: what the box needs for the card's own arms
=====================  ===========  ===========================================================

A folder of another project (a draft's, ``--skills-dir``'s) follows the same convention; only
its import name differs (the caller imports it from its path).
"""
from __future__ import annotations

from pathlib import Path

from verifiers.locations import KERNELS_DIR

PACKAGE = "skill_kernels"
PROBLEM = "problem"
ARMS = "arms"
TARGETS = "gfx950_targets"
PROBES = "probes"
DOCTOR_CHECKS = "doctor_checks"


def folder_path(folder: str, kernels_dir: Path | None = None) -> Path:
    """``kernels/<folder>/`` of this installation (or under ``kernels_dir``)."""
    return (kernels_dir if kernels_dir is not None else KERNELS_DIR) / folder


def module_file(folder: str, module: str, kernels_dir: Path | None = None) -> Path:
    return folder_path(folder, kernels_dir) / f"{module}.py"


def module_name(folder: str, module: str | None = None) -> str:
    """The import name of a card folder (``skill_kernels.<folder>``) or of one of its modules."""
    return f"{PACKAGE}.{folder}" + (f".{module}" if module else "")


def card_folders(kernels_dir: Path | None = None) -> list[str]:
    """The card folders of this installation: every folder holding a ``problem.py``."""
    root = kernels_dir if kernels_dir is not None else KERNELS_DIR
    return sorted(p.parent.name for p in root.glob(f"*/{PROBLEM}.py"))


def sources(folder: str, kernels_dir: Path | None = None) -> list[Path]:
    """Every Python file of the card folder (what the verifier hashes and lets arms read)."""
    path = folder_path(folder, kernels_dir)
    return sorted(path.rglob("*.py")) if path.is_dir() else []


def project_folder(project_root: Path | str, folder: str) -> Path:
    """``<project>/kernels/<folder>``: a card folder of the project at ``project_root``
    (a checkout, a draft's project, a ``--skills-dir`` of one's own)."""
    return Path(project_root) / "kernels" / folder


def is_installed(path: Path) -> bool:
    """Whether ``path`` is a folder of this installation's ``kernels/`` (importable as
    ``skill_kernels.<folder>``) rather than another project's."""
    return path.resolve().parent == KERNELS_DIR.resolve()

"""Prerequisites: installed package versions, and capabilities through the cards' probes.

A capability probe is card code: ``kernels/<card's problem folder>/probes.py`` exposes
``PROBES``, a mapping from capability name (as the card's ``prerequisites`` spell it) to a
function ``probe(ctx) -> dict`` (``met``, ``detail``, optional ``found`` and ``evidence``;
helpers in ``kernels/probe_common``). The server finds probes by this convention, so a new
card with a capability prerequisite needs no server change. A capability with no probe
cannot be confirmed and counts as missing; a probe that raises is reported, never fatal.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skill_server.cards.schema import Card, Prerequisite
from skill_server.reverify.models import PrerequisiteCheck
from verifiers import card_folder

PROBES_FILE = "probes.py"


class ProbeContext(BaseModel):
    """What a probe may look at."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    project_root: Path
    card_id: str
    capability: str = ""
    gate_reports: list[Any] = Field(default_factory=list, description="verifiers.gfx950.gates.TargetGates of this run")
    verifier_reports: list[Any] = Field(default_factory=list, description="verifiers.report.VerificationReport of "
                                        "this run: the box's own verification and the gfx950-emulated one")


class ProbeResult(BaseModel):
    model_config = ConfigDict(extra="ignore")

    met: bool | None
    detail: str
    found: str | None = None
    evidence: list[str] = Field(default_factory=list)


Probe = Callable[[ProbeContext], Any]


def kernel_folder(card: Card) -> str:
    return card.verifier.problem if card.verifier else card.id


def probes_path(project_root: Path, card: Card) -> Path:
    return card_folder.project_folder(project_root, kernel_folder(card)) / PROBES_FILE


class ProbeLoadError(RuntimeError):
    pass


def card_probes(project_root: Path, card: Card, kernels_dir: Path | None = None) -> dict[str, Probe]:
    """The card's ``PROBES`` (empty when its folder has no probes.py). Raises
    ProbeLoadError naming the file when it exists but does not load. ``kernels_dir``:
    the folder instead of ``kernels/<folder>`` (a draft's)."""
    path = kernels_dir / PROBES_FILE if kernels_dir is not None else probes_path(project_root, card)
    if not path.is_file():
        return {}
    folder = kernel_folder(card)
    try:
        if kernels_dir is None and card_folder.is_installed(path.parent):
            module = importlib.import_module(card_folder.module_name(folder, card_folder.PROBES))
        else:  # another project's folder: loaded by path, again whenever the file changes
            st = path.stat()
            key = hashlib.sha256(f"{path.resolve()}:{st.st_mtime_ns}:{st.st_size}".encode()).hexdigest()[:12]
            module = _load_file(path, f"_skill_probes_{folder}_{key}")
        probes = getattr(module, "PROBES", None)
    except Exception as exc:  # noqa: BLE001 - card code; reported with its file
        raise ProbeLoadError(f"{path}: cannot load ({type(exc).__name__}: {exc})") from None
    if not isinstance(probes, dict) or not all(isinstance(k, str) and callable(v) for k, v in probes.items()):
        raise ProbeLoadError(f"{path}: PROBES must be a dict of capability name -> function(ctx)")
    return dict(probes)


def _load_file(path: Path, name: str) -> Any:
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


# ------------------------------------------------------------------------ versions
def version_satisfies(version: str, spec: str) -> bool | None:
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - packaging ships with pip almost everywhere
        return _simple_satisfies(version, spec)
    try:
        return Version(version) in SpecifierSet(spec, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return None


def _simple_satisfies(version: str, spec: str) -> bool | None:
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", v)[:4])

    ops = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, "==": lambda a, b: a == b,
           ">": lambda a, b: a > b, "<": lambda a, b: a < b, "!=": lambda a, b: a != b}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        m = re.fullmatch(r"(>=|<=|==|!=|>|<)\s*([\w.]+)", part)
        if not m:
            return None
        if not ops[m.group(1)](key(version), key(m.group(2))):
            return False
    return True


def fallback_paths(text: str | None, project_root: Path) -> tuple[list[str], bool | None]:
    if not text:
        return [], None
    paths = re.findall(r"(?:kernels|verifiers|skill_kernels)/[\w./-]*", text)
    if not paths:
        return [], None
    return paths, all((project_root / p.rstrip("/.")).exists() for p in paths)


# ------------------------------------------------------------------------ checks
def check_prerequisite(prereq: Prerequisite, ctx: ProbeContext, probes: dict[str, Probe],
                       probes_file: str = "kernels/<card>/probes.py") -> PrerequisiteCheck:
    _, fallback_present = fallback_paths(prereq.fallback, ctx.project_root)
    base = dict(kind=prereq.kind, name=prereq.name, required=prereq.version, fallback=prereq.fallback,
                fallback_present=fallback_present)
    if prereq.kind == "package":
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version(prereq.name)
        except PackageNotFoundError:
            return PrerequisiteCheck(met=False, detail=f"package {prereq.name} is not installed", **base)
        if not prereq.version:
            return PrerequisiteCheck(met=True, found=found, detail=f"{prereq.name} {found} installed", **base)
        ok = version_satisfies(found, prereq.version)
        if ok is None:
            return PrerequisiteCheck(met=None, found=found, detail=f"cannot compare {found} with {prereq.version!r}", **base)
        return PrerequisiteCheck(met=ok, found=found, **base,
                                 detail=f"{prereq.name} {found} {'satisfies' if ok else 'does not satisfy'} {prereq.version}")
    probe = probes.get(prereq.name)
    if probe is None:
        return PrerequisiteCheck(met=None, **base, detail=f"no probe for capability {prereq.name!r} in {probes_file} "
                                 "(PROBES): it cannot be checked, so it is not confirmed")
    try:
        raw = probe(ctx.model_copy(update={"capability": prereq.name}))
        res = ProbeResult.model_validate(raw if isinstance(raw, dict) else raw, from_attributes=not isinstance(raw, dict))
    except ValidationError as exc:
        return PrerequisiteCheck(met=None, **base, detail=f"probe {prereq.name} answered something unreadable: "
                                 + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
    except Exception as exc:  # noqa: BLE001 - a probe bug must not abort the run
        return PrerequisiteCheck(met=None, **base, detail=f"probe {prereq.name} raised {type(exc).__name__}: {exc}")
    detail = res.detail
    if not res.met and prereq.fallback:
        have = {True: "present", False: "MISSING", None: "not a project path"}[fallback_present]
        detail += f"; fallback: {prereq.fallback} ({have})"
    return PrerequisiteCheck(met=res.met, found=res.found, detail=detail, evidence=res.evidence[:10], **base)

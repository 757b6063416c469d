"""Helpers shared by the cards' capability probes (``kernels/<card>/probes.py``).

Import as ``skill_kernels.probe_common``. A probe is a function ``probe(ctx) -> dict``
registered in its card folder's ``PROBES`` mapping under the capability name the card's
``prerequisites`` use; ``skill-server reverify`` finds it there by convention. ``ctx``
has ``project_root`` (Path), ``card_id``, ``capability`` and ``gate_reports`` (the static
gfx950 gate reports of this run, possibly empty). The dict says ``met`` (True, False, or
None when it could not be checked), ``detail``, and optionally ``found`` and ``evidence``.
"""
from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def flydsl_sources() -> tuple[str | None, tuple[Path, ...]]:
    """The installed flydsl's version and Python files (from its distribution record)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("flydsl")
    except PackageNotFoundError:
        return None, ()
    files = tuple(Path(dist.locate_file(f)) for f in (dist.files or ()) if str(f).endswith(".py"))
    return dist.version, files


def flydsl_checkout_kernels(project_root: Path) -> list[Path]:
    """A FlyDSL source checkout's ``kernels`` package on the import path (the cards advise
    people to put one there); the project's own ``kernels/`` folder is not one."""
    try:
        spec = importlib.util.find_spec("kernels")
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    own = (Path(project_root) / "kernels").resolve()
    return [Path(p) for p in (spec.submodule_search_locations or []) if Path(p).resolve() != own]


def search_flydsl(project_root: Path, path_regex: str | None, text_regex: str | None,
                  extra_roots: Iterable[Path] = ()) -> tuple[str | None, int, list[str]]:
    """Search the installed flydsl (and any FlyDSL ``kernels`` checkout on the path) for
    files whose path matches ``path_regex`` or whose text matches ``text_regex``.
    Returns (flydsl version, files searched, hits as 'path: why')."""
    version, files = flydsl_sources()
    candidates = list(files)
    for root in [*flydsl_checkout_kernels(project_root), *extra_roots]:
        candidates += sorted(Path(root).rglob("*.py"))
    prx = re.compile(path_regex, re.IGNORECASE) if path_regex else None
    trx = re.compile(text_regex, re.IGNORECASE) if text_regex else None
    hits: list[str] = []
    for path in candidates:
        if prx and prx.search(path.as_posix()):
            hits.append(f"{path}: file name")
            continue
        if trx:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")[:2_000_000]
            except OSError:
                continue
            m = trx.search(text)
            if m:
                hits.append(f"{path}: {m.group(0)!r}")
    return version, len(candidates), hits


def result(met: bool | None, detail: str, found: str | None = None, evidence: list[str] | None = None) -> dict:
    """A probe's answer in the form the server reads."""
    return {"met": met, "detail": detail, "found": found, "evidence": list(evidence or [])[:10]}

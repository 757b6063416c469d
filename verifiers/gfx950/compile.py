"""Compile one CompileTarget for gfx950 (compile-only) and collect ISA, IR and resources.

``compile_target(folder, name)`` runs the compile in a fresh subprocess
(``python -m verifiers.gfx950.compile <folder> <name> <out_dir>``) so the compile-only
environment and FlyDSL's global state never leak into the caller and a crash in the
compiler cannot take it down. Results are cached on disk under
``cache_root()/artifacts/<folder>/<target>-<key>/`` where the key hashes:
the target name and config, the content of the folder's ``*.py`` files, of
``kernels/fp8_common/*.py``, of the target's extra ``sources``, of this package's
compile-relevant code, the flydsl version and the arch.

Cache layout per entry: ``artifacts.json`` (CompileArtifacts without the big texts) and
per kernel ``<kernel>.s`` (final ISA) and ``<kernel>.ll`` (LLVM IR).
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from verifiers.gfx950.isa import KernelArtifacts


class CompileArtifacts(BaseModel):
    """The outcome of compiling one target.

    status: 'ok' (kernels filled), 'skipped' (toolchain missing: reason says what to
      install), 'error' (the compile failed: reason holds the tail of its output).
    """

    folder: str
    target: str
    status: Literal["ok", "skipped", "error"]
    reason: str | None = None
    kernels: list[KernelArtifacts] = []
    compile_seconds: float | None = None  # wall time of the compile subprocess (0 on a hit)
    cache_hit: bool = False
    cache_key: str | None = None
    flydsl_version: str | None = None
    artifacts_dir: str | None = None


def compile_target(
    folder: str,
    target: str,
    *,
    use_cache: bool = True,
    cache_dir: Path | None = None,
    timeout_s: float = 600.0,
) -> CompileArtifacts:
    """Compile ``target`` of ``kernels/<folder>/gfx950_targets.py`` for gfx950.

    Never raises for a missing toolchain or a failing compile: returns status 'skipped' /
    'error' with the reason. Raises KeyError for an unknown target name.
    """
    raise NotImplementedError

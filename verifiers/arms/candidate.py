"""Load the candidate builder from ``path/to/file.py:func``, ``package.module:func`` or ``arm:NAME``."""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from verifiers.contract import Builder, CandidateError
from verifiers.gfx950.emulator.verifier_arms import verifier_builder
from verifiers.problem import Problem


@dataclass(frozen=True)
class CandidateSpec:
    # "emulated": an ``arm:NAME`` on the gfx950-emulated platform (the judge sets it, never a user)
    kind: Literal["file", "module", "arm", "emulated"]
    target: str  # file path, module name or arm name
    function: str | None

    @property
    def label(self) -> str:
        if self.kind == "arm":
            return f"arm:{self.target}"
        return f"{self.target}:{self.function}"


def parse_candidate(spec: str) -> CandidateSpec:
    """Validate the syntax only (no import); raise ValueError with what was expected."""
    spec = spec.strip()
    if spec.startswith("arm:"):
        name = spec[4:].strip()
        if not name:
            raise ValueError("candidate 'arm:' needs an arm name, e.g. arm:torch_mm")
        return CandidateSpec("arm", name, None)
    target, sep, func = spec.rpartition(":")
    if not sep or not target or not func:
        raise ValueError(
            f"candidate {spec!r}: expected FILE.py:FUNCTION (e.g. my_gemm.py:build), "
            "package.module:FUNCTION, or arm:NAME"
        )
    if not func.isidentifier():
        raise ValueError(f"candidate {spec!r}: {func!r} is not a Python function name")
    if target.endswith(".py") or "/" in target or "\\" in target:
        return CandidateSpec("file", target, func)
    return CandidateSpec("module", target, func)


def load_candidate(spec: CandidateSpec, problem: Problem | None) -> Builder:
    """Import the builder (this runs its module's code: only ever inside an arm process)."""
    if spec.kind == "emulated":
        if problem is None:
            raise CandidateError(f"arm:{spec.target} (emulated) needs its problem")

        try:
            return verifier_builder(problem, spec.target)
        except (KeyError, LookupError) as exc:
            raise CandidateError(str(exc).strip("'\"")) from None
    if spec.kind == "arm":
        if problem is None:
            raise CandidateError(f"arm:{spec.target} needs its problem")
        try:
            return problem.resolve_builder(problem.arm(spec.target).build)
        except KeyError as exc:
            raise CandidateError(str(exc)) from None
    try:
        if spec.kind == "file":
            module = _import_file(Path(spec.target))
        else:
            module = importlib.import_module(spec.target)
    except CandidateError:
        raise
    except BaseException as exc:  # SystemExit / KeyboardInterrupt from a candidate too
        raise CandidateError(f"importing candidate {spec.target!r} raised {type(exc).__name__}: {exc}") from exc
    func = getattr(module, spec.function or "", None)
    if func is None:
        raise CandidateError(f"candidate module {spec.target!r} has no function {spec.function!r}")
    if not callable(func):
        raise CandidateError(f"candidate {spec.label!r} is not callable")
    return func


def _import_file(path: Path):
    path = path.expanduser().resolve()
    if not path.is_file():
        raise CandidateError(f"candidate file {path} does not exist")
    name = f"_verifier_candidate_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:10]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CandidateError(f"cannot import candidate file {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # sibling imports of the candidate resolve, after everything already on the path
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    spec.loader.exec_module(module)
    return module

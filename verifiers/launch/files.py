"""What the verifier reads from disk, hashed before and after every run.

- ``trusted_sources``: the harness (``verifiers/``), the project's kernel package entry
  (``skill_kernels``), the problem's folder, plus every source file the judge and the
  baseline arms had loaded before the candidate was started (torch, triton, ... included).
  A change between the start and the end of a run fails it.
- ``pycache_snapshot`` / ``audit_pycache``: the bytecode in the project's own
  ``__pycache__`` folders. The judge and the arms never read it (each runs with a fresh
  bytecode prefix), but the next ordinary ``import verifiers`` would. A file that appears
  or changes during a run and is not exactly the compilation of its source is a planted
  ``.pyc``: the run fails and the file is deleted, so it cannot act in a later process.
  The comparison (unmarshal + compile) runs in a throw-away interpreter, so a malformed
  file cannot harm the caller.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from verifiers import card_folder, locations

REPO_ROOT = locations.CODE_ROOT
PROJECT_PACKAGES = ("verifiers", "skill_server", "skill_kernels", "kernels")


def digest_file(path: Path) -> str | None:
    try:
        with path.open("rb") as fh:
            return hashlib.blake2b(fh.read(), digest_size=20).hexdigest()
    except OSError:
        return None


def digest_files(paths: Iterable[Path | str]) -> dict[str, str | None]:
    """Path -> digest (None: unreadable or missing). Four reader threads: a manifest holds
    1-2 thousand files (torch's own sources among them), hashed before and after every run,
    and reads and hashing run outside the interpreter lock (0.16 -> 0.09 s on a 2-core box)."""
    names = sorted({str(p) for p in paths})
    if len(names) < 64:
        return {name: digest_file(Path(name)) for name in names}
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="digest") as pool:
        return dict(zip(names, pool.map(lambda name: digest_file(Path(name)), names)))


def combined_digest(digests: dict[str, str | None]) -> str:
    h = hashlib.sha256()
    for path, value in sorted(digests.items()):
        h.update(f"{path}\0{value}\0".encode())
    return h.hexdigest()


def changed(before: dict[str, str | None], after: dict[str, str | None]) -> list[str]:
    out = []
    for path, value in before.items():
        now = after.get(path)
        if now != value:
            out.append(f"{path} {'was deleted' if now is None else 'was created' if value is None else 'changed'}")
    return out


def harness_sources() -> list[Path]:
    files = sorted((REPO_ROOT / "verifiers").rglob("*.py"))
    return files + [REPO_ROOT / "skill_kernels" / "__init__.py"]


def problem_sources(problem: str) -> list[Path]:
    """The problem's own files: its folder under ``KERNELS_DIR`` (the checkout's ``kernels/``, or
    ``skill_kernels/kernels/`` inside an installed wheel), or the folder of a problem file."""
    path = Path(problem)
    if problem.endswith(".py") or "/" in problem:
        folder = path.expanduser().resolve().parent
        return sorted(folder.glob("*.py"))
    return card_folder.sources(problem)


def pycache_snapshot(root: Path = REPO_ROOT) -> dict[str, str | None]:
    files: list[Path] = []
    for package in PROJECT_PACKAGES:
        base = root / package
        if base.is_dir():
            files += [p for p in base.rglob("__pycache__/*") if p.is_file()]
    return digest_files(files)


_CHECK = r"""
import importlib.util, json, marshal, sys
from pathlib import Path
out = {}
for name in json.loads(sys.stdin.read()):
    pyc = Path(name)
    try:
        stem, tag, *rest = pyc.name.split(".")
        if tag != sys.implementation.cache_tag or rest[-1] != "pyc":
            out[name] = "written by another interpreter"; continue
        opt = int(rest[0][4:] or 0) if rest[0].startswith("opt-") else 0
        src = pyc.parent.parent / (stem + ".py")
        data = pyc.read_bytes()
        if data[:4] != importlib.util.MAGIC_NUMBER:
            out[name] = "not a pyc of this interpreter"; continue
        code = marshal.loads(data[16:])
        fresh = compile(src.read_bytes(), str(src), "exec", dont_inherit=True, optimize=opt)
        out[name] = "ok" if code == fresh else "is not the compilation of " + str(src)
    except Exception as exc:
        out[name] = "unreadable: " + type(exc).__name__
print(json.dumps(out))
"""


def audit_pycache(before: dict[str, str | None], after: dict[str, str | None]) -> list[str]:
    """Files new or changed since ``before`` that are not their source's compilation:
    each is deleted and named in the result (empty: nothing was planted)."""
    suspects = [p for p, v in after.items() if v is not None and before.get(p) != v]
    if not suspects:
        return []
    verdicts: dict[str, str] = {}
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", _CHECK], input=json.dumps(suspects),
                              capture_output=True, text=True, timeout=60)
        verdicts = json.loads(proc.stdout or "{}")
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    planted = []
    for path in suspects:
        verdict = verdicts.get(path, "could not be checked")
        if verdict != "ok":
            planted.append(f"{path}: {verdict}")
            try:
                os.unlink(path)
            except OSError:
                pass
    return planted

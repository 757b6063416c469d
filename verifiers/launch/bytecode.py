"""Fresh bytecode prefixes for the judge and the arms, without recompiling torch every run.

Every verifier process runs with ``-X pycache_prefix=<dir>`` where ``<dir>`` is new for
that process: no ``.pyc`` from the source tree or from site-packages is ever read, so a
bytecode file planted by an earlier candidate has nothing to act on. Compiling torch from
source costs seconds, so the calling process (the CLI, the server, a test session) keeps
the bytecode that trusted processes compiled, in a private directory, together with a
digest of every file **held in this process's memory**. Each new prefix is a copy of that
directory in which every file is checked against its in-memory digest; a file that does
not match (anyone can write the directory) is left out and gets compiled again.

Files join the cache only from prefixes written before any candidate process existed
(the judge's own, the baseline arms'): the judge hashes them at that point and sends the
digests; at the end of the run only files that still match join.

**Across processes** (each CLI run is a new process) the cache also lives on disk, in
``<cache>/bytecode/<interpreter>/`` with its manifest of digests, but only where arms run
under Landlock: the verifier's cache folder is one of the secret paths no arm may read or
write (``verifiers.arms.sandbox``), so the manifest on disk is as trustworthy as the ledger
and its signing key beside it. Where arms run unconfined (no Landlock, or the operator turned
it off) the disk copy is neither read nor written: an unconfined candidate could rewrite both
a bytecode file and its digest, so the cache stays in this process's memory only.
"""
from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

from verifiers import locations
from verifiers.arms import sandbox
from verifiers.settings import verifier_settings

#: a bound on the disk cache: past it no file joins (torch, triton and flydsl hold ~3,000)
MAX_PERSISTED_FILES = 40_000
MANIFEST = "manifest.json"


def scratch_root() -> str | None:
    """Where the verifier's short-lived folders go: a RAM file system when there is one
    (thousands of small bytecode files; directory operations on a VM's disk are slow)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _digest(path: Path) -> str | None:
    try:
        return hashlib.blake2b(path.read_bytes(), digest_size=20).hexdigest()
    except OSError:
        return None


def tree_digests(root: Path) -> dict[str, str]:
    """relative path -> digest of every file under ``root``."""
    out = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            value = _digest(path)
            if value is not None:
                out[str(path.relative_to(root))] = value
    return out


def interpreter_tag() -> str:
    """One folder per interpreter: bytecode is specific to the Python version and build."""
    ident = f"{sys.version}|{os.path.realpath(sys.executable)}|{sys.implementation.cache_tag}"
    return f"{sys.implementation.cache_tag}-{hashlib.blake2b(ident.encode(), digest_size=6).hexdigest()}"


def _read_manifest(folder: Path) -> dict[str, str]:
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str) and _safe_rel(k)}


def _safe_rel(rel: str) -> bool:
    parts = Path(rel).parts
    return bool(parts) and ".." not in parts and not Path(rel).is_absolute() and parts[0] != MANIFEST


@contextmanager
def _locked(folder: Path):
    """Serialise writers of one disk cache (several CLI runs or servers at once)."""
    with open(folder / ".lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class BytecodeCache:
    """Trusted bytecode: in this process's memory, and on disk where that is safe.

    ``persist``: the disk folder (``None``: memory only), or a callable deciding it at first
    use (the default cache asks whether arms run confined, which imports nothing heavy)."""

    def __init__(self, persist: "Path | None | object" = None) -> None:
        self._dir: Path | None = None
        self._manifest: dict[str, str] = {}
        self._lock = threading.Lock()
        self._persist_spec = persist
        self._persist: Path | None = None
        self._resolved = False

    def _disk(self) -> Path | None:
        if not self._resolved:
            spec = self._persist_spec() if callable(self._persist_spec) else self._persist_spec
            self._persist = Path(spec) if spec else None
            self._resolved = True
            if self._persist is not None:
                try:
                    self._persist.mkdir(parents=True, exist_ok=True, mode=0o700)
                except OSError:
                    self._persist = None
        return self._persist

    def _root(self) -> Path:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="verifier-bytecode-", dir=scratch_root()))
            atexit.register(shutil.rmtree, self._dir, True)
        return self._dir

    def _sources(self) -> list[tuple[Path, dict[str, str]]]:
        """(folder, manifest) pairs to copy from: memory first, then the disk cache."""
        with self._lock:
            out = [(self._root(), dict(self._manifest))]
        disk = self._disk()
        if disk is not None:
            persisted = _read_manifest(disk)
            out.append((disk, {k: v for k, v in persisted.items() if k not in out[0][1]}))
        return out

    def fresh_prefix(self, private: bool = False) -> Path:
        """A new directory holding every cached file that still matches its digest.

        ``private``: for a process whose bytecode joins the cache as it is (the warm judge
        template, which runs no job): the directory goes beside the disk cache, where no arm
        may write (a GPU arm may write ``/dev/shm``), when there is a disk cache."""
        disk = self._disk() if private else None
        parent = disk.parent / f"{disk.name}.work" if disk is not None else None
        if parent is not None:
            parent.mkdir(exist_ok=True, mode=0o700)
            _remove_orphans(parent)
        target = Path(tempfile.mkdtemp(prefix=f"verifier-pycache-{os.getpid()}-",
                                       dir=str(parent) if parent else scratch_root()))
        for root, manifest in self._sources():
            _copy_checked(root, manifest, target)
        return target

    def merge(self, prefix: Path, digests: dict[str, str]) -> int:
        """Add the files of ``prefix`` whose content still has the digest taken before any
        candidate ran; returns how many joined (in memory, and on disk where enabled)."""
        added: dict[str, str] = {}
        with self._lock:
            root = self._root()
            for rel, value in digests.items():
                if rel in self._manifest or not _safe_rel(rel):
                    continue
                if _install(prefix / rel, root / rel, value):
                    self._manifest[rel] = value
                    added[rel] = value
        self._persist_files(prefix, digests)
        return len(added)

    def _persist_files(self, prefix: Path, digests: dict[str, str]) -> None:
        disk = self._disk()
        if disk is None:
            return
        try:
            with _locked(disk):
                persisted = _read_manifest(disk)
                fresh = {rel: v for rel, v in digests.items()
                         if persisted.get(rel) != v and _safe_rel(rel)}
                if not fresh:
                    return
                room = MAX_PERSISTED_FILES - len(persisted)
                for rel, value in list(fresh.items())[:max(room, 0)]:
                    if _install(prefix / rel, disk / rel, value):
                        persisted[rel] = value
                tmp = disk / f"{MANIFEST}.{os.getpid()}.tmp"
                tmp.write_text(json.dumps(persisted, sort_keys=True))
                os.replace(tmp, disk / MANIFEST)
        except OSError:
            return  # a full or read-only disk: the memory cache still holds the files


def _remove_orphans(parent: Path) -> None:
    """Private prefixes of processes that are gone (killed before they could clean up)."""
    for entry in parent.glob("verifier-pycache-*-*"):
        try:
            pid = int(entry.name.split("-")[2])
            os.kill(pid, 0)
        except (ValueError, IndexError):
            continue
        except ProcessLookupError:
            shutil.rmtree(entry, ignore_errors=True)
        except PermissionError:
            continue


def _install(src: Path, dst: Path, value: str) -> bool:
    """Copy ``src`` to ``dst`` atomically when its content has digest ``value``."""
    if src.is_symlink() or _digest(src) != value:
        return False
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(dst.name + f".{os.getpid()}.tmp")
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except OSError:
        return False
    return _digest(dst) == value


def _copy_checked(root: Path, manifest: dict[str, str], target: Path) -> None:
    for rel, value in manifest.items():
        dst = target / rel
        if dst.exists():
            continue
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / rel, dst)
        except OSError:
            continue
        if _digest(dst) != value:  # checked after copying: the copy is what will be read
            dst.unlink(missing_ok=True)


def persisted_folder() -> Path | None:
    """Where this interpreter's bytecode may persist across processes: only while arms run
    under Landlock (which keeps them out of the cache folder) and the operator allows it."""
    if not verifier_settings().persist_bytecode or not sandbox.support().active:
        return None
    return locations.cache_dir() / "bytecode" / interpreter_tag()


CACHE = BytecodeCache(persist=persisted_folder)


def remove(prefix: Path) -> None:
    shutil.rmtree(prefix, ignore_errors=True)

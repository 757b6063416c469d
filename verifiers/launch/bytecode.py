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
"""
from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
import threading
from pathlib import Path


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


class BytecodeCache:
    def __init__(self) -> None:
        self._dir: Path | None = None
        self._manifest: dict[str, str] = {}
        self._lock = threading.Lock()

    def _root(self) -> Path:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="verifier-bytecode-", dir=scratch_root()))
            atexit.register(shutil.rmtree, self._dir, True)
        return self._dir

    def fresh_prefix(self) -> Path:
        """A new directory holding every cached file that still matches its digest."""
        target = Path(tempfile.mkdtemp(prefix="verifier-pycache-", dir=scratch_root()))
        with self._lock:
            root, manifest = self._root(), dict(self._manifest)
        for rel, value in manifest.items():
            src, dst = root / rel, target / rel
            try:
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
            except OSError:
                continue
            if _digest(dst) != value:  # checked after copying: the copy is what will be read
                dst.unlink(missing_ok=True)
        return target

    def merge(self, prefix: Path, digests: dict[str, str]) -> int:
        """Add the files of ``prefix`` whose content still has the digest taken before any
        candidate ran; returns how many joined."""
        added = 0
        with self._lock:
            root = self._root()
            for rel, value in digests.items():
                if rel in self._manifest or ".." in Path(rel).parts or Path(rel).is_absolute():
                    continue
                src = prefix / rel
                if src.is_symlink() or _digest(src) != value:
                    continue
                dst = root / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                tmp = dst.with_name(dst.name + f".{os.getpid()}.tmp")
                shutil.copyfile(src, tmp)
                os.replace(tmp, dst)
                if _digest(dst) == value:
                    self._manifest[rel] = value
                    added += 1
        return added


def verified_copy(source: Path, digests: dict[str, str], parent: Path | None = None) -> Path:
    """A new directory with the files of ``source`` whose content still has ``digests``
    (taken while no untrusted process existed); anything else is left out."""
    target = Path(tempfile.mkdtemp(prefix="verifier-pycache-", dir=str(parent) if parent else scratch_root()))
    for rel, value in digests.items():
        dst = target / rel
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / rel, dst)
        except OSError:
            continue
        if _digest(dst) != value:
            dst.unlink(missing_ok=True)
    return target


CACHE = BytecodeCache()


def remove(prefix: Path) -> None:
    shutil.rmtree(prefix, ignore_errors=True)

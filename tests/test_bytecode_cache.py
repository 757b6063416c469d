"""The verifier's trusted bytecode cache (verifiers/launch/bytecode.py) persists across processes
only where arms cannot reach it, and every file is checked against its digest when copied."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from verifiers.arms import sandbox
from verifiers.launch import bytecode


def _prefix(root: Path, files: dict[str, bytes]) -> tuple[Path, dict[str, str]]:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root, {rel: hashlib.blake2b(data, digest_size=20).hexdigest() for rel, data in files.items()}


FILES = {"usr/lib/python3/torch/__pycache__/__init__.cpython-311.pyc": b"trusted torch bytecode",
         "usr/lib/python3/triton/__pycache__/language.cpython-311.pyc": b"trusted triton bytecode"}


def test_trusted_bytecode_written_by_one_process_is_found_by_the_next(tmp_path):
    disk = tmp_path / "cache"
    prefix, digests = _prefix(tmp_path / "judge-prefix", FILES)
    assert bytecode.BytecodeCache(persist=disk).merge(prefix, digests) == 2
    # a new process (a new cache object: nothing in its memory) starts from the disk copy
    fresh = bytecode.BytecodeCache(persist=disk).fresh_prefix()
    try:
        assert {str(p.relative_to(fresh)): p.read_bytes() for p in fresh.rglob("*") if p.is_file()} == FILES
    finally:
        bytecode.remove(fresh)


def test_a_file_changed_on_disk_is_left_out_and_compiled_again(tmp_path):
    disk = tmp_path / "cache"
    prefix, digests = _prefix(tmp_path / "judge-prefix", FILES)
    bytecode.BytecodeCache(persist=disk).merge(prefix, digests)
    rel = next(iter(FILES))
    (disk / rel).write_bytes(b"planted")
    fresh = bytecode.BytecodeCache(persist=disk).fresh_prefix()
    try:
        assert not (fresh / rel).exists()
        assert sum(1 for p in fresh.rglob("*") if p.is_file()) == 1
    finally:
        bytecode.remove(fresh)


def test_a_file_that_changed_before_it_joined_never_joins(tmp_path):
    disk = tmp_path / "cache"
    prefix, digests = _prefix(tmp_path / "judge-prefix", FILES)
    rel = next(iter(FILES))
    (prefix / rel).write_bytes(b"rewritten after the judge hashed it")
    assert bytecode.BytecodeCache(persist=disk).merge(prefix, digests) == 1
    assert rel not in json.loads((disk / bytecode.MANIFEST).read_text())


def test_a_manifest_entry_that_climbs_out_of_the_cache_is_ignored(tmp_path):
    disk = tmp_path / "cache"
    disk.mkdir()
    outside = tmp_path / "outside.pyc"
    outside.write_bytes(b"x")
    (disk / bytecode.MANIFEST).write_text(json.dumps({"../outside.pyc": hashlib.blake2b(b"x", digest_size=20).hexdigest()}))
    fresh = bytecode.BytecodeCache(persist=disk).fresh_prefix()
    try:
        assert not any(fresh.rglob("*"))
    finally:
        bytecode.remove(fresh)


def test_the_disk_copy_is_used_only_while_arms_are_confined(monkeypatch, tmp_path):
    monkeypatch.setenv("SKILL_SERVER_CACHE", str(tmp_path))
    if sandbox.support().active:
        assert bytecode.persisted_folder() == tmp_path / "bytecode" / bytecode.interpreter_tag()
        # the folder is under the cache folder, a secret path no confined arm may read or write
        assert any(Path(s) == tmp_path.resolve() for s in sandbox.secret_paths())
    monkeypatch.setenv("SKILL_SERVER_SANDBOX", "off")  # arms unconfined: they could rewrite file and digest
    assert bytecode.persisted_folder() is None
    monkeypatch.delenv("SKILL_SERVER_SANDBOX")
    monkeypatch.setenv("SKILL_SERVER_PERSIST_BYTECODE", "0")
    assert bytecode.persisted_folder() is None


@pytest.mark.skipif(not sandbox.support().active, reason=f"no Landlock here: {sandbox.support().reason}")
def test_a_second_process_imports_torch_from_the_persisted_cache(tmp_path):
    """What the cache is for: the second CLI-like process finds the first one's torch bytecode."""
    script = ("import sys, time, subprocess, pathlib\n"
              "from verifiers.launch import bytecode\n"
              "prefix = bytecode.CACHE.fresh_prefix()\n"
              "before = sum(1 for _ in prefix.rglob('*.pyc'))\n"
              "subprocess.run([sys.executable, '-I', '-X', f'pycache_prefix={prefix}', '-c', 'import json, email.parser'], check=True)\n"
              "bytecode.CACHE.merge(prefix, bytecode.tree_digests(prefix))\n"
              "print(before)\n")
    env = {"SKILL_SERVER_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    counts = [int(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                 check=True).stdout.split()[-1]) for _ in range(2)]
    assert counts[0] == 0 and counts[1] > 5, counts


def test_the_templates_prefix_lies_where_no_arm_writes_and_orphans_are_removed(tmp_path):
    disk = tmp_path / "cache" / "cpython-x"
    cache = bytecode.BytecodeCache(persist=disk)
    orphan = disk.parent / f"{disk.name}.work" / "verifier-pycache-999999999-abc"
    orphan.mkdir(parents=True)
    private = cache.fresh_prefix(private=True)
    try:  # beside the disk cache (a secret path under Landlock), not in /dev/shm
        assert private.parent == disk.parent / f"{disk.name}.work"
        assert not orphan.exists()  # its process is gone
        assert cache.fresh_prefix().parent != private.parent
    finally:
        bytecode.remove(private)

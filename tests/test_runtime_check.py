"""More than one HIP/CUDA runtime library in one process: the maps reader and its verdict,
on maps text of the forms the kernel writes and on a real process that loads two copies."""
from __future__ import annotations

import ctypes.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from verifiers.hw.runtime_check import check_runtimes, check_this_process, loaded_runtimes


def maps(*paths: str) -> str:
    """Four mappings per file (r--p, r-xp, r--p, rw-p), as ld.so maps a shared object."""
    lines, addr = [], 0x7F0000000000
    for i, path in enumerate(paths):
        for perm in ("r--p", "r-xp", "r--p", "rw-p"):
            lines.append(f"{addr:x}-{addr + 0x1000:x} {perm} 00000000 08:01 {1000 + i}                      {path}")
            addr += 0x1000
    lines += ["7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0                          [stack]",
              "7f0000100000-7f0000200000 rw-p 00000000 00:00 0 "]
    return "\n".join(lines) + "\n"


ROCM6 = "/opt/rocm-6.2.0/lib/libamdhip64.so.6.2.60200"
ROCM7 = "/opt/rocm-7.0.0/lib/libamdhip64.so.7.0.51831"
TORCH_HIP = "/venv/lib/python3.11/site-packages/torch/lib/libamdhip64.so"


def test_one_runtime_mapped_many_times_is_fine():
    r = check_runtimes(maps(ROCM6, "/opt/rocm-6.2.0/lib/libhiprtc.so.6.2.60200", "/usr/lib/libc.so.6"))
    assert r.ok and [(lib.family, lib.version) for lib in r.libraries] == [("hip", "6.2.60200")]


def test_torch_rocm6_and_flydsl_rocm7_runtimes_are_a_conflict():
    r = check_runtimes(maps(ROCM6, ROCM7))
    assert not r.ok and r.problem.startswith("2 HIP runtimes (libamdhip64) loaded in one process (different versions)")
    assert ROCM6 in r.problem and ROCM7 in r.problem and "\n" not in r.problem


def test_one_version_from_two_folders_is_a_conflict_too():
    r = check_runtimes(maps(ROCM6, "/opt/venv/site-packages/torch/lib/libamdhip64.so.6.2.60200"))
    assert "one version from several folders" in r.problem


def test_cuda_runtimes_vendored_with_a_hash_and_deleted_files_count():
    vendored = "/venv/site-packages/torch/lib/libcudart-9335f6a2.so.12"
    pip_cuda = "/venv/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12 (deleted)"
    libs = loaded_runtimes(maps(vendored, pip_cuda, TORCH_HIP))
    assert [(lib.family, lib.version, lib.path) for lib in libs] == [
        ("cuda", "12", vendored), ("cuda", "12", pip_cuda.removesuffix(" (deleted)")), ("hip", None, TORCH_HIP)]
    r = check_runtimes(maps(vendored, pip_cuda, TORCH_HIP))
    assert "2 CUDA runtimes" in r.problem and "HIP" not in r.problem.split(";")[0]


def test_lookalike_names_and_odd_lines_are_not_runtimes():
    text = maps("/opt/libamdhip64_plugin.so", "/opt/libcudart_static.a", "/opt/my libcudart.so.12.x",
                "/x/libamdhip64.so.bak") + "garbage\n\n7f00-7f01 r--p\n"
    assert loaded_runtimes(text) == []


def test_unreadable_maps_say_nothing_was_checked(tmp_path):
    r = check_this_process(tmp_path / "missing")
    assert not r.checked and not r.ok and "cannot list the loaded libraries" in r.note


def test_a_real_process_that_loads_two_runtime_copies_is_caught(tmp_path):
    libz = ctypes.util.find_library("z")
    src = next((p for p in Path("/lib/x86_64-linux-gnu").glob("libz.so.1*") if p.is_file()), None) if libz else None
    if src is None:
        pytest.skip("no libz shared object to stand in for a runtime library")
    copies = [tmp_path / "rocm6" / "libamdhip64.so.6.2.60200", tmp_path / "rocm7" / "libamdhip64.so.7.0.51831"]
    for c in copies:
        c.parent.mkdir()
        shutil.copy(src, c)
    code = ("import ctypes, sys; from verifiers.hw.runtime_check import check_this_process as c;"
            "print(c().ok); [ctypes.CDLL(p) for p in sys.argv[1:]]; print(c().problem)")
    out = subprocess.run([sys.executable, "-c", code, *map(str, copies)], capture_output=True, text=True, check=True)
    before, after = out.stdout.splitlines()
    assert before == "True"  # this CPU box: no GPU runtime loaded at all
    assert after.startswith("2 HIP runtimes") and all(str(c) in after for c in copies)

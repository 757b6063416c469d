"""Helpers for the emulator tests: toolchain checks, code-object patching, handler mutation.

Patching a real, compiler-generated kernel (an ``s_waitcnt`` or ``s_barrier`` turned into
``s_nop 0``) is how the hazard tests build kernels a silicon run would break on.

A missing gfx950 toolchain (llvm-22's llvm-objdump, lld-22's ld.lld, flydsl) skips these
tests on a developer's box but FAILS them in CI (``CI`` set, as ``.ci/run`` runs) or when
``SKILL_SERVER_REQUIRE_GFX950`` is set: a CI run that skipped them would say nothing.
"""
from __future__ import annotations

import os
import shutil

import pytest

INSTALL_HINT = "install it with `apt-get install -y llvm-22 lld-22` (scripts/setup.sh does)"


def toolchain_missing(reason: str) -> None:
    """Skip (developer box) or fail (CI) a test whose gfx950 toolchain is missing."""
    if os.environ.get("CI") or os.environ.get("SKILL_SERVER_REQUIRE_GFX950"):
        pytest.fail(f"gfx950 toolchain missing in CI (a skip here would hide every emulator and FlyDSL test): "
                    f"{reason}; {INSTALL_HINT}", pytrace=False)
    pytest.skip(reason)

S_NOP_0 = 0xBF800000
S_TRAP_2 = 0xBF920002  # an opcode the emulator does not implement


def require_llvm() -> None:
    from verifiers.gfx950.emulator.decoder import find_objdump
    from verifiers.gfx950.emulator.errors import CodeObjectError

    try:
        find_objdump()
    except CodeObjectError as exc:
        toolchain_missing(str(exc))


def require_flydsl_toolchain() -> None:
    from verifiers.gfx950 import env

    problem = env.toolchain_problem()
    if problem:
        toolchain_missing(problem)
    if shutil.which("python3") is None:  # pragma: no cover
        toolchain_missing("no python3 for the compile subprocess")


def instructions(code: bytes, kernel: str):  # noqa: ANN201
    from verifiers.gfx950.emulator.code_object import load_code_object
    from verifiers.gfx950.emulator.decoder import decode

    co = load_code_object(code)
    return decode(co, co.kernel(kernel))


def patch_words(code: bytes, address: int, words: list[int]) -> bytes:
    """A copy of the code object with the 32-bit words at virtual ``address`` replaced."""
    from verifiers.gfx950.emulator.elf import ElfFile

    elf = ElfFile(code)
    for sec in elf.sections:
        if sec.addr and sec.addr <= address < sec.addr + sec.size:
            off = sec.offset + address - sec.addr
            out = bytearray(code)
            for i, w in enumerate(words):
                out[off + 4 * i : off + 4 * i + 4] = w.to_bytes(4, "little")
            return bytes(out)
    raise AssertionError(f"address 0x{address:x} is in no section")


def nop_out(code: bytes, kernel: str, pick) -> tuple[bytes, list]:  # noqa: ANN001
    """Replace every instruction ``pick(ins)`` selects by s_nop 0 (one per dword)."""
    chosen = [i for i in instructions(code, kernel) if pick(i)]
    assert chosen, "nothing to patch"
    for ins in chosen:
        code = patch_words(code, ins.address, [S_NOP_0] * (ins.size // 4))
    return code, chosen


def mutate_handler(monkeypatch, mnemonic: str, handler) -> None:  # noqa: ANN001
    """Run ``mnemonic`` with ``handler`` (a deliberately wrong variant) for the rest of the
    test: replaces the registered handler and drops the bound-program cache."""
    from verifiers.gfx950.emulator import dispatch
    from verifiers.gfx950.emulator.ops import HANDLERS

    assert mnemonic in HANDLERS, f"{mnemonic} is not an implemented opcode"
    monkeypatch.setitem(HANDLERS, mnemonic, handler)
    monkeypatch.setattr(dispatch, "_PROGRAMS", {})


def fresh_programs(monkeypatch) -> None:  # noqa: ANN001
    """Re-bind handlers for the rest of the test (after patching module-level semantics)."""
    from verifiers.gfx950.emulator import dispatch

    monkeypatch.setattr(dispatch, "_PROGRAMS", {})

"""The emulator's errors: each names what was wrong and where, so a caller can act on it.

Every error raised to a caller of ``launch`` is an ``EmulatorError``; none of them is a
bare ``KeyError``/``IndexError`` from inside the engine.
"""
from __future__ import annotations


class EmulatorError(Exception):
    """Base class of everything the emulator raises on purpose."""


class CodeObjectError(EmulatorError):
    """The code object cannot be used: not an ELF, truncated, another target, no such kernel."""


class LaunchArgumentError(EmulatorError):
    """The launch does not match the kernel: argument count/size/type, grid or block."""


class UnimplementedInstruction(EmulatorError):
    """The kernel reached an opcode (or operand form) the emulator does not implement."""

    def __init__(self, mnemonic: str, kernel: str, address: int, text: str, detail: str = "") -> None:
        self.mnemonic = mnemonic
        self.kernel = kernel
        self.address = address
        extra = f": {detail}" if detail else ""
        super().__init__(
            f"kernel {kernel!r}: instruction {mnemonic!r} at 0x{address:x} is not implemented by the "
            f"gfx950 emulator{extra} (`{text}`); see docs/gfx950_emulator.md for the implemented set"
        )


class MemoryAccessError(EmulatorError):
    """A global access outside every argument's buffer, or an LDS access outside the allocation."""


class ExecutionError(EmulatorError):
    """The program did something the emulator cannot continue from (bad branch target,
    instruction budget exhausted, barrier deadlock, ...)."""

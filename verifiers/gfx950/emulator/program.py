"""A kernel's decoded instructions bound to their handlers, with branch targets resolved."""
from __future__ import annotations

from verifiers.gfx950.emulator.code_object import CodeObject, KernelInfo
from verifiers.gfx950.emulator.decoder import Instruction, decode
from verifiers.gfx950.emulator.errors import ExecutionError, UnimplementedInstruction
from verifiers.gfx950.emulator.ops import handler_for
from verifiers.gfx950.emulator.ops.batched import batched_for

BRANCHES = ("s_branch", "s_cbranch_")


class Program:
    def __init__(self, code_object: CodeObject, kernel: KernelInfo) -> None:
        self.kernel = kernel.name
        self.instructions: list[Instruction] = decode(code_object, kernel)
        self.index = {ins.address: i for i, ins in enumerate(self.instructions)}
        self.missing: dict[str, Instruction] = {}
        for ins in self.instructions:
            ins.handler = handler_for(ins.mnemonic)
            ins.batch = batched_for(ins.mnemonic, ins.handler)
            if ins.handler is None:
                self.missing.setdefault(ins.mnemonic, ins)
            if ins.mnemonic.startswith(BRANCHES):
                ins.target = self.index.get(ins.address + 4 + 4 * ins.simm16)

    def require_implemented(self) -> None:
        """Refuse to start a kernel that contains an opcode the emulator cannot execute."""
        if self.missing:
            first = next(iter(self.missing.values()))
            names = ", ".join(sorted(self.missing))
            raise UnimplementedInstruction(first.mnemonic, self.kernel, first.address, first.text,
                                           f"the kernel uses {len(self.missing)} unimplemented opcode(s): {names}")

    def index_of(self, address: int, ins: Instruction) -> int:
        if address not in self.index:
            raise ExecutionError(f"kernel {self.kernel!r}: {ins.text} at 0x{ins.address:x} jumps to 0x{address:x}, "
                                 "which is not an instruction of this kernel")
        return self.index[address]

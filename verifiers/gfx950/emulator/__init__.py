"""An instruction-level emulator of gfx950 (CDNA4, MI355X) code objects, on CPU tensors.

    from verifiers.gfx950.emulator import launch
    report = launch("k.hsaco", "my_kernel", grid=(4, 1, 1), block=(256, 1, 1), args=[c, a, b, 128])
    report.hazards   # what a silicon run would expose: missing waits, LDS races, poison stores

Modules, one job each: ``elf`` / ``msgpack_reader`` / ``descriptor`` / ``code_object``
(loading), ``decoder`` (LLVM's disassembler -> ``Instruction``), ``operands``, ``state``
(per-wave registers and poison), ``memory`` (argument buffers, LDS), ``hazards``,
``ops/`` (instruction semantics by family; ``ops.batched``: the same for many waves at
once), ``numerics`` (fp8/bf16/fma), ``program``, ``lockstep`` (many waves per decoded
instruction), ``executor`` (one wave at a time, barriers), ``dispatch`` (argument checks,
register setup, ``launch``),
``report`` (typed result), ``flydsl_host`` / ``flydsl_arm`` (FlyDSL launchers and the cards'
arms on the emulator). Importing this package imports neither torch nor flydsl.
"""
from verifiers.gfx950.emulator.code_object import CodeObject, KernargSpec, KernelInfo, load_code_object
from verifiers.gfx950.emulator.dispatch import launch
from verifiers.gfx950.emulator.errors import (
    CodeObjectError,
    EmulatorError,
    ExecutionError,
    LaunchArgumentError,
    MemoryAccessError,
    UnimplementedInstruction,
)
from verifiers.gfx950.emulator.report import Hazard, EmulatedLaunch

__all__ = [
    "CodeObject",
    "CodeObjectError",
    "EmulatorError",
    "ExecutionError",
    "Hazard",
    "KernargSpec",
    "KernelInfo",
    "LaunchArgumentError",
    "EmulatedLaunch",
    "MemoryAccessError",
    "UnimplementedInstruction",
    "launch",
    "load_code_object",
]

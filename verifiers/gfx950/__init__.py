"""Static gfx950 gates: compile FlyDSL kernels for gfx950 on a machine with no GPU and
check the resulting ISA / LLVM IR against a card's static claims.

Public API (kernel folders and the CLI code against this)::

    from verifiers.gfx950 import CompileTarget, GateSpec, check_kernel

    # kernels/<folder>/gfx950_targets.py
    TARGETS = [CompileTarget(name="t64x256x128_wpe2_xcd8", make=..., gates=GateSpec(...))]
    NEGATIVE_TARGETS = [CompileTarget(..., expect_fail=("scaled_mfma",))]

    reports = check_kernel("<card folder>")   # list[TargetGates], one per target

Modules: ``targets`` (CompileTarget, target discovery), ``env`` (compile-only environment),
``compile`` (subprocess compile + disk cache -> CompileArtifacts), ``isa`` (ISA / IR parsing),
``gates`` (GateSpec, run_gates, TargetGates), ``check`` (check_kernel: targets + compile + gates).

Importing this package imports neither torch nor flydsl.
"""
from verifiers.gfx950.gates import (
    TargetGates,
    GateResult,
    GateSpec,
    Occupancy,
    run_gates,
)
from verifiers.gfx950.isa import KernelArtifacts, KernelResources
from verifiers.gfx950.compile import CompileArtifacts, compile_target, compile_targets
from verifiers.gfx950.targets import CompileTarget, EmulatedArm, EmulationBudget, emulation_kernel, load_targets
from verifiers.gfx950.check import check_kernel

__all__ = [
    "CompileArtifacts",
    "CompileTarget",
    "EmulatedArm",
    "EmulationBudget",
    "TargetGates",
    "GateResult",
    "GateSpec",
    "KernelArtifacts",
    "KernelResources",
    "Occupancy",
    "check_kernel",
    "compile_target",
    "compile_targets",
    "emulation_kernel",
    "load_targets",
    "run_gates",
]

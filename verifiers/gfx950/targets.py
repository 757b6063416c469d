"""What a kernel folder declares for the static gfx950 gates.

A kernel folder with FlyDSL kernels exposes ``kernels/<folder>/gfx950_targets.py``::

    from verifiers.gfx950 import CompileTarget, GateSpec

    def _make_t64():
        from skill_kernels.<folder>.flydsl_gemm import compile_args   # heavy imports inside
        return compile_args(tile_m=64, ...)        # -> (flyc.jit function, placeholder args)

    TARGETS = [CompileTarget(name="t64x256x128_wpe2", make=_make_t64,
                             gates=GateSpec(...), description="card config, wide-N")]
    NEGATIVE_TARGETS = [...]  # optional: deliberately wrong variants; each must fail its gates

``make`` runs in the compile subprocess with the compile-only environment already set
(ARCH/FLYDSL_GPU_ARCH=gfx950, COMPILE_ONLY=1, ROCM_PATH with ld.lld): it imports flydsl
and torch itself and returns ``(jit_fn, args)`` such that ``flyc.compile(jit_fn, *args)``
traces and compiles without launching. Placeholder args are CPU torch tensors of the right
dtype and size (small shapes are fine when the kernel's code does not depend on them) and
Python constants for the compile-time knobs.

The module-level declarations must stay cheap: importing ``gfx950_targets`` must not import
torch or flydsl.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from verifiers.gfx950.gates import GateSpec
from verifiers import card_folder


@dataclass(frozen=True)
class CompileTarget:
    """One FlyDSL compile for gfx950 and the static claims its ISA must satisfy.

    name: unique within the folder (TARGETS and NEGATIVE_TARGETS together); used on the
      CLI (``--target NAME``) and in the cache key.
    make: zero-arg callable, run in the compile subprocess, returning
      ``(flyc.jit function, placeholder args for flyc.compile)``.
    gates: the GateSpec the compiled kernel(s) must pass.
    description: one line for reports: which card config / regime this is.
    config: the compile knobs (tile, waves_per_eu, xcd_swizzle, ...) as plain JSON-able
      values; shown in reports and part of the cache key.
    sources: extra files (paths relative to the repo root) whose content must invalidate the
      cache, beyond the folder's own ``*.py`` and ``kernels/fp8_common/*.py`` (always hashed).
    expect_fail: for NEGATIVE_TARGETS only: the gate names that must FAIL (e.g.
      ``("scaled_mfma",)`` or ``("scratch",)``). A negative target "holds" when every gate
      named here fails; empty means "at least one gate fails".
    """

    name: str
    make: Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]
    gates: GateSpec
    description: str = ""
    config: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    sources: tuple[str, ...] = ()
    expect_fail: tuple[str, ...] = ()


def emulation_kernel(name: str, make: Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]],
                     config: Mapping[str, Any] | None = None, sources: tuple[str, ...] = ()) -> CompileTarget:
    """A compile that only feeds the emulator (no static claims, so no gates)."""
    return CompileTarget(name=name, make=make, gates=GateSpec(), description="emulation kernel",
                         config=MappingProxyType(dict(config or {})), sources=sources)


@dataclass(frozen=True)
class EmulationBudget:
    """Per-launch limits of an emulated arm's kernels (``dispatch.launch``'s ``max_instructions``
    and ``max_seconds``: the guards against endless loops and grids too large to emulate).
    None keeps launch's default (200 M wave-instructions, 900 s). Only an arm at a real card
    shape needs more, and it says so where it is declared, next to its shape."""

    max_instructions: int | None = None
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.max_instructions is not None and self.max_instructions <= 0:
            raise ValueError(f"max_instructions must be positive, got {self.max_instructions}")
        if self.max_seconds is not None and self.max_seconds <= 0:
            raise ValueError(f"max_seconds must be positive, got {self.max_seconds}")


@dataclass(frozen=True)
class EmulatedArm:
    """One of the problem's FlyDSL arms, run on the gfx950 emulator at a small shape.

    name: unique in the folder (``[A-Za-z0-9_]``); arm: the problem arm it stands for;
    dims: the problem dims it runs at (compile-time dims of its kernels follow from them);
    kernels: role -> the FlyDSL compile of each emulated kernel (compiled like any target);
    build: ``"module:function"`` in the folder, ``build(inputs, outputs, kernels) -> launch``
      where ``kernels[role](*launcher_args)`` runs that kernel on the emulator;
    expect_parity: False for a deliberately wrong variant that must FAIL the problem's parity;
    baseline: a CPU-runnable arm of the problem that stands in for the baseline in the
      relative parity rules (the problem's own baseline may need a GPU);
    budget: the per-launch limits of its kernels (default: launch's own).
    """

    name: str
    arm: str
    dims: Mapping[str, int]
    kernels: Mapping[str, CompileTarget]
    build: str
    baseline: str
    expect_parity: bool = True
    description: str = ""
    budget: EmulationBudget = field(default_factory=EmulationBudget)

    def kernel_target_name(self, role: str) -> str:
        return f"emu_{self.name}_{role}"


@dataclass(frozen=True)
class FolderTargets:
    """The targets one kernel folder declares."""

    folder: str
    targets: tuple[CompileTarget, ...]
    negative: tuple[CompileTarget, ...]
    emulated: tuple[EmulatedArm, ...] = ()
    #: ``FULL_EMULATED_ARMS``: arms at the problem's real shapes (minutes each on the emulator),
    #: run only by ``check-kernel --emulate --full``; never emulation-sized verify shapes
    full: tuple[EmulatedArm, ...] = ()

    def all(self) -> tuple[CompileTarget, ...]:
        """The gated targets (emulation kernels carry no static claims and are not gated)."""
        return self.targets + self.negative

    def emulation_kernels(self) -> dict[str, CompileTarget]:
        """Compile-target name -> target, for every kernel of every emulated arm."""
        return {arm.kernel_target_name(role): replace(t, name=arm.kernel_target_name(role))
                for arm in self.emulated + self.full for role, t in arm.kernels.items()}

    def emulated_arm(self, name: str) -> EmulatedArm:
        for a in self.emulated + self.full:
            if a.name == name:
                return a
        raise KeyError(f"kernels/{self.folder}/gfx950_targets.py has no emulated arm {name!r}; "
                       f"available: {[a.name for a in self.emulated + self.full]}")

    def get(self, name: str) -> tuple[CompileTarget, bool]:
        """Return ``(target, is_negative)``; raise KeyError listing the valid names."""
        for t in self.targets:
            if t.name == name:
                return t, False
        for t in self.negative:
            if t.name == name:
                return t, True
        emu = self.emulation_kernels()
        if name in emu:
            return emu[name], False
        names = [t.name for t in self.all()] + sorted(emu)
        raise KeyError(f"kernels/{self.folder}/gfx950_targets.py has no target {name!r}; available: {names}")


class NoTargetsError(LookupError):
    """The folder has no ``gfx950_targets.py`` (i.e. no FlyDSL kernels to gate)."""


def load_targets(folder: str) -> FolderTargets:
    """Import ``skill_kernels.<folder>.gfx950_targets`` and validate its declarations."""
    module_name = card_folder.module_name(folder, card_folder.TARGETS)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name in (module_name, card_folder.module_name(folder)):
            raise NoTargetsError(
                f"kernels/{folder}/gfx950_targets.py not found: the folder declares no gfx950 compile targets"
            ) from None
        raise
    targets = tuple(getattr(module, "TARGETS", ()))
    negative = tuple(getattr(module, "NEGATIVE_TARGETS", ()))
    emulated = tuple(getattr(module, "EMULATED_ARMS", ()))
    full = tuple(getattr(module, "FULL_EMULATED_ARMS", ()))
    seen: set[str] = set()
    for t in targets + negative:
        if not isinstance(t, CompileTarget):
            raise TypeError(f"kernels/{folder}/gfx950_targets.py: {t!r} is not a CompileTarget")
        if t.name in seen:
            raise ValueError(f"kernels/{folder}/gfx950_targets.py: duplicate target name {t.name!r}")
        seen.add(t.name)
    for a in emulated + full:
        if not isinstance(a, EmulatedArm) or not all(isinstance(k, CompileTarget) for k in a.kernels.values()):
            raise TypeError(f"kernels/{folder}/gfx950_targets.py: {a!r} is not an EmulatedArm of CompileTargets")
        if not a.name.replace("_", "").isalnum():
            raise ValueError(f"kernels/{folder}/gfx950_targets.py: emulated arm name {a.name!r} must be [A-Za-z0-9_]")
        for role in a.kernels:
            n = a.kernel_target_name(role)
            if n in seen:
                raise ValueError(f"kernels/{folder}/gfx950_targets.py: duplicate target name {n!r}")
            seen.add(n)
    if not targets:
        raise ValueError(f"kernels/{folder}/gfx950_targets.py: TARGETS is empty")
    return FolderTargets(folder=folder, targets=targets, negative=negative, emulated=emulated, full=full)

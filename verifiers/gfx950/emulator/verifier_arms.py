"""The ``gfx950-emulated`` verifier platform's arms: a problem's FlyDSL arms on the emulator.

On that platform the judge sends ``arm:NAME`` candidates to the arm process as builder kind
``emulated``; the arm resolves ``NAME`` here:

* a problem arm (``flydsl_4wave``): the emulated arms of ``kernels/<folder>/gfx950_targets.py``
  standing for it that must pass (``expect_parity``); at build time the one declared at the
  case's dims is picked (N and K are compile-time in these kernels, so each dims has its own
  code object);
* an emulated arm's own name (``neg_hw_b_scale``): exactly that one, at its dims; this is how
  a deliberately wrong variant is verified (and must FAIL). It wins over a problem arm of
  the same name;
* otherwise a problem arm that runs on CPU runs as it is (builder kind ``arm``).

``check_candidate`` is the caller's check (bad input before any process starts), the same
resolution the arm makes. ``toolchain_problem`` says what this box lacks to emulate
FlyDSL arms (flydsl, ld.lld for gfx950, llvm-objdump), or None.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verifiers.gfx950 import env
from verifiers.gfx950.emulator.decoder import find_objdump
from verifiers.gfx950.emulator.errors import EmulatorError
from verifiers.gfx950.emulator.flydsl_arm import emulated_builder
from verifiers.gfx950.targets import EmulatedArm, NoTargetsError, load_targets


def toolchain_problem() -> str | None:

    problem = env.toolchain_problem()
    if problem:
        return problem
    try:
        find_objdump()
    except EmulatorError as exc:
        return str(exc)
    return None


def arms_for(folder: str, name: str, problem_arms: Mapping[str, Any]) -> list[EmulatedArm]:
    """The emulated arms ``name`` may run as (see the module docstring); KeyError says why none."""
    declared = load_targets(folder).emulated
    own = [a for a in declared if a.name == name]
    if own:  # an emulated arm's own name wins (mxfp8's ``scales_pinned`` is also a CPU ablation arm)
        return own
    standing = [a for a in declared if a.arm == name and a.expect_parity]
    if standing:
        return standing
    raise KeyError(f"kernels/{folder}/gfx950_targets.py declares no emulated arm for {name!r} (EMULATED_ARMS); "
                   f"emulated: {sorted({a.arm for a in declared if a.expect_parity})} (problem arms) and "
                   f"{[a.name for a in declared]} (emulated arms by name)")


def declared_dims(folder: str) -> list[dict[str, int]]:
    """The dims of every emulated arm the folder declares (all emulation-sized by declaration)."""

    try:
        return [dict(a.dims) for a in load_targets(folder).emulated]
    except (NoTargetsError, ModuleNotFoundError):
        return []


def builder_kind(folder: str, name: str, problem_arms: Mapping[str, Any]) -> str:
    """How ``arm:name`` runs on the emulated platform: ``emulated`` (a FlyDSL arm on the
    emulator) or ``arm`` (a CPU arm of the problem as is, e.g. an A/A run of the baseline)."""
    try:
        arms_for(folder, name, problem_arms)
        return "emulated"
    except (KeyError, LookupError):
        spec = problem_arms.get(name)
        if spec is not None and "cpu" in spec.platforms:
            return "arm"
        raise


def arm_at(arms: list[EmulatedArm], dims: Mapping[str, int]) -> EmulatedArm | None:
    want = {k: int(v) for k, v in dims.items()}
    return next((a for a in arms if {k: int(v) for k, v in a.dims.items()} == want), None)


def check_candidate(folder: str, name: str, problem_arms: Mapping[str, Any], shapes: list[dict[str, int]]) -> None:
    """Raise ValueError when ``arm:name`` cannot run on the emulated platform at every visible shape."""
    try:
        if builder_kind(folder, name, problem_arms) == "arm":
            return
        arms = arms_for(folder, name, problem_arms)
    except (KeyError, LookupError) as exc:
        raise ValueError(str(exc).strip("'\"")) from None
    for dims in shapes:
        if arm_at(arms, dims) is None:
            raise ValueError(f"arm {name!r} has no emulated arm at {dims} in kernels/{folder}/gfx950_targets.py; "
                             f"declared at: {[dict(a.dims) for a in arms]}")


def verifier_builder(problem: Any, name: str):  # noqa: ANN201 - verifiers.problem.Builder
    """``build(inputs, outputs) -> launch`` for ``arm:name`` on the emulated platform (runs in
    the arm process). The emulated arm is chosen by the tensors' shapes: the one whose dims
    give exactly these input and output shapes and dtypes."""

    folder = problem.name
    arms = arms_for(folder, name, problem.arms)
    builders: dict[str, Any] = {}
    layouts: dict[str, dict] = {}

    def layout_of(tensors: Mapping[str, Any]) -> dict:
        return {k: (tuple(v.shape), str(v.dtype)) for k, v in sorted(tensors.items())}

    def pick(inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> EmulatedArm:
        want = (layout_of(inputs), layout_of(outputs))
        for arm in arms:
            if arm.name not in layouts:  # emulation-sized dims: drawing the inputs costs milliseconds
                dims = dict(arm.dims)
                layouts[arm.name] = (layout_of(problem.make_inputs(dims, 0, "cpu")), layout_of(problem.make_outputs(dims, "cpu")))
            if layouts[arm.name] == want:
                return arm
        shapes = {k: v[0] for k, v in want[1].items()}
        raise ValueError(f"{name}: no emulated arm of kernels/{folder} was compiled for these tensors (outputs "
                         f"{shapes}); emulated at {[dict(a.dims) for a in arms]}")

    def build(inputs, outputs):  # noqa: ANN001, ANN202
        arm = pick(inputs, outputs)
        if arm.name not in builders:
            builders[arm.name] = emulated_builder(folder, arm.name)
        return builders[arm.name](inputs, outputs)

    return build

"""Run one arm's builder under the candidate contract and record every violation.

The contract (``verifiers.problem``): ``build(inputs, outputs) -> launch``; ``launch()``
writes every output in place on the current stream, allocates no new outputs, leaves the
inputs untouched and no work behind. This module enforces it on one set of buffers: it
hands the arm its own clone of the inputs and freshly poisoned outputs, keeps its own
references to both (so replacing a dict entry, or a tensor's class, changes nothing the
harness reads), and checks after ``build`` and after ``launch`` that the dicts still hold
the same plain tensors, that the inputs are bitwise unchanged and that no Python thread
started by ``launch`` is still alive.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verifiers import integrity, tensors
from verifiers.device import Device

if TYPE_CHECKING:  # pragma: no cover
    import torch

Builder = Callable[[dict, dict], Callable[[], None]]


class CandidateError(Exception):
    """The arm raised or returned something outside the contract (not a harness bug)."""


class ProblemError(Exception):
    """The problem (inputs, outputs, oracle, baseline arm), not the candidate, is at fault."""


@dataclass
class BoundArm:
    """One build of an arm over its own buffers."""

    label: str
    launch: Callable[[], None]
    inputs: dict[str, "torch.Tensor"]  # harness-held references to the arm's input clones
    outputs: dict[str, "torch.Tensor"]  # harness-held references to the arm's outputs
    inputs_dict: dict[str, Any]  # the dicts handed to build (checked for tampering)
    outputs_dict: dict[str, Any]
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # suspicious but not contract breaches


def bind(
    label: str,
    builder: Builder,
    pristine_inputs: Mapping[str, "torch.Tensor"],
    make_outputs: Callable[[], dict[str, "torch.Tensor"]],
    device: Device,
    poison_run: int = 0,
) -> BoundArm:
    """Clone inputs, allocate + poison outputs, call ``build``; raise CandidateError on failure."""
    inputs = tensors.clone_tensors(pristine_inputs)
    try:
        outputs = make_outputs()
    except Exception as exc:
        raise ProblemError(f"problem.make_outputs raised {type(exc).__name__}: {exc}") from exc
    bad = tensors.check_plain(outputs, "problem outputs", device.torch_device)
    if bad:
        raise ProblemError("problem.make_outputs returned bad tensors: " + "; ".join(bad))
    tensors.poison(outputs, poison_run)
    inputs_dict, outputs_dict = dict(inputs), dict(outputs)
    before = integrity.python_threads()
    try:
        launch = builder(inputs_dict, outputs_dict)
    except BaseException as exc:  # SystemExit from a candidate is a candidate failure too
        raise CandidateError(f"{label}: build raised {type(exc).__name__}: {exc}") from exc
    if not callable(launch):
        raise CandidateError(f"{label}: build must return a zero-argument launch callable, got {type(launch).__name__}")
    arm = BoundArm(label, launch, inputs, outputs, inputs_dict, outputs_dict)
    arm.violations += _dict_violations(arm, "build", device)
    # compilers may keep helper threads after build; launch is held to a stricter rule
    left = integrity.new_threads(before)
    if left:
        arm.notes.append(f"{label}: build left Python threads running: {sorted(left.values())}")
    device.sync()
    return arm


def run(arm: BoundArm, device: Device, pristine_inputs: Mapping[str, "torch.Tensor"]) -> list[str]:
    """Call ``launch`` once, synchronise, and return contract violations found right after."""
    before = integrity.python_threads()
    try:
        arm.launch()  # a return value is ignored: only the outputs written in place count
    except BaseException as exc:
        raise CandidateError(f"{arm.label}: launch raised {type(exc).__name__}: {exc}") from exc
    device.sync()
    found: list[str] = []
    alive = integrity.new_threads(before)
    if alive:
        found.append(
            f"{arm.label}: launch left Python threads running after it returned {sorted(alive.values())} "
            "(work outside the timed window)"
        )
    found += _dict_violations(arm, "launch", device)
    changed = tensors.changed_tensors(arm.inputs, {k: pristine_inputs[k] for k in arm.inputs})
    if changed:
        found.append(f"{arm.label}: launch modified its inputs {changed} (inputs must be read-only)")
    arm.violations += found
    return found


def _dict_violations(arm: BoundArm, when: str, device: Device) -> list[str]:
    found = []
    for what, handed, held in (("inputs", arm.inputs_dict, arm.inputs), ("outputs", arm.outputs_dict, arm.outputs)):
        if set(handed) != set(held):
            found.append(f"{arm.label}: {when} changed the keys of the {what} dict: {sorted(handed)} vs {sorted(held)}")
        for name, tensor in held.items():
            if name in handed and handed[name] is not tensor:
                found.append(f"{arm.label}: {when} replaced {what}[{name!r}] with a different object")
        found += [f"{arm.label}: after {when}: {r}" for r in tensors.check_plain(held, what, device.torch_device)]
        found += [
            f"{arm.label}: after {when}: {r}"
            for r in tensors.check_plain({k: v for k, v in handed.items() if v is not held.get(k)}, what + " dict", None)
        ]
    return found

"""The cards' FlyDSL arms on the emulator: compile (as the gates do), launch, check parity.

* ``EmulatedKernel``: one compiled FlyDSL kernel; calling it with the launcher's arguments
  (``kernel(*args)``, the same tuple ``flyc.compile``'s result takes on a GPU, stream
  omitted) runs the host launcher (``flydsl_host``) and the kernel (``launch``) on CPU
  tensors, in place, and keeps the ``EmulatedLaunch``.
* ``emulated_builder(folder, name)``: a ``build(inputs, outputs) -> launch`` for the
  emulated arm ``name`` of ``kernels/<folder>/gfx950_targets.py`` (``EMULATED_ARMS``),
  i.e. what a verifier platform ``gfx950-emulated`` runs in place of the ROCm arm.
* ``run_emulated_parity(folder, name, seed)``: the problem's inputs at the arm's dims,
  the arm on the emulator, the problem's oracle and parity rules (``verifiers.judge.parity``),
  a CPU baseline arm for the relative rules; returns ``EmulatedParity``.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from verifiers.gfx950.compile import compile_targets
from verifiers.gfx950.emulator.code_object import load_code_object
from verifiers.gfx950.emulator.dispatch import DEFAULT_MAX_INSTRUCTIONS, DEFAULT_MAX_SECONDS, launch
from verifiers.gfx950.emulator.errors import EmulatorError
from verifiers.gfx950.emulator.flydsl_host import HostFunction
from verifiers.gfx950.emulator.report import EmulatedLaunch
from verifiers.gfx950.targets import EmulationBudget, load_targets
from verifiers.judge.metrics import output_metrics
from verifiers.judge.parity import output_eps, parity_failures, rules_from
from verifiers.problem import load_problem


class EmulatedKernel:
    """A FlyDSL kernel compiled for gfx950, runnable on the emulator."""

    def __init__(self, code_object: Path, host_ir: str, kernel: str, config: dict[str, Any],
                 budget: EmulationBudget | None = None) -> None:

        self.kernel_name = kernel
        self.config = dict(config)
        self.code_object = load_code_object(code_object)
        self.host = HostFunction(host_ir, kernel)
        self.budget = budget or EmulationBudget()
        self.reports: list[EmulatedLaunch] = []

    def __call__(self, *launcher_args: Any) -> EmulatedLaunch:

        hl = self.host.run(launcher_args)
        b = self.budget
        report = launch(self.code_object, hl.kernel, hl.grid, hl.block, hl.args, dynamic_lds_bytes=hl.dynamic_lds_bytes,
                        max_instructions=b.max_instructions or DEFAULT_MAX_INSTRUCTIONS,
                        max_seconds=b.max_seconds or DEFAULT_MAX_SECONDS)
        self.reports.append(report)
        return report


def _arm(folder: str, name: str):  # noqa: ANN202

    targets = load_targets(folder)
    return targets, targets.emulated_arm(name)


def emulated_kernels(folder: str, name: str, *, use_cache: bool = True) -> dict[str, EmulatedKernel]:
    """Compile (or fetch from the gates' cache) every kernel of emulated arm ``name``."""

    _, arm = _arm(folder, name)
    names = {role: arm.kernel_target_name(role) for role in arm.kernels}
    arts = compile_targets(folder, list(names.values()), use_cache=use_cache)
    stale = [n for n in names.values() if arts[n].status == "ok" and not all(k.code_object_file for k in arts[n].kernels)]
    if stale:
        arts.update(compile_targets(folder, stale, use_cache=False))
    out = {}
    for role, tname in names.items():
        art = arts[tname]
        if art.status != "ok":
            raise EmulatorError(f"kernels/{folder}: compiling {tname} for the emulator: {art.status}: {art.reason}")
        if len(art.kernels) != 1:
            raise EmulatorError(f"kernels/{folder}: {tname} compiled {len(art.kernels)} kernels; an emulation "
                                "kernel target must compile exactly one")
        k = art.kernels[0]
        base = Path(art.artifacts_dir)
        out[role] = EmulatedKernel(base / k.code_object_file, (base / k.host_ir_file).read_text(), k.kernel,
                                   dict(arm.kernels[role].config), arm.budget)
    return out


def emulated_builder(folder: str, name: str):  # noqa: ANN201 - verifiers.problem.Builder
    """``build(inputs, outputs) -> launch`` running emulated arm ``name`` on CPU tensors."""

    problem = load_problem(folder)
    _, arm = _arm(folder, name)
    glue = problem.resolve_builder(arm.build)
    kernels = emulated_kernels(folder, name)

    def build(inputs, outputs):  # noqa: ANN001, ANN202
        return glue(inputs, outputs, kernels)

    build.kernels = kernels  # the launch reports accumulate here
    return build


class EmulatedParity(BaseModel):
    """One emulated arm, one seed: the parity verdict and the evidence behind it."""

    folder: str
    emulated_arm: str
    problem_arm: str
    dims: dict[str, int]
    seed: int
    expect_parity: bool
    parity_holds: bool
    failures: list[str]  # every parity rule broken (empty: parity holds)
    metrics: dict[str, dict]  # output -> OutputMetrics of the emulated arm vs the oracle
    baseline: str
    baseline_metrics: dict[str, dict]
    launches: list[EmulatedLaunch]
    emulate_seconds: float

    @property
    def as_expected(self) -> bool:
        return self.parity_holds == self.expect_parity

    @property
    def hazards(self) -> list:
        return [h for r in self.launches for h in r.hazards]


def run_emulated_parity(folder: str, name: str, seed: int = 0, dims: dict[str, int] | None = None) -> EmulatedParity:
    """``dims``: run at these problem dims instead of the arm's (only the kernel's runtime
    dims, e.g. M of a GEMM compiled for its N and K, may differ; a cheaper run of the same code).

    Order: the oracle, then the CPU baseline (on a copy), then the emulated arm, last, on the
    very inputs: whatever the arm does to them can no longer reach the oracle or the
    baseline, so the inputs are never copied for the oracle (at the MoE card's real shape
    they are 2.5 GB: a pristine copy beside them, plus the baseline's, would hold three)."""
    import torch


    problem = load_problem(folder)
    _, arm = _arm(folder, name)
    if dims is not None:
        if set(dims) != set(arm.dims) or not all(isinstance(v, int) and v > 0 for v in dims.values()):
            raise EmulatorError(f"kernels/{folder}: emulated arm {name!r}: dims {dims} must give a positive int for "
                                f"each of {sorted(arm.dims)}")
    dims = dict(arm.dims if dims is None else dims)
    rules = rules_from(problem.parity)
    build = emulated_builder(folder, name)
    inputs = problem.make_inputs(dims, seed, "cpu")
    oracle = problem.oracle(inputs, dims)
    base_outputs = problem.make_outputs(dims, "cpu")
    base_build = problem.resolve_builder(problem.arm(arm.baseline).build)
    base_build({k: v.clone() for k, v in inputs.items()}, base_outputs)()  # its copy is gone once it returns
    outputs = problem.make_outputs(dims, "cpu")
    for t in outputs.values():
        if t.dtype.is_floating_point:
            t.fill_(float("nan"))  # unwritten elements fail parity as NaN
    t0 = time.perf_counter()
    build(inputs, outputs)()
    seconds = time.perf_counter() - t0
    del inputs
    failures: list[str] = []
    metrics, base_metrics = {}, {}
    with torch.no_grad():
        for key, ref in oracle.items():
            cand = output_metrics(outputs[key], ref, rules.rtol, rules.atol)
            base = output_metrics(base_outputs[key], ref, rules.rtol, rules.atol)
            failures += parity_failures(rules, cand, base, output_eps(outputs[key]), who=f"{arm.arm} (emulated) {key}")
            metrics[key] = cand.model_dump()
            base_metrics[key] = base.model_dump()
    launches = [r for k in build.kernels.values() for r in k.reports]
    return EmulatedParity(
        folder=folder, emulated_arm=name, problem_arm=arm.arm, dims=dims, seed=seed, expect_parity=arm.expect_parity,
        parity_holds=not failures, failures=failures, metrics=metrics, baseline=arm.baseline,
        baseline_metrics=base_metrics, launches=launches, emulate_seconds=round(seconds, 3),
    )

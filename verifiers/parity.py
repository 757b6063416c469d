"""Parity: is the candidate's output the oracle's, as closely as the rules demand?

Protocol per case (one shape, one seed, optionally one input perturbation):

1. fresh inputs from ``problem.make_inputs`` (the harness keeps a pristine copy);
2. candidate run 1 on its own input clone and NaN-/sentinel-poisoned outputs;
3. the oracle (after the candidate: it cannot read the oracle's freed buffers), then the
   baseline arm, each on its own clone;
4. candidate run 2 from a fresh build, outputs poisoned with the *other* sentinel;
5. after a settle delay the outputs of both candidate runs must still be what they were
   when ``launch`` returned (no deferred writes), the inputs bitwise unchanged, and the two
   runs must agree bitwise (or within the problem's declared nondeterminism tolerance).

Figures for **both** arms are recorded against the oracle. Strict mode: zero allclose
mismatches (unless the problem allows some), cosine floor, relative-L2 / max-abs bounds when
given, and the candidate's relative L2 error at most ``k`` times the baseline's (precision
downgrade). Relaxed mode: bounds relative to the baseline's own figures plus absolute bounds.
NaN/Inf, unwritten elements and a degenerate oracle (spread below ``min_oracle_std``)
always fail.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from verifiers import contract, tensors
from verifiers.device import Device
from verifiers.metrics import OracleStats, OutputMetrics, oracle_stats, output_metrics, within_tolerance
from verifiers.problem import ParitySpec, Problem

if TYPE_CHECKING:  # pragma: no cover
    import torch

Status = Literal["PASS", "FAIL", "SKIPPED", "ERROR"]


class ParityRules(BaseModel):
    """The rules actually applied (the problem's ParitySpec plus the verifier's defaults)."""

    mode: Literal["strict", "relaxed"]
    rtol: float
    atol: float
    max_mismatch: int
    min_cosine: float | None
    max_rel_l2: float | None
    max_abs: float | None
    max_cosine_drop: float | None
    max_rel_l2_ratio: float  # candidate rel_l2 <= this x max(baseline rel_l2, output eps)
    max_abs_ratio: float | None
    min_oracle_std: float
    determinism_atol: float
    determinism_rtol: float


def rules_from(
    spec: ParitySpec,
    default_min_cosine: float = 0.99,
    default_error_ratio: float = 2.0,
    determinism_atol: float | None = None,
    determinism_rtol: float | None = None,
) -> ParityRules:
    strict = spec.mode == "strict"
    return ParityRules(
        mode=spec.mode,
        rtol=spec.rtol,
        atol=spec.atol,
        max_mismatch=spec.max_mismatch,
        min_cosine=spec.min_cosine if spec.min_cosine is not None else (default_min_cosine if strict else None),
        max_rel_l2=spec.max_rel_l2,
        max_abs=spec.max_abs,
        max_cosine_drop=spec.max_cosine_drop,
        max_rel_l2_ratio=spec.max_rel_l2_ratio if spec.max_rel_l2_ratio is not None else default_error_ratio,
        max_abs_ratio=spec.max_abs_ratio,
        min_oracle_std=spec.min_oracle_std,
        determinism_atol=spec.determinism_atol if determinism_atol is None else determinism_atol,
        determinism_rtol=spec.determinism_rtol if determinism_rtol is None else determinism_rtol,
    )


def judge(rules: ParityRules, cand: OutputMetrics, base: OutputMetrics, eps: float, who: str = "candidate") -> list[str]:
    """Every rule the candidate's figures break (empty: parity holds for this output)."""
    bad: list[str] = []
    if cand.nonfinite:
        bad.append(f"{who}: {cand.nonfinite} NaN/Inf elements (poisoned = never written, or computed NaN/Inf)")
        return bad
    if cand.unwritten:
        bad.append(f"{who}: {cand.unwritten} elements never written (poison sentinel survived both runs)")
    if rules.mode == "strict" and cand.mismatches > rules.max_mismatch:
        bad.append(
            f"{who}: {cand.mismatches}/{cand.numel} elements outside rtol={rules.rtol}, atol={rules.atol} "
            f"(allowed {rules.max_mismatch})"
        )
    if rules.min_cosine is not None and cand.cosine < rules.min_cosine:
        bad.append(f"{who}: cosine {cand.cosine:.6f} < {rules.min_cosine}")
    if rules.max_rel_l2 is not None and cand.rel_l2 > rules.max_rel_l2:
        bad.append(f"{who}: relative L2 {cand.rel_l2:.3e} > {rules.max_rel_l2:.3e}")
    if rules.max_abs is not None and cand.max_abs > rules.max_abs:
        bad.append(f"{who}: max abs error {cand.max_abs:.4g} > {rules.max_abs:.4g}")
    # relative to the baseline arm's own error against the oracle
    budget = rules.max_rel_l2_ratio * max(base.rel_l2, eps)
    if cand.rel_l2 > budget:
        bad.append(
            f"{who}: relative L2 {cand.rel_l2:.3e} > {rules.max_rel_l2_ratio:g} x max(baseline {base.rel_l2:.3e}, "
            f"eps {eps:.1e}) = {budget:.3e} (precision downgrade?)"
        )
    if rules.max_cosine_drop is not None and cand.cosine < base.cosine - rules.max_cosine_drop:
        bad.append(
            f"{who}: cosine {cand.cosine:.6f} dropped more than {rules.max_cosine_drop} below the baseline's {base.cosine:.6f}"
        )
    if rules.max_abs_ratio is not None:
        abs_budget = rules.max_abs_ratio * max(base.max_abs, eps)
        if cand.max_abs > abs_budget:
            bad.append(f"{who}: max abs error {cand.max_abs:.4g} > {rules.max_abs_ratio:g} x baseline's {base.max_abs:.4g}")
    return bad


def output_eps(t: "torch.Tensor") -> float:
    import torch

    if t.dtype.is_floating_point:
        return float(torch.finfo(t.dtype).eps)
    return 0.0


class OutputComparison(BaseModel):
    output: str
    oracle: OracleStats
    candidate: OutputMetrics  # run 1
    candidate_run2: OutputMetrics
    baseline: OutputMetrics
    runs_agree: bool
    run_disagreements: int  # elements differing between the two candidate runs (beyond tolerance)
    failures: list[str] = Field(default_factory=list)
    baseline_failures: list[str] = Field(default_factory=list)


class ParityCase(BaseModel):
    shape: str
    seed: int | None  # None for the secret seed until the report is final
    secret: bool = False
    perturbation: str | None = None
    status: Status
    failures: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    outputs: list[OutputComparison] = Field(default_factory=list)
    seconds: float = 0.0


class ParityResult(BaseModel):
    status: Status
    reason: str = ""
    rules: ParityRules | None = None
    cases: list[ParityCase] = Field(default_factory=list)


def _settle(device: Device, seconds: float) -> None:
    device.sync()
    if seconds > 0:
        time.sleep(seconds)
    device.sync()


def run_case(
    problem: Problem,
    dims: Mapping[str, int],
    shape_label: str,
    seed: int,
    candidate: contract.Builder,
    baseline: contract.Builder,
    device: Device,
    rules: ParityRules,
    perturbation: str | None = None,
    secret: bool = False,
    settle_s: float = 0.02,
) -> ParityCase:
    t0 = time.perf_counter()
    case = ParityCase(shape=shape_label, seed=None if secret else seed, secret=secret, perturbation=perturbation, status="PASS")
    try:
        _run_case(case, problem, dict(dims), seed, candidate, baseline, device, rules, perturbation, settle_s)
    except contract.CandidateError as exc:
        case.failures.append(str(exc))
    except _ProblemError as exc:
        case.errors.append(str(exc))
    case.status = "ERROR" if case.errors and not case.failures else ("FAIL" if case.failures else "PASS")
    case.seconds = time.perf_counter() - t0
    return case


_ProblemError = contract.ProblemError


def _run_case(
    case: ParityCase,
    problem: Problem,
    dims: dict[str, int],
    seed: int,
    candidate: contract.Builder,
    baseline: contract.Builder,
    device: Device,
    rules: ParityRules,
    perturbation: str | None,
    settle_s: float,
) -> None:
    dev = device.torch_device
    pristine = _fresh_inputs(problem, dims, seed, dev, perturbation)
    reference_copy = tensors.clone_tensors(pristine)  # proves nobody wrote the pristine set
    make_out: Callable[[], dict[str, Any]] = lambda: problem.make_outputs(dims, dev)  # noqa: E731

    cand1 = contract.bind("candidate run 1", candidate, pristine, make_out, device, poison_run=0)
    contract.run(cand1, device, pristine)
    snap1 = tensors.clone_tensors(cand1.outputs)

    oracle = _oracle(problem, pristine, dims, dev, set(cand1.outputs))
    try:
        base = contract.bind("baseline", baseline, pristine, make_out, device, poison_run=0)
        contract.run(base, device, pristine)
    except contract.CandidateError as exc:
        raise _ProblemError(f"the baseline arm failed: {exc}") from exc
    base_out = tensors.clone_tensors(base.outputs)
    if base.violations:
        raise _ProblemError("baseline arm broke the contract: " + "; ".join(base.violations))

    cand2 = contract.bind("candidate run 2", candidate, pristine, make_out, device, poison_run=1)
    contract.run(cand2, device, pristine)
    snap2 = tensors.clone_tensors(cand2.outputs)

    _settle(device, settle_s)
    for label, arm, snap in (("candidate run 1", cand1, snap1), ("candidate run 2", cand2, snap2)):
        late = tensors.changed_tensors(arm.outputs, snap)
        if late:
            case.failures.append(
                f"{label}: outputs {late} changed after launch returned and the device was synchronised "
                "(work left running on a thread or stream outside the timed window)"
            )
    case.failures += cand1.violations + cand2.violations
    case.notes += cand1.notes + cand2.notes
    if tensors.changed_tensors(pristine, reference_copy):
        raise _ProblemError("the pristine inputs changed during the case (oracle or harness wrote into them)")

    for name in sorted(oracle):
        o = oracle[name]
        stats = oracle_stats(o)
        if stats.nonfinite:
            raise _ProblemError(f"oracle output {name!r} has {stats.nonfinite} NaN/Inf elements")
        if stats.std < rules.min_oracle_std:
            raise _ProblemError(
                f"oracle output {name!r} is degenerate: std {stats.std:.3g} < min_oracle_std {rules.min_oracle_std:g} "
                "(a constant output would pass allclose; fix the problem's inputs for this shape/seed)"
            )
        c1, c2, b = snap1[name], snap2[name], base_out[name]
        m1 = output_metrics(c1, o, rules.rtol, rules.atol)
        m2 = output_metrics(c2, o, rules.rtol, rules.atol)
        mb = output_metrics(b, o, rules.rtol, rules.atol)
        unwritten = tensors.count_unwritten_pair(c1, c2)
        if unwritten:
            m1 = m1.model_copy(update={"unwritten": unwritten})
            m2 = m2.model_copy(update={"unwritten": unwritten})
        if rules.determinism_atol == 0.0 and rules.determinism_rtol == 0.0:
            agree = tensors.bitwise_equal(c1, c2)
            differing = 0 if agree else _count_bit_differences(c1, c2)
        else:
            differing = within_tolerance(c2, c1, rules.determinism_atol, rules.determinism_rtol)
            agree = differing == 0
        eps = output_eps(b)
        comp = OutputComparison(
            output=name, oracle=stats, candidate=m1, candidate_run2=m2, baseline=mb,
            runs_agree=agree, run_disagreements=differing,
        )
        comp.failures += judge(rules, m1, mb, eps, "candidate run 1")
        comp.failures += [f for f in judge(rules, m2, mb, eps, "candidate run 2") if f not in comp.failures]
        if not agree:
            tol = (
                "bitwise" if rules.determinism_atol == 0.0 and rules.determinism_rtol == 0.0
                else f"atol={rules.determinism_atol}, rtol={rules.determinism_rtol}"
            )
            comp.failures.append(
                f"the two candidate runs disagree on {differing} elements ({tol}): reads uninitialised or "
                "leftover memory, or is nondeterministic beyond the problem's declared tolerance"
            )
        if mb.nonfinite:
            raise _ProblemError(f"baseline output {name!r} has {mb.nonfinite} NaN/Inf/unwritten elements")
        base_rules = rules.model_copy(update={"max_rel_l2_ratio": math.inf})
        comp.baseline_failures = judge(base_rules, mb, mb, eps, "baseline")
        if comp.baseline_failures:
            case.notes.append(f"baseline arm itself misses the parity rules on {name!r}: " + "; ".join(comp.baseline_failures))
        case.failures += [f"{name}: {f}" for f in comp.failures]
        case.outputs.append(comp)


def _count_bit_differences(a: "torch.Tensor", b: "torch.Tensor") -> int:

    ab = tensors._bytes(a).reshape(a.numel(), -1) if a.numel() else tensors._bytes(a)
    bb = tensors._bytes(b).reshape(b.numel(), -1) if b.numel() else tensors._bytes(b)
    return int((ab != bb).any(dim=-1).sum().item()) if a.numel() else 0


def _fresh_inputs(problem: Problem, dims: dict[str, int], seed: int, dev: Any, perturbation: str | None) -> dict:
    try:
        inputs = problem.make_inputs(dims, seed, dev)
    except Exception as exc:
        raise _ProblemError(f"problem.make_inputs({dims}, seed={seed}) raised {type(exc).__name__}: {exc}") from exc
    bad = tensors.check_plain(inputs, "problem inputs", dev)
    if bad:
        raise _ProblemError("; ".join(bad))
    if perturbation is not None:
        try:
            inputs = problem.perturbations[perturbation](inputs)
        except Exception as exc:
            raise _ProblemError(f"perturbation {perturbation!r} raised {type(exc).__name__}: {exc}") from exc
        bad = tensors.check_plain(inputs, f"perturbed inputs ({perturbation})", dev)
        if bad:
            raise _ProblemError("; ".join(bad))
    return inputs


def _oracle(problem: Problem, pristine: Mapping[str, Any], dims: dict[str, int], dev: Any, names: set[str]) -> dict:
    try:
        out = problem.oracle(tensors.clone_tensors(pristine), dims)
    except Exception as exc:
        raise _ProblemError(f"problem.oracle raised {type(exc).__name__}: {exc}") from exc
    bad = tensors.check_plain(out, "oracle outputs", None)
    if bad:
        raise _ProblemError("; ".join(bad))
    if set(out) != names:
        raise _ProblemError(f"oracle returned outputs {sorted(out)}, make_outputs allocates {sorted(names)}")
    return out


def plan_cases(
    problem: Problem, seeds: list[int], secret_seed: int | None
) -> list[tuple[int, str | None, bool]]:
    """(seed, perturbation, secret) for one shape: visible seeds, the secret seed, and each
    perturbation applied to the secret seed (or the first visible seed without one)."""
    cases: list[tuple[int, str | None, bool]] = [(s, None, False) for s in seeds]
    if secret_seed is not None:
        cases.append((secret_seed, None, True))
    base_seed, base_secret = (secret_seed, True) if secret_seed is not None else (seeds[0], False)
    for name in problem.perturbations:
        cases.append((base_seed, name, base_secret))
    return cases


def run_parity(
    problem: Problem,
    shapes: list[tuple[str, Mapping[str, int]]],
    candidate: contract.Builder,
    baseline: contract.Builder,
    device: Device,
    rules: ParityRules,
    seeds: list[int],
    secret_seed: int | None,
    settle_s: float = 0.02,
    progress: Callable[[str], None] | None = None,
    stop_on_fail: bool = False,
) -> ParityResult:
    result = ParityResult(status="PASS", rules=rules)
    if not seeds:
        return ParityResult(status="ERROR", reason="no parity seeds", rules=rules)
    for label, dims in shapes:
        for seed, pert, secret in plan_cases(problem, seeds, secret_seed):
            if progress:
                what = "secret seed" if secret else f"seed {seed}"
                progress(f"parity {label} {what}" + (f" perturbation {pert}" if pert else ""))
            case = run_case(problem, dims, label, seed, candidate, baseline, device, rules, pert, secret, settle_s)
            result.cases.append(case)
            if stop_on_fail and case.status != "PASS":
                break
    statuses = {c.status for c in result.cases}
    if "FAIL" in statuses:
        result.status = "FAIL"
        first = next(c for c in result.cases if c.status == "FAIL")
        what = "secret seed" if first.secret else f"seed {first.seed}"
        result.reason = (
            f"{sum(c.status == 'FAIL' for c in result.cases)} of {len(result.cases)} cases failed; first "
            f"({first.shape} {what}{', ' + first.perturbation if first.perturbation else ''}): {first.failures[0]}"
        )
    elif "ERROR" in statuses:
        result.status = "ERROR"
        result.reason = "; ".join(e for c in result.cases for e in c.errors)[:2000]
    else:
        result.reason = f"{len(result.cases)} cases passed"
    return result

"""Parity: is the candidate's output the oracle's, as closely as the rules demand?

Everything here runs in the judge. Cases per shape: the problem's seeds, one secret seed
(``os.urandom`` in the judge), each perturbation on the secret seed's inputs, and the
hidden shapes' cases, shuffled together. Per case the judge draws the inputs, computes
the oracle (it never leaves the judge), and:

1. (before the candidate process exists) the baseline arm runs once on its own buffers;
   its figures against the oracle are kept, its output is not;
2. candidate run 1 from a fresh build on NaN-/sentinel-poisoned outputs, then run 2 from
   another fresh build with the *other* sentinel;
3. after a settle delay both runs' outputs must still be what they were when the arm
   said ``done`` (no deferred writes), the inputs bitwise unchanged, and the two runs
   bitwise equal (or within the problem's declared nondeterminism tolerance).

Figures for **both** arms are recorded against the oracle. Strict mode: zero allclose
mismatches (unless the problem allows some), cosine floor, relative-L2 / max-abs bounds when
given, and the candidate's relative L2 error at most ``k`` times the baseline's (precision
downgrade). Relaxed mode: bounds relative to the baseline's own figures plus absolute bounds.
NaN/Inf, unwritten elements and a degenerate oracle (spread below ``min_oracle_std``)
always fail.
"""
from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from verifiers.judge import tensors
from verifiers.judge.blame import Blame
from verifiers.judge.metrics import OracleStats, OutputMetrics, oracle_stats, output_metrics, within_tolerance
from verifiers.problem import ParitySpec, Problem

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from verifiers.judge.session import Arm, Session

Status = Literal["PASS", "FAIL", "SKIPPED", "ERROR"]
# The relative-L2 rule's floor as a fraction of the output dtype's eps. A correct kernel
# whose summation order differs from the oracle's lands near 5e-5 on bf16 outputs (rare
# one-ulp flips); dequantising to bf16 and running a bf16 GEMM lands near 3e-3 (2-4x the
# error of Hopper's fp8 MMA, ~9e-4). With the floor at eps (7.8e-3 for bf16) the latter
# passed against any baseline; at eps/64 (1.2e-4) only the baseline's own error sets the
# budget unless the baseline is exact.
RATIO_FLOOR_OF_EPS = 1.0 / 64


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


def parity_failures(rules: ParityRules, cand: OutputMetrics, base: OutputMetrics, eps: float, who: str = "candidate") -> list[str]:
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
    # relative to the baseline arm's own error against the oracle; the floor only matters
    # when the baseline is (nearly) exact, and is a few ulp flips per thousand elements
    floor = eps * RATIO_FLOOR_OF_EPS
    budget = rules.max_rel_l2_ratio * max(base.rel_l2, floor)
    if cand.rel_l2 > budget:
        bad.append(
            f"{who}: relative L2 {cand.rel_l2:.3e} > {rules.max_rel_l2_ratio:g} x max(baseline {base.rel_l2:.3e}, "
            f"eps/{1 / RATIO_FLOOR_OF_EPS:g} = {floor:.1e}) = {budget:.3e} (precision downgrade?)"
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



# ---------------------------------------------------------------------- the stage


@dataclass(frozen=True)
class CasePlan:
    """One parity case: which shape (a visible label or ``hidden-N``), which inputs."""

    label: str
    seed: int
    perturbation: str | None
    secret: bool

    @property
    def key(self) -> str:
        return f"{self.label}|{self.seed}|{self.perturbation}|{self.secret}"


def plan_cases(problem: Problem, seeds: list[int], secret_seed: int | None) -> list[tuple[int, str | None, bool]]:
    """(seed, perturbation, secret) for one shape: visible seeds, the secret seed, and each
    perturbation applied to the secret seed (or the first visible seed without one)."""
    cases: list[tuple[int, str | None, bool]] = [(s, None, False) for s in seeds]
    if secret_seed is not None:
        cases.append((secret_seed, None, True))
    base_seed, base_secret = (secret_seed, True) if secret_seed is not None else (seeds[0], False)
    for name in problem.perturbations:
        cases.append((base_seed, name, base_secret))
    return cases


def plan_for(problem: Problem, labels: list[str], seeds: list[int], secret_seed: int | None,
             rng: random.Random) -> list[CasePlan]:
    """Every case of every label, in an order drawn from the judge's secret stream."""
    plans = [CasePlan(label, seed, pert, secret) for label in labels
             for seed, pert, secret in plan_cases(problem, seeds, secret_seed)]
    rng.shuffle(plans)
    return plans


@dataclass
class BaselineRef:
    """What the judge keeps of the baseline's run on a case: its figures, not its output."""

    oracle: dict[str, OracleStats]
    metrics: dict[str, OutputMetrics]
    error: str | None = None


def _settle(session: "Session", seconds: float) -> None:
    session.device.sync()
    if seconds > 0:
        time.sleep(seconds)
    session.device.sync()


def _degenerate(oracle: dict, rules: ParityRules) -> str | None:
    for name, o in sorted(oracle.items()):
        stats = oracle_stats(o)
        if stats.nonfinite:
            return f"oracle output {name!r} has {stats.nonfinite} NaN/Inf elements"
        if stats.std < rules.min_oracle_std:
            return (f"oracle output {name!r} is degenerate: std {stats.std:.3g} < min_oracle_std "
                    f"{rules.min_oracle_std:g} (a constant output would pass allclose; fix the problem's inputs)")
    return None


def baseline_ref(session: "Session", arm: "Arm", plan: CasePlan, rules: ParityRules) -> BaselineRef:
    """Run the trusted baseline once on the case; keep its figures against the oracle."""

    try:
        values = session.values_for(plan.seed, plan.perturbation)
        oracle = session.oracle(values)
        bad = _degenerate(oracle, rules)
        if bad:
            return BaselineRef({}, {}, bad)
        bound = session.bind(arm, values, poison_run=0)
        try:
            session.call(bound)
            changed = session.inputs_changed(bound)
            outs = {n: t.clone() for n, t in bound.buffers.outputs.items()}
        finally:
            session.release(bound)
    except Blame as exc:
        return BaselineRef({}, {}, f"the baseline arm failed: {exc.reason}" if exc.arm else exc.reason)
    if changed:
        return BaselineRef({}, {}, f"the baseline arm modified its inputs {changed}")
    if set(outs) != set(oracle):
        return BaselineRef({}, {}, f"oracle returned outputs {sorted(oracle)}, make_outputs allocates {sorted(outs)}")
    metrics = {n: output_metrics(outs[n], oracle[n], rules.rtol, rules.atol) for n in oracle}
    for name, m in metrics.items():
        if m.nonfinite:
            return BaselineRef({}, {}, f"baseline output {name!r} has {m.nonfinite} NaN/Inf/unwritten elements")
    return BaselineRef({n: oracle_stats(o) for n, o in oracle.items()}, metrics)


def candidate_case(session: "Session", arm: "Arm", plan: CasePlan, ref: BaselineRef, rules: ParityRules,
                   settle_s: float) -> ParityCase:

    t0 = time.perf_counter()
    case = ParityCase(shape=plan.label, seed=None if plan.secret else plan.seed, secret=plan.secret,
                      perturbation=plan.perturbation, status="PASS")
    if ref.error is not None:
        case.errors.append(ref.error)
    else:
        try:
            _candidate_runs(case, session, arm, plan, ref, rules, settle_s)
        except Blame as exc:
            (case.failures if exc.candidate else case.errors).append(exc.reason)
    case.status = "ERROR" if case.errors and not case.failures else ("FAIL" if case.failures else "PASS")
    case.seconds = time.perf_counter() - t0
    return case


def _candidate_runs(case: ParityCase, session: "Session", arm: "Arm", plan: CasePlan, ref: BaselineRef,
                    rules: ParityRules, settle_s: float) -> None:
    values = session.values_for(plan.seed, plan.perturbation)
    oracle = session.oracle(values)
    runs = []
    try:
        for run in (0, 1):
            bound = session.bind(arm, values, poison_run=run)
            runs.append(bound)
            session.call(bound)
        snaps = [{n: t.clone() for n, t in b.buffers.outputs.items()} for b in runs]
        _settle(session, settle_s)
        for run, (bound, snap) in enumerate(zip(runs, snaps)):
            late = tensors.changed_tensors(bound.buffers.outputs, snap)
            if late:
                case.failures.append(
                    f"candidate run {run + 1}: outputs {late} changed after the arm reported the call done "
                    "(work left running outside the call)")
            changed = session.inputs_changed(bound)
            if changed:
                case.failures.append(f"candidate run {run + 1}: launch modified its inputs {changed} (inputs must be read-only)")
    finally:
        for bound in runs:
            session.release(bound)
    for name in sorted(oracle):
        o = oracle[name]
        c1, c2 = snaps[0][name], snaps[1][name]
        m1 = output_metrics(c1, o, rules.rtol, rules.atol)
        m2 = output_metrics(c2, o, rules.rtol, rules.atol)
        unwritten = tensors.count_unwritten_pair(c1, c2)
        if unwritten:
            m1 = m1.model_copy(update={"unwritten": unwritten})
            m2 = m2.model_copy(update={"unwritten": unwritten})
        if rules.determinism_atol == 0.0 and rules.determinism_rtol == 0.0:
            agree = tensors.bitwise_equal(c1, c2)
            differing = 0 if agree else tensors.count_bit_differences(c1, c2)
        else:
            differing = within_tolerance(c2, c1, rules.determinism_atol, rules.determinism_rtol)
            agree = differing == 0
        mb = ref.metrics[name]
        eps = output_eps(c1)
        comp = OutputComparison(output=name, oracle=ref.oracle[name], candidate=m1, candidate_run2=m2, baseline=mb,
                                runs_agree=agree, run_disagreements=differing)
        comp.failures += parity_failures(rules, m1, mb, eps, "candidate run 1")
        comp.failures += [f for f in parity_failures(rules, m2, mb, eps, "candidate run 2") if f not in comp.failures]
        if not agree:
            tol = ("bitwise" if rules.determinism_atol == 0.0 and rules.determinism_rtol == 0.0
                   else f"atol={rules.determinism_atol}, rtol={rules.determinism_rtol}")
            comp.failures.append(
                f"the two candidate runs disagree on {differing} elements ({tol}): reads uninitialised or "
                "leftover memory, or is nondeterministic beyond the problem's declared tolerance")
        comp.baseline_failures = parity_failures(rules.model_copy(update={"max_rel_l2_ratio": math.inf}), mb, mb, eps, "baseline")
        if comp.baseline_failures:
            case.notes.append(f"baseline arm itself misses the parity rules on {name!r}: " + "; ".join(comp.baseline_failures))
        case.failures += [f"{name}: {f}" for f in comp.failures]
        case.outputs.append(comp)


def summarize(cases: list[ParityCase], rules: ParityRules) -> ParityResult:
    result = ParityResult(status="PASS", rules=rules, cases=cases)
    if not cases:
        return ParityResult(status="ERROR", reason="no parity cases", rules=rules)
    statuses = {c.status for c in cases}
    if "FAIL" in statuses:
        result.status = "FAIL"
        first = next(c for c in cases if c.status == "FAIL")
        what = "secret seed" if first.secret else f"seed {first.seed}"
        result.reason = (
            f"{sum(c.status == 'FAIL' for c in cases)} of {len(cases)} cases failed; first "
            f"({first.shape} {what}{', ' + first.perturbation if first.perturbation else ''}): {first.failures[0]}")
    elif "ERROR" in statuses:
        result.status = "ERROR"
        result.reason = "; ".join(dict.fromkeys(e for c in cases for e in c.errors))[:2000]
    else:
        result.reason = f"{len(cases)} cases passed"
    return result

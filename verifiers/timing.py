"""Same-session interleaved timing with an A/A control.

Protocol (one shape, one process):

* every arm is built over ``rotating_sets`` buffer sets (its own clones), and the harness
  keeps ``rotating_sets + 1`` value sets with their oracle outputs. At the start of every
  round the values of each set's non-static inputs are overwritten *in place* with another
  value set (same pointers, new values) and the outputs are poisoned; after the round each
  set's outputs are re-checked against the oracle of the values it held. A result cache
  keyed by pointer or shape returns stale outputs and fails here;
* warm-up per arm: at least ``warmup_ms`` and ``warmup_calls`` calls;
* an **A/A** control first (the baseline against a second build of itself) measures the
  session's noise; then A/B (baseline against candidate);
* each comparison runs ``rounds`` rounds in the order ABBA, BAAB, ABBA, ...; each letter is a
  block of ``k`` calls; every call is preceded by a write of a buffer larger than twice the
  last-level cache and rotates to the arm's next buffer set;
* a call is timed by device events on CUDA/ROCm, the end event recorded after a
  device-wide synchronise (work on any stream counts), ``perf_counter_ns`` on CPU; host wall
  time of every call is kept for the cross-check;
* per round the median of each arm; speedup = median over rounds of baseline/candidate,
  with a seeded percentile-bootstrap 95 % interval;
* verdict FASTER when the interval's low end exceeds 1 + floor, SLOWER when its high end is
  below 1 - floor, else NO_DIFFERENCE; floor = max(A/A spread, declared floor).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from verifiers import contract, integrity, stats, tensors
from verifiers.bounds import PhysicalBound
from verifiers.device import CallTimer, Device, Flusher
from verifiers.metrics import OutputMetrics, output_metrics
from verifiers.parity import ParityRules, judge, output_eps
from verifiers.problem import Problem

Status = Literal["PASS", "FAIL", "SKIPPED", "ERROR"]
PLATFORM_NOISE_FLOOR = {"cpu": 0.05, "cuda": 0.01, "rocm": 0.01}


class TimingConfig(BaseModel):
    rounds: int = Field(12, ge=5)
    aa_rounds: int | None = Field(None, ge=5)
    block_ms: float = Field(20.0, gt=0)
    min_calls_per_block: int = Field(3, ge=1)
    max_calls_per_block: int = Field(500, ge=1)
    warmup_ms: float = Field(25.0, ge=25.0)
    warmup_calls: int = Field(10, ge=10)
    rotating_sets: int = Field(3, ge=2)
    bootstrap_samples: int = Field(4000, ge=200)
    bootstrap_seed: int = 20261130
    confidence: float = Field(0.95, gt=0.5, lt=1.0)
    noise_floor: float | None = Field(None, ge=0.0)
    host_gap_tolerance_ms: float = 0.1


class ArmRoundStats(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")  # inf/NaN survive a JSON round trip

    n: int
    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    max_ms: float
    host_median_ms: float


class RoundResult(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")  # inf/NaN survive a JSON round trip

    index: int
    order: str  # e.g. "ABBA"
    a: ArmRoundStats
    b: ArmRoundStats
    ratio: float  # a.median / b.median: > 1 means arm b is faster


class Comparison(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")  # inf/NaN survive a JSON round trip

    name: Literal["A/A", "A/B"]
    arm_a: str
    arm_b: str
    calls_per_block: int
    rounds: list[RoundResult] = Field(default_factory=list)
    speedup: float | None = None  # median of per-round ratios
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float = 0.95
    bootstrap_samples: int = 0
    bootstrap_seed: int = 0
    median_a_ms: float | None = None
    median_b_ms: float | None = None
    host_gap_a_ms: float | None = None  # median(host wall - timed) per call
    host_gap_b_ms: float | None = None


class WarmupInfo(BaseModel):
    arm: str
    calls: int
    elapsed_ms: float
    per_call_ms: float  # timed
    wall_per_call_ms: float  # flush + call + bookkeeping, what a block really costs


class TimingResult(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")  # inf/NaN survive a JSON round trip

    status: Status
    reason: str = ""
    timer: str = ""
    flush_bytes: int = 0
    flush_required_bytes: int = 0
    rotating_sets: int = 0
    value_sets: int = 0
    changing_inputs: list[str] = Field(default_factory=list)
    warmup: list[WarmupInfo] = Field(default_factory=list)
    aa: Comparison | None = None
    ab: Comparison | None = None
    declared_noise_floor: float | None = None
    aa_spread: float | None = None
    noise_floor: float | None = None
    verdict: stats.Verdict | None = None
    bound: PhysicalBound | None = None
    failures: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


@dataclass
class TimedArm:
    label: str
    is_baseline: bool
    sets: list[contract.BoundArm]
    values: list[int]  # value set currently held by each buffer set
    cursor: int = 0
    base_metrics: dict[tuple[int, str], OutputMetrics] = field(default_factory=dict)

    def next_launch(self) -> Callable[[], None]:
        launch = self.sets[self.cursor % len(self.sets)].launch
        self.cursor += 1
        return launch


class TimingSession:
    """Everything one shape's timing needs: value sets, oracles, arms, flush, timer."""

    def __init__(
        self,
        problem: Problem,
        dims: Mapping[str, int],
        device: Device,
        flusher: Flusher,
        rules: ParityRules,
        config: TimingConfig,
        value_seeds: list[int],
    ) -> None:
        self.problem, self.dims, self.device, self.flusher = problem, dict(dims), device, flusher
        self.rules, self.config = rules, config
        dev = device.torch_device
        if len(value_seeds) < config.rotating_sets + 1:
            raise ValueError("need rotating_sets + 1 value seeds")
        first = problem.make_inputs(self.dims, value_seeds[0], dev)
        static = [n for n in problem.static_inputs if n in first]
        self.pristine: list[dict[str, Any]] = []
        for i, seed in enumerate(value_seeds[: config.rotating_sets + 1]):
            values = first if i == 0 else problem.make_inputs(self.dims, seed, dev)
            bad = tensors.check_plain(values, "problem inputs", dev)
            if bad:
                raise contract.ProblemError("; ".join(bad))
            # static inputs (weights build may preprocess) keep one value across every set
            self.pristine.append({**values, **{n: first[n] for n in static}})
        self.changing = [n for n in first if n not in static]
        self.oracles = [problem.oracle(tensors.clone_tensors(p), self.dims) for p in self.pristine]
        self.baseline_metrics: dict[tuple[int, str], OutputMetrics] = {}
        self.threads_before = integrity.python_threads()
        self.failures: list[str] = []

    # -- arms ------------------------------------------------------------------------
    def add_arm(self, label: str, builder: contract.Builder, is_baseline: bool) -> TimedArm:
        sets = []
        for j in range(self.config.rotating_sets):
            make_out = lambda: self.problem.make_outputs(self.dims, self.device.torch_device)  # noqa: E731
            sets.append(contract.bind(f"{label} set {j}", builder, self.pristine[j], make_out, self.device))
        arm = TimedArm(label, is_baseline, sets, values=list(range(len(sets))))
        for s in sets:
            if s.violations:
                self.failures += s.violations
        return arm

    def initial_check(self, arm: TimedArm) -> list[str]:
        """One untimed call per set, checked against the oracle (baselines first)."""
        found = []
        for j, s in enumerate(arm.sets):
            found += contract.run(s, self.device, self.pristine[arm.values[j]])
        found += self._check_outputs(arm)
        return found

    def _check_outputs(self, arm: TimedArm) -> list[str]:
        found = []
        for j, s in enumerate(arm.sets):
            p = arm.values[j]
            changed = tensors.changed_tensors(s.inputs, self.pristine[p])
            if changed:
                found.append(f"{s.label}: inputs {changed} modified during timing")
            for name, oracle in self.oracles[p].items():
                out = s.outputs[name]
                m = output_metrics(out, oracle, self.rules.rtol, self.rules.atol)
                eps = output_eps(out)
                if arm.is_baseline:
                    self.baseline_metrics.setdefault((p, name), m)
                    bad = judge(self.rules.model_copy(update={"max_rel_l2_ratio": math.inf}), m, m, eps, s.label)
                    bad = [b for b in bad if "NaN" in b or "never written" in b]
                else:
                    base = self.baseline_metrics.get((p, name))
                    if base is None:
                        raise RuntimeError("baseline arm must be checked before other arms")
                    bad = judge(self.rules, m, base, eps, s.label)
                found += [
                    f"timed output {name!r} wrong for value set {p}: {b} "
                    "(result cached by pointer/shape, or launch does not read its inputs at call time)"
                    for b in bad
                ]
        return found

    def _rotate(self, arm: TimedArm, round_index: int) -> None:
        n_values = len(self.pristine)
        for j, s in enumerate(arm.sets):
            if self.changing:
                p = (round_index + j) % n_values
                tensors.copy_into(s.inputs, self.pristine[p], self.changing)
                arm.values[j] = p
            tensors.poison(s.outputs, 0)
        self.device.sync()

    # -- measuring -------------------------------------------------------------------
    def _time_block(self, arm: TimedArm, calls: int) -> tuple[list[float], list[float]]:
        timer = CallTimer(self.device, calls)
        for _ in range(calls):
            launch = arm.next_launch()
            self.flusher.flush()
            try:
                timer.time_call(launch)
            except BaseException as exc:
                err = contract.ProblemError if arm.is_baseline else contract.CandidateError
                raise err(f"{arm.label}: launch raised {type(exc).__name__}: {exc}") from exc
        times, host = timer.results_ms()
        alive = integrity.new_threads(self.threads_before)
        if alive:
            self.failures.append(
                f"{arm.label}: Python threads alive during timing {sorted(alive.values())} (work outside the timed window)"
            )
        return times, host

    def warmup(self, arm: TimedArm) -> WarmupInfo:
        ns = self.device.perf_counter_ns
        t0 = ns()
        times: list[float] = []
        while True:
            block, _ = self._time_block(arm, self.config.warmup_calls)
            times += block
            elapsed_ms = (ns() - t0) / 1e6
            if elapsed_ms >= self.config.warmup_ms and len(times) >= self.config.warmup_calls:
                break
        tail = times[len(times) // 2 :]
        return WarmupInfo(arm=arm.label, calls=len(times), elapsed_ms=elapsed_ms, per_call_ms=stats.median(tail),
                          wall_per_call_ms=elapsed_ms / len(times))

    def calls_per_block(self, wall_per_call_ms: list[float]) -> int:
        """Calls per block so a block lasts about ``block_ms`` of wall time (flush included)."""
        slowest = max(max(wall_per_call_ms), 1e-6)
        k = math.ceil(self.config.block_ms / slowest)
        low = max(self.config.min_calls_per_block, math.ceil(self.config.rotating_sets / 2))
        return int(min(max(k, low), max(self.config.max_calls_per_block, low)))

    def compare(self, name: Literal["A/A", "A/B"], a: TimedArm, b: TimedArm, rounds: int, k: int, round_offset: int) -> Comparison:
        cfg = self.config
        comp = Comparison(name=name, arm_a=a.label, arm_b=b.label, calls_per_block=k,
                          confidence=cfg.confidence, bootstrap_samples=cfg.bootstrap_samples,
                          bootstrap_seed=cfg.bootstrap_seed)
        gaps_a: list[float] = []
        gaps_b: list[float] = []
        for r in range(rounds):
            order = "ABBA" if r % 2 == 0 else "BAAB"
            for arm in (a, b):
                self._rotate(arm, round_offset + r)
            samples: dict[str, tuple[list[float], list[float]]] = {"A": ([], []), "B": ([], [])}
            for letter in order:
                arm = a if letter == "A" else b
                times, host = self._time_block(arm, k)
                samples[letter][0].extend(times)
                samples[letter][1].extend(host)
            for arm in (a, b):
                self.failures += [f"{name} round {r}: {m}" for m in self._check_outputs(arm)]
            sa, sb = _round_stats(*samples["A"]), _round_stats(*samples["B"])
            gaps_a += [h - t for t, h in zip(*samples["A"])]
            gaps_b += [h - t for t, h in zip(*samples["B"])]
            comp.rounds.append(RoundResult(index=r, order=order, a=sa, b=sb, ratio=sa.median_ms / sb.median_ms))
        ratios = [x.ratio for x in comp.rounds]
        comp.speedup = stats.median(ratios)
        comp.ci_low, comp.ci_high = stats.bootstrap_median_ci(ratios, cfg.bootstrap_samples, cfg.bootstrap_seed, cfg.confidence)
        comp.median_a_ms = stats.median([x.a.median_ms for x in comp.rounds])
        comp.median_b_ms = stats.median([x.b.median_ms for x in comp.rounds])
        comp.host_gap_a_ms = stats.median(gaps_a)
        comp.host_gap_b_ms = stats.median(gaps_b)
        return comp


def _round_stats(times: list[float], host: list[float]) -> ArmRoundStats:
    q1, q3 = stats.quartiles(times)
    return ArmRoundStats(
        n=len(times), median_ms=stats.median(times), q1_ms=q1, q3_ms=q3,
        min_ms=min(times), max_ms=max(times), host_median_ms=stats.median(host),
    )


def run_timing(
    session: TimingSession,
    baseline: contract.Builder,
    candidate: contract.Builder,
    baseline_label: str,
    candidate_label: str,
    progress: Callable[[str], None] | None = None,
) -> TimingResult:
    """Build every arm's buffer sets, check them once, warm up, then the A/A control and A/B."""
    cfg, device = session.config, session.device
    result = TimingResult(
        status="PASS",
        timer="device events (end after device synchronise)" if device.is_gpu else "host perf_counter_ns",
        flush_bytes=session.flusher.nbytes,
        flush_required_bytes=session.flusher.required_bytes,
        rotating_sets=cfg.rotating_sets,
        value_sets=len(session.pristine),
        changing_inputs=session.changing,
    )
    if session.flusher.nbytes < session.flusher.required_bytes:
        result.notes.append(
            f"flush buffer {session.flusher.nbytes} bytes is below 2x the last-level cache "
            f"({session.flusher.required_bytes} bytes): caches may stay warm between calls"
        )
    if not session.changing:
        result.notes.append("every input is declared static: values are not changed between rounds")
    say = progress or (lambda _m: None)
    try:
        base_a = session.add_arm(f"{baseline_label} (A)", baseline, is_baseline=True)
        base_a2 = session.add_arm(f"{baseline_label} (A')", baseline, is_baseline=True)
    except (contract.CandidateError, contract.ProblemError) as exc:
        return result.model_copy(update={"status": "ERROR", "reason": f"baseline arm: {exc}"})
    try:
        cand = session.add_arm(candidate_label, candidate, is_baseline=False)
    except contract.CandidateError as exc:
        return result.model_copy(update={"status": "FAIL", "reason": str(exc)})
    for arm in (base_a, base_a2):
        found = session.initial_check(arm)
        if found:
            return result.model_copy(update={"status": "ERROR", "reason": "baseline arm: " + "; ".join(found[:5])})
    try:
        result.failures += session.initial_check(cand)
    except contract.CandidateError as exc:
        return result.model_copy(update={"status": "FAIL", "reason": str(exc)})
    try:
        for arm in (base_a, base_a2, cand):
            say(f"warm-up {arm.label}")
            result.warmup.append(session.warmup(arm))
        k = session.calls_per_block([w.wall_per_call_ms for w in result.warmup])
        say(f"A/A control: {cfg.aa_rounds or cfg.rounds} rounds x 4 blocks x {k} calls")
        result.aa = session.compare("A/A", base_a, base_a2, cfg.aa_rounds or cfg.rounds, k, round_offset=0)
        say(f"A/B: {cfg.rounds} rounds x 4 blocks x {k} calls")
        result.ab = session.compare("A/B", base_a, cand, cfg.rounds, k, round_offset=cfg.aa_rounds or cfg.rounds)
    except contract.CandidateError as exc:
        return result.model_copy(update={"status": "FAIL", "reason": str(exc)})
    except contract.ProblemError as exc:
        return result.model_copy(update={"status": "ERROR", "reason": str(exc)})
    result.failures += session.failures
    result.declared_noise_floor = cfg.noise_floor if cfg.noise_floor is not None else PLATFORM_NOISE_FLOOR[device.platform]
    result.aa_spread = stats.aa_spread(result.aa.ci_low, result.aa.ci_high)
    result.noise_floor = max(result.declared_noise_floor, result.aa_spread)
    result.verdict = stats.decide(result.ab.ci_low, result.ab.ci_high, result.noise_floor)
    gap = _host_gap_failures(result.ab, cfg.host_gap_tolerance_ms)
    if device.is_gpu:
        result.failures += gap
    else:  # CPU: wall minus CPU time is mostly preemption on a loaded box, not evidence
        result.notes += [f"{g} (CPU: informational; preemption inflates wall time)" for g in gap]
    if result.failures:
        result.status = "FAIL"
        result.reason = f"{len(result.failures)} timing checks failed: {result.failures[0]}"
    else:
        result.reason = (
            f"speedup {result.ab.speedup:.4f} [{result.ab.ci_low:.4f}, {result.ab.ci_high:.4f}] "
            f"vs floor {result.noise_floor:.4f} -> {result.verdict}"
        )
    return result


def _host_gap_failures(ab: Comparison, tolerance_ms: float) -> list[str]:
    """Host wall time minus timed time should be about the same for both arms; a candidate
    whose calls keep the host waiting much longer than they are timed has work outside."""
    if ab.host_gap_a_ms is None or ab.host_gap_b_ms is None or ab.median_b_ms is None:
        return []
    excess = ab.host_gap_b_ms - ab.host_gap_a_ms
    limit = max(tolerance_ms, 0.5 * ab.median_b_ms)
    if excess > limit:
        return [
            f"host wall time exceeds the timed time by {ab.host_gap_b_ms:.4g} ms per call for the candidate vs "
            f"{ab.host_gap_a_ms:.4g} ms for the baseline: work outside the timed window"
        ]
    return []

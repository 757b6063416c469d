"""Interleaved timing across arm processes, every call checked, two clocks, a timer floor.

Protocol (one shape; the judge drives, each arm process only runs what it is told):

* each arm builds over ``rotating_sets`` buffer sets. Before a block, with the arm
  suspended, the judge draws fresh values for each of its calls (``Problem.refresh_inputs``,
  or new ``make_inputs`` values from its secret stream) into its *private* memory. Before
  **every** call it writes that call's values into the changing inputs, poisons the outputs
  and flushes the caches (a buffer larger than twice the last-level cache, written by the
  judge), all outside the timed window; so an arm never holds the values of a call it has
  not been asked to make (no batching, pipelining or pre-work of coming calls). After every
  call it reads a sample of output elements drawn afterwards and flags (on the device)
  whether the inputs still hold their values; once the block is over and the arm suspended,
  every call is checked against the oracle (``verifiers.judge.checks``);
* **solo phase**, before any candidate process exists: the baseline (A) and a second
  baseline process (A') warm up, the timer floor is measured (a no-op launch through the
  same path), and the A/A control runs. A's median here is its *solo* figure;
* **A/B phase**: the candidate (C) warms up, then A and C alternate in ABBA / BAAB
  rounds. Each letter is a block of ``k`` calls; the arm not being timed is suspended
  (SIGSTOP) after its work was synchronised, so it can neither run nor watch;
* two clocks per call: the arm's (device events around ``launch()`` and a device-wide
  synchronise on GPU; process CPU time on CPU) and the judge's (its wall clock around
  the request on GPU; the arm's CPU time read from the judge's process on CPU, from
  before the preparation to the answer). The comparison is made on both. Each per-round
  ratio uses medians minus the timer floor of that clock, measured in the baseline's
  process. FASTER / SLOWER need both clocks to agree; their per-call difference must be
  the same for every arm within ``clock_gap`` (else the arm's clock lies: FAIL);
* speedup = median over rounds of baseline / candidate, with a seeded percentile
  bootstrap 95 % interval; floor = max(A/A spread, declared floor) per clock;
* a baseline that ran slower in A/B than in its solo phase by more than the floor, by
  enough to change the verdict, fails the run (sabotage); on GPUs, the judge's own
  preparation running slower while the candidate is resident than in the solo phase
  means something on the device competes (FAIL); another process with a context on the
  device makes the timing INCONCLUSIVE (``verifiers.hw.neighbours``).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from verifiers.hw.bounds import PhysicalBound
from verifiers.hw.boxload import BoxLoad, BoxLoadReading
from verifiers.judge import checks, stats
from verifiers.judge.blame import Blame
from verifiers.judge.gate import LATE_GROW, Pad, gated_calls
from verifiers.judge.metrics import OutputMetrics
from verifiers.judge.parity import ParityRules, output_eps, parity_failures

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from verifiers.hw.boxload import BoxLoad
    from verifiers.hw.neighbours import NeighbourWatch
    from verifiers.judge.session import Arm, BoundSet, CallRecord, CallTiming, Session, TreeWatch

Status = Literal["PASS", "FAIL", "SKIPPED", "ERROR"]
PLATFORM_NOISE_FLOOR = {"cpu": 0.05, "cuda": 0.01, "rocm": 0.01}
CLOCK_GAP_MS = {"cpu": 0.5, "cuda": 0.1, "rocm": 0.1}
DRIFT_FAIL = 0.5  # see TimingStage._drift
DRIFT_HARD = 1.0  # ... and beyond this (twice as slow as alone) whatever the verdict
AT_FLOOR = 3.0  # ... unless the solo calls are shorter than this x the timer floor
PREP_GAP_MS, PREP_GAP_REL = 0.02, 0.10  # see TimingStage._prep_check
PREP_NOISE_FACTOR, PREP_AA_REL = 2.0, 0.5
AA_GAP_FACTOR = 2.0  # the A/B's clock gaps may differ by twice what the A/A's two baseline processes did
SLOW_CALL_MS = 100.0  # calls at least this slow get blocks of 2 calls by default (see calls_per_block)
WARMUP_PROBE_CALLS = 3  # the first warm-up batch: its cost per call sizes the next ones
TIMED_ARMS = 3  # A, A' and the candidate hold buffer sets at one shape
MEMORY_SHARE = 0.5  # of the device's free memory, for their sets (staging, arms' own work: the rest)
GROSS = 4.0  # a check failed by more than this x its bound is a FAIL even on a loaded box


class TimingConfig(BaseModel):
    rounds: int = Field(12, ge=5)
    aa_rounds: int | None = Field(None, ge=5)
    block_ms: float = Field(20.0, gt=0)
    min_calls_per_block: int | None = Field(None, ge=1, description="default: 3, or 2 for calls over SLOW_CALL_MS")
    max_calls_per_block: int = Field(500, ge=1)
    warmup_ms: float = Field(25.0, ge=25.0)
    warmup_calls: int = Field(10, ge=10)
    warmup_max_ms: float = Field(3000.0, ge=25.0, description="warm-up ends here even if calls still get faster")
    warmup_steady: float = Field(0.9, gt=0, le=1.0, description="warm until a batch is no faster than this x the last")
    warmup_batch_ms: float = Field(500.0, gt=0, description="a warm-up batch after the first holds warmup_calls calls "
                                                            "or this much time of them, whichever is less (slow calls)")
    rotating_sets: int = Field(3, ge=1)
    bootstrap_samples: int = Field(4000, ge=200)
    bootstrap_seed: int = 20261130
    confidence: float = Field(0.95, gt=0.5, lt=1.0)
    noise_floor: float | None = Field(None, ge=0.0)
    floor_calls: int = Field(40, ge=5, description="no-op calls that measure the timer floor")
    clock_gap_ms: float | None = Field(None, gt=0, description="allowed per-call clock disagreement (default per platform)")
    clock_gap_rel: float = Field(0.05, ge=0, description="... or this fraction of the baseline's call, if larger")
    call_timeout_s: float = Field(30.0, gt=0, description="one timed call must answer within this")
    stage_bytes: int = Field(2 << 30, ge=1, description="judge memory for one block's fresh values (caps calls per block)")
    gpu_protocol: Literal["gated", "per_call", "chained"] = "gated"
    gate_pad_us: float = Field(100.0, ge=0, description="gated: the judge's device slack before each call's ready")
    warm_burst_ms: float | None = Field(None, ge=0, description="judge device work before every block, keeping clocks "
                                                                "up across the gaps (default: 1 ms on GPUs, 0 on CPU)")
    ab_baselines: int = Field(1, ge=1, le=2, description="A/B rounds alternate between this many baseline processes "
                                                         "(2: A and A', so their per-process bias averages)")
    late_limit: float = Field(0.2, ge=0, le=1, description="gated: a trusted arm with more late calls than this "
                                                           "fraction leaves the timing INCONCLUSIVE")


class ArmRoundStats(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")  # inf/NaN survive a JSON round trip

    n: int
    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    max_ms: float
    host_median_ms: float  # the judge's wall clock around the request
    prep_median_ms: float | None = None  # the judge's preparation before each call


class RoundResult(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")  # inf/NaN survive a JSON round trip

    index: int
    order: str  # e.g. "ABBA"
    a: ArmRoundStats
    b: ArmRoundStats
    ratio: float  # (a.median - floor) / (b.median - floor): > 1 means arm b is faster


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
    median_a_ms: float | None = None  # medians as measured (the timer floor not subtracted)
    median_b_ms: float | None = None
    host_gap_a_ms: float | None = None  # median(judge's clock - arm's clock) per call
    host_gap_b_ms: float | None = None
    clock: str = ""  # which clock these figures are on
    timer_floor_ms: float | None = None  # subtracted from both medians in each ratio


class WarmupInfo(BaseModel):
    arm: str
    calls: int
    elapsed_ms: float
    per_call_ms: float  # timed
    wall_per_call_ms: float  # preparation + call + check, what a block really costs
    batches: int = 1  # of warmup_calls calls each, until the cost per call held steady


class ClockCheck(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")

    comparison: str
    arm: str
    gap_ms: float  # median over calls of (judge's clock - arm's clock)
    reference_gap_ms: float  # the same for the baseline arm of the comparison
    bound_ms: float
    prep_ms: float | None = None  # median of the judge's preparation before this arm's calls
    ok: bool = True


class SampledParity(BaseModel):
    """The parity rules on every checked call's sampled elements, pooled per output."""

    arm: str
    calls: int
    samples_per_output: int
    outputs: dict[str, OutputMetrics] = Field(default_factory=dict)
    failures: list[str] = Field(default_factory=list)


class TimingResult(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")  # inf/NaN survive a JSON round trip

    status: Status
    reason: str = ""
    timer: str = ""
    protocol: str = ""  # how calls reached the device: "gated" / "chained" / "per_call" (GPU), "per_call" (CPU)
    late_calls: dict[str, int] = Field(default_factory=dict)  # gated: calls with host time inside a clock, per arm
    gate_pad_us: float | None = None  # gated: the slack pad at the end of the run
    warm_burst_ms: float = 0.0
    box_load: "BoxLoadReading | None" = None  # CPU used by processes outside the verifier while the arms were timed
    flush_bytes: int = 0
    flush_required_bytes: int = 0
    rotating_sets: int = 0
    value_sets: int = 0  # fresh values every call: the number of checked calls
    changing_inputs: list[str] = Field(default_factory=list)
    warmup: list[WarmupInfo] = Field(default_factory=list)
    aa: Comparison | None = None
    ab: Comparison | None = None
    declared_noise_floor: float | None = None
    aa_spread: float | None = None
    aa_prep_gap_ms: float | None = None  # chained: how far the A/A's two runs' preparation differed
    noise_floor: float | None = None
    verdict: stats.Verdict | None = None
    bound: PhysicalBound | None = None
    failures: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    # the second clock, the timer floor, and what the judge checked around the calls
    cross_timer: str = ""
    aa_cross: Comparison | None = None
    ab_cross: Comparison | None = None
    cross_noise_floor: float | None = None
    primary_verdict: stats.Verdict | None = None
    cross_verdict: stats.Verdict | None = None
    timer_floor_ms: float | None = None
    cross_timer_floor_ms: float | None = None
    solo_baseline_ms: float | None = None  # the baseline's median before any candidate process existed
    baseline_drift: float | None = None  # its A/B median / solo median - 1
    clock_checks: list[ClockCheck] = Field(default_factory=list)
    sampled: list[SampledParity] = Field(default_factory=list)
    checked_calls: int = 0
    neighbour_watch: str = ""
    neighbours: list[str] = Field(default_factory=list)
    inconclusive: str | None = None  # why no verdict could be given, when the timing ran
    idle_probe_solo_ms: float | None = None  # the judge's probe kernel after a baseline block (75th pct)
    idle_probe_after_candidate_ms: float | None = None  # ... after a candidate block


@dataclass
class TimedArm:
    arm: "Arm"
    sets: list["BoundSet"]
    pool: checks.SampleChecks
    cursor: int = 0
    warm: WarmupInfo | None = None
    pending: list["CallRecord"] = field(default_factory=list)  # calls made, not yet checked
    late: int = 0  # gated: calls with host time inside a clock
    timed_calls: int = 0


@dataclass
class RoundCalls:
    order: str
    a: list["CallTiming"]
    b: list["CallTiming"]
    probes: list[tuple[str, float]] = field(default_factory=list)  # (arm that ran just before, ms)


@dataclass
class SoloState:
    """What the solo phase leaves for the A/B phase."""

    a: TimedArm
    a2: TimedArm
    calls_per_block: int
    floor: tuple[float, float]  # (primary, cross) in ms
    aa_rounds: list[RoundCalls]
    result: TimingResult
    notes: list[str] = field(default_factory=list)


def _claim_shortfall(data: list[RoundCalls]) -> float:
    """(judge's time / arm's claimed time) of the B side over the same ratio of the A side: 1 for
    arms that report what they ran, 10 for an arm that claims a tenth (0 when a claim is missing)."""
    def ratio(calls: list[CallTiming]) -> float:
        judge = _median([c.judge_ms for c in calls])
        claim = _median([float(c.arm_ms) for c in calls if c.arm_ms is not None])
        return judge / claim if claim > 0 and math.isfinite(judge / claim) else float("nan")

    a = ratio([c for rc in data for c in rc.a])
    b = ratio([c for rc in data for c in rc.b])
    return b / a if a > 0 and math.isfinite(b / a) else 0.0


def _median(xs: list[float]) -> float:
    return stats.median(xs) if xs else math.nan


def _quantile(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def sets_that_fit(wanted: int, per_set_bytes: int, free_bytes: int) -> int:
    """Buffer sets per timed arm: ``wanted``, or as many as let the ``TIMED_ARMS`` arms' sets
    fit in ``MEMORY_SHARE`` of the free device memory; never fewer than one (a shape whose one
    set does not fit runs out of memory and says so)."""
    fit = int(MEMORY_SHARE * free_bytes // max(TIMED_ARMS * per_set_bytes, 1))
    return max(1, min(wanted, fit))


class TimingStage:
    def __init__(self, session: "Session", config: TimingConfig, rules: ParityRules, watch: "TreeWatch",
                 neighbours: "NeighbourWatch", generator: "torch.Generator", our_pids: Callable[[], set[int]],
                 say: Callable[[str], None] | None = None) -> None:
        self.s, self.cfg, self.rules, self.watch = session, config, rules, watch
        self.neighbours, self.gen, self.our_pids = neighbours, generator, our_pids
        self.say = say or (lambda _m: None)
        self.gpu = session.device.is_gpu
        self.timed: list[TimedArm] = []  # every arm set up here: their buffer sets end with the shape
        self.seen_neighbours: list[str] = []
        # the gated and chained protocols order calls on the device through interprocess events
        self.chain_note = None
        if self.gpu and config.gpu_protocol in ("chained", "gated"):
            self.chain_note = session.chain_available()
        ordered = self.gpu and self.chain_note is None
        self.chained = ordered and config.gpu_protocol == "chained"
        self.gated = ordered and config.gpu_protocol == "gated"
        self.pad = None
        if self.gated:

            self.pad = Pad(session.device, config.gate_pad_us)
        warm = config.warm_burst_ms
        self.warm_ms = (1.0 if self.gpu else 0.0) if warm is None else warm
        self.box: "BoxLoad | None" = None  # from the solo phase on
        self.box_ab: "BoxLoad | None" = None  # the A/B phase alone: load that arrived late is not diluted
        # failures that load on the box can explain: (message, how far past its bound)
        self.soft: list[tuple[str, float]] = []
        self.aa_gap_diff = 0.0  # how far the A/A's two baseline processes' clock gaps differed
        self.sets_per_arm: int | None = None  # buffer sets per arm at this shape (``_sets_per_arm``)
        self.memory_note: str | None = None

    # -- clocks ----------------------------------------------------------------------
    def primary(self, c: "CallTiming") -> float:
        return float(c.arm_ms) if self.gpu else c.judge_ms

    def cross(self, c: "CallTiming") -> float:
        return c.judge_ms if self.gpu else float(c.arm_ms)

    @property
    def device_ordered(self) -> bool:
        return self.chained or self.gated

    def protocol(self) -> str:
        return "gated" if self.gated else "chained" if self.chained else "per_call"

    def clock_names(self) -> tuple[str, str]:
        if self.gated:
            return ("arm's device events around launch(), queued behind the judge's ready",
                    "judge's device events, from just before its ready to its stream resuming after the arm's done")
        if self.chained:
            return ("arm's device events around launch()",
                    "judge's device events, from its ready to its stream resuming after the arm's done")
        if self.gpu:
            return ("arm's device events (end recorded after a device-wide synchronise)",
                    "judge's wall clock around the request")
        return ("arm's process CPU time, read by the judge (clock_getcpuclockid), from before its preparation",
                "arm's own process_time around launch()")

    # -- arms ------------------------------------------------------------------------
    def setup(self, arm: "Arm") -> TimedArm:
        first = self.s.bind(arm, self.s.values_for(self.s.fresh_seed()))
        n = self._sets_per_arm(first)
        sets = [first] + [self.s.bind(arm, self.s.values_for(self.s.fresh_seed())) for _ in range(n - 1)]
        timed = TimedArm(arm, sets, checks.SampleChecks(self.rules.rtol, self.rules.atol))
        self.timed.append(timed)
        return timed

    def _sets_per_arm(self, first: "BoundSet") -> int:
        """``rotating_sets``, or fewer where the three timed arms' sets would not fit in half the
        device's free memory (a set is its shared inputs and outputs plus the judge's private
        copy of the inputs: ~15 GiB at the MoE card's DeepSeek shape, where 9 sets ran the H200
        out of memory). Values are fresh before every call whatever the count; decided once
        per shape, at the first arm's set-up."""
        if self.sets_per_arm is not None:
            return self.sets_per_arm
        n = self.cfg.rotating_sets
        if self.gpu:
            import torch

            inputs = sum(v.numel() * v.element_size() for v in first.values.values())
            outputs = sum(v.numel() * v.element_size() for v in first.buffers.outputs.values())
            per_set = 2 * inputs + outputs
            free, _total = torch.cuda.mem_get_info(self.s.device.torch_device)
            fit = sets_that_fit(n, per_set, free)
            if fit < n:
                n = fit
                self.memory_note = (f"buffer sets per arm: {n} of {self.cfg.rotating_sets} (a set takes "
                                    f"{per_set / 2**30:.1f} GiB; {free / 2**30:.1f} GiB of device memory free)")
        self.sets_per_arm = n
        return n

    def release(self) -> None:
        """Free every buffer set of every arm timed here (the judge's device memory for this
        shape: at a MoE card's shapes ~9 sets of several GiB each, which the next shape needs)."""
        for t in self.timed:
            for bound in t.sets:
                self.s.release(bound)
                bound.values.clear()
            t.sets, t.pending = [], []
        self.timed = []

    def _staged(self, t: TimedArm, n: int) -> list[tuple["BoundSet", dict]]:
        """The buffer set and fresh values of each of the next ``n`` calls, the values in the
        judge's private memory; written into the arm's buffers one call at a time
        (``Session.load``), so no arm ever holds the values of a call it has not been asked
        to make. Static inputs are each set's own."""
        out = []
        for _ in range(n):
            bound = t.sets[t.cursor % len(t.sets)]
            t.cursor += 1
            out.append((bound, self.s.stage(bound.values, 1)[0]))
        self.s.device.sync()
        return out

    def _calls(self, t: TimedArm, staged: list[tuple["BoundSet", dict]]) -> list["CallTiming"]:
        """One timed call per staged set; the checks are queued and made by ``_check`` once
        the arm is suspended (nothing the arm can do between calls depends on them)."""
        import time

        if self.gated:

            assert self.pad is not None
            calls, gated, late = gated_calls(self.s, t.arm, list(staged), self.cfg.call_timeout_s, self.gen, self.pad)
            records = [r for r in gated if r is not None]
            t.late += late
            if late > LATE_GROW * len(staged):
                self.pad.grow()  # the arms' hosts did not keep ahead: more slack from the next block on
        elif self.chained:
            calls, chained = self.s.chained_calls(t.arm, list(staged), self.cfg.call_timeout_s, self.gen)
            records = [r for r in chained if r is not None]
        else:
            calls, records = [], []
            for bound, values in staged:
                start = time.perf_counter_ns()
                timing, record = self.s.timed_call(bound, values, self.cfg.call_timeout_s, self.gen)
                timing.total_ms = (time.perf_counter_ns() - start) / 1e6
                calls.append(timing)
                records.append(record)
        self._collect(t, calls)
        t.pending = records
        t.timed_calls += len(calls)
        return calls

    def _check(self, t: TimedArm) -> None:

        records, t.pending = t.pending, []
        for record in records:
            problems = self.s.check_call(record, t.pool)
            if problems:
                raise Blame(f"{t.arm.label}: checked call {t.pool.calls}: " + "; ".join(problems[:3]), t.arm)

    def _warm_burst(self) -> None:
        """Judge device work right before a block: the device comes out of the gap between
        blocks (checks, suspending and resuming arms) at its working clocks, for every arm alike."""
        if self.warm_ms <= 0 or not self.gpu:
            return
        if getattr(self, "_fill_ms", None) is None:  # one flush's device time, measured once
            import torch

            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(4):
                self.s.flusher.flush()
            end.record()
            end.synchronize()
            self._fill_ms = max(start.elapsed_time(end) / 4, 1e-3)
        for _ in range(max(1, round(self.warm_ms / self._fill_ms))):
            self.s.flusher.flush()
        self.s.device.sync()

    def block(self, t: TimedArm, k: int) -> list["CallTiming"]:
        staged = self._staged(t, k)  # the arm is suspended: the judge's own device work
        self._warm_burst()
        t.arm.handle.resume()
        calls = self._calls(t, staged)
        t.arm.handle.suspend()
        self._check(t)
        self._watch()
        return calls

    def _collect(self, t: TimedArm, calls: list["CallTiming"]) -> None:

        ms = self.s.request(t.arm, {"op": "times"}, 30.0).get("ms")
        if (not isinstance(ms, list) or len(ms) != len(calls)
                or not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in ms)):
            raise Blame(f"{t.arm.label}: reported {str(ms)[:80]} for {len(calls)} timed calls", t.arm)
        for c, v in zip(calls, ms):
            c.arm_ms = float(v)

    def _watch(self) -> None:
        found = self.watch.check()
        if found:
            raise found[0]
        for n in self.neighbours.foreign(self.our_pids()):
            text = n.describe()
            if text not in self.seen_neighbours:
                self.seen_neighbours.append(text)

    def warmup(self, t: TimedArm) -> WarmupInfo:
        """Batches of calls until a batch costs no less than ``warmup_steady`` x the one before
        (after ``warmup_ms`` and ``warmup_calls``; at most ``warmup_max_ms``). A process's first
        calls pay one-off costs (module loads, memory handles, a GPU clocking up from idle:
        5.8 ms per 0.11 ms call in the first batch on the H200), and a block sized on them
        holds a handful of calls. The figures are the last batch's.

        Slow calls (Triton's CPU interpreter: 0.4-1.5 s each) would spend most of a smoke
        verification warming up, so the first batch holds ``WARMUP_PROBE_CALLS`` calls and
        each later one ``warmup_calls`` or ``warmup_batch_ms`` worth at the last batch's
        cost, whichever is fewer; ``warmup_calls`` in all is then enough, or two batches
        spanning ``warmup_max_ms``. Fast calls warm up as before (batches of ``warmup_calls``)."""
        import time

        t0 = time.perf_counter_ns()
        calls: list[CallTiming] = []
        batches: list[float] = []  # each batch's median in-block cost per call
        size = min(WARMUP_PROBE_CALLS, self.cfg.warmup_calls)
        while True:
            staged = self._staged(t, size)
            t.arm.handle.resume()
            batch = self._calls(t, staged)
            t.arm.handle.suspend()
            self._check(t)
            calls += batch
            batches.append(_median([c.total_ms for c in batch]))
            elapsed = (time.perf_counter_ns() - t0) / 1e6
            enough = len(calls) >= self.cfg.warmup_calls or elapsed >= self.cfg.warmup_max_ms
            warm = elapsed >= self.cfg.warmup_ms and enough and len(batches) >= 2
            if warm and (batches[-1] >= self.cfg.warmup_steady * batches[-2] or elapsed >= self.cfg.warmup_max_ms):
                break
            fit = math.ceil(self.cfg.warmup_batch_ms / max(batches[-1], 1e-6))
            size = int(min(self.cfg.warmup_calls, max(WARMUP_PROBE_CALLS, fit)))
        self.watch.mark_built(t.arm)
        self._watch()
        t.late = t.timed_calls = 0  # a cold process's first calls are late by nature: counted from here
        t.warm = WarmupInfo(arm=t.arm.label, calls=len(calls), elapsed_ms=elapsed,
                            per_call_ms=_median([self.primary(c) for c in batch]), wall_per_call_ms=batches[-1],
                            batches=len(batches))
        return t.warm

    def timer_floor(self, t: TimedArm) -> tuple[float, float]:
        """Median of no-op calls through the same path, on both clocks (a trusted arm)."""
        t.arm.handle.resume()
        if self.gated:

            assert self.pad is not None
            calls, _, _ = gated_calls(self.s, t.arm, [(None, None)] * self.cfg.floor_calls, self.cfg.call_timeout_s,
                                      self.gen, self.pad)
        elif self.chained:
            calls, _ = self.s.chained_calls(t.arm, [(None, None)] * self.cfg.floor_calls, self.cfg.call_timeout_s, self.gen)
        else:
            calls = [self.s.null_call(t.arm, self.cfg.call_timeout_s, self.gen) for _ in range(self.cfg.floor_calls)]
        self._collect(t, calls)
        t.arm.handle.suspend()
        return _median([self.primary(c) for c in calls]), _median([self.cross(c) for c in calls])

    def calls_per_block(self, wall_per_call_ms: list[float], staged_set_bytes: int = 0) -> int:
        """Calls filling ``block_ms`` at the slowest arm's in-block cost per call, within the
        memory the judge may spend on the block's staged values (``stage_bytes``)."""
        slowest = max(max(wall_per_call_ms), 1e-6)
        k = math.ceil(self.cfg.block_ms / slowest)
        if staged_set_bytes > 0:
            k = min(k, self.cfg.stage_bytes // staged_set_bytes)
        fewest = self.cfg.min_calls_per_block
        if fewest is None:  # a slow call's block is long already; the rounds carry the statistics
            fewest = 2 if slowest >= SLOW_CALL_MS else 3
        low = max(fewest, math.ceil(self.cfg.rotating_sets / 2))
        return int(min(max(k, low), max(self.cfg.max_calls_per_block, low)))

    def staged_set_bytes(self, t: TimedArm) -> int:
        values = t.sets[0].values
        return sum(values[n].numel() * values[n].element_size() for n in self.s.refreshed() if n in values)

    def rounds(self, a: TimedArm | list[TimedArm], b: TimedArm, n: int, k: int, offset: int) -> list[RoundCalls]:
        """``a`` a list: round r's A side is ``a[r % len(a)]`` (baseline processes alternating)."""
        out = []
        previous = ""
        for r in range(n):
            a_r = a[r % len(a)] if isinstance(a, list) else a
            order = "ABBA" if (offset + r) % 2 == 0 else "BAAB"
            got: dict[str, list[CallTiming]] = {"A": [], "B": []}
            probes = []
            for letter in order:
                probes.append((previous, self.s.idle_probe_ms()))  # the arm before is suspended now
                got[letter] += self.block(a_r if letter == "A" else b, k)
                previous = letter
            out.append(RoundCalls(order, got["A"], got["B"], probes))
            self.say(f"{r + 1}/{n} rounds")
        return out

    # -- statistics -----------------------------------------------------------------
    def comparison(self, name: Literal["A/A", "A/B"], a_label: str, b_label: str, k: int, data: list[RoundCalls],
                   clock: Callable[["CallTiming"], float], clock_name: str, floor: float) -> Comparison:
        cfg = self.cfg
        comp = Comparison(name=name, arm_a=a_label, arm_b=b_label, calls_per_block=k, confidence=cfg.confidence,
                          bootstrap_samples=cfg.bootstrap_samples, bootstrap_seed=cfg.bootstrap_seed,
                          clock=clock_name, timer_floor_ms=floor)
        for i, rc in enumerate(data):
            sa, sb = _round_stats(rc.a, clock), _round_stats(rc.b, clock)
            comp.rounds.append(RoundResult(index=i, order=rc.order, a=sa, b=sb, ratio=_ratio(sa.median_ms, sb.median_ms, floor)))
        ratios = [x.ratio for x in comp.rounds]
        comp.speedup = stats.median(ratios)
        comp.ci_low, comp.ci_high = stats.bootstrap_median_ci(ratios, cfg.bootstrap_samples, cfg.bootstrap_seed, cfg.confidence)
        comp.median_a_ms = stats.median([x.a.median_ms for x in comp.rounds])
        comp.median_b_ms = stats.median([x.b.median_ms for x in comp.rounds])
        comp.host_gap_a_ms = _median([c.judge_ms - float(c.arm_ms) for rc in data for c in rc.a])
        comp.host_gap_b_ms = _median([c.judge_ms - float(c.arm_ms) for rc in data for c in rc.b])
        return comp

    def gap_bound(self, baseline_ms: float, baseline_gap_ms: float) -> float:
        """Allowed per-call disagreement of the two clocks beyond the baseline's: the larger of
        a fixed bound, ``clock_gap_rel`` of the baseline's call, and a quarter of the baseline's
        own gap (on GPUs mostly a context switch and the process wake-ups, which vary)."""
        platform = self.s.device.platform
        absolute = self.cfg.clock_gap_ms if self.cfg.clock_gap_ms is not None else CLOCK_GAP_MS[platform]
        return max(absolute, self.cfg.clock_gap_rel * baseline_ms, 0.25 * max(baseline_gap_ms, 0.0))

    # -- the two phases --------------------------------------------------------------
    def _open_links(self, arms: list["Arm"]) -> None:
        """The chained protocol needs each arm to open its events; where the baselines cannot
        (a runtime or confinement without interprocess events) every arm is timed per call."""

        if not self.device_ordered:
            return
        for arm in arms:
            try:
                self.s.link(arm)
            except Blame as exc:
                self.chained = self.gated = False
                self.chain_note = f"{arm.label} could not open interprocess events: {exc.reason[:200]}"
                return

    def solo(self, a_arm: "Arm", a2_arm: "Arm") -> SoloState:
        self._open_links([a_arm, a2_arm])
        primary_name, cross_name = self.clock_names()
        result = TimingResult(status="PASS", timer=primary_name, cross_timer=cross_name,
                              protocol=self.protocol(), warm_burst_ms=self.warm_ms,
                              flush_bytes=self.s.flusher.nbytes, flush_required_bytes=self.s.flusher.required_bytes,
                              rotating_sets=self.cfg.rotating_sets, neighbour_watch=self.neighbours.backend)
        if self.neighbours.reason:
            result.notes.append(f"neighbour watch: {self.neighbours.reason}")
        if self.chain_note:
            result.notes.append(f"per-call protocol: {self.chain_note}")
        if self.s.flusher.nbytes < self.s.flusher.required_bytes:
            result.notes.append(
                f"flush buffer {self.s.flusher.nbytes} bytes is below 2x the last-level cache "
                f"({self.s.flusher.required_bytes} bytes): caches may stay warm between calls")

        self.box = BoxLoad()
        self.box.start()
        a, a2 = self.setup(a_arm), self.setup(a2_arm)
        if self.memory_note:
            result.notes.append(self.memory_note)
        result.changing_inputs = list(self.s.changing)
        if not self.s.changing:
            result.notes.append("every input is declared static: values are not changed between calls")
        a2.arm.handle.suspend()
        for t in (a, a2):
            self.say(f"warm-up {t.arm.label}")
            result.warmup.append(self.warmup(t))
        floor = self.timer_floor(a)
        result.timer_floor_ms, result.cross_timer_floor_ms = floor
        k = self.calls_per_block([w.wall_per_call_ms for w in result.warmup], self.staged_set_bytes(a))
        n = self.cfg.aa_rounds or self.cfg.rounds
        self.say(f"A/A control: {n} rounds x 4 blocks x {k} calls (the candidate's code is not loaded yet)")
        data = self.rounds(a, a2, n, k, 0)
        result.aa = self.comparison("A/A", a.arm.label, a2.arm.label, k, data, self.primary, primary_name, floor[0])
        result.aa_cross = self.comparison("A/A", a.arm.label, a2.arm.label, k, data, self.cross, cross_name, floor[1])
        result.solo_baseline_ms = result.aa.median_a_ms
        self._clock_check(result, "A/A", data, a.arm.label, a2.arm.label, reference=True)
        return SoloState(a, a2, k, floor, data, result)

    def versus(self, solo: SoloState, c_arm: "Arm", candidate_label: str) -> TimingResult:
        """A/B against the solo state; raises ``Blame`` when an arm breaks the protocol."""
        result, a, k, floor = solo.result, solo.a, solo.calls_per_block, solo.floor
        primary_name, cross_name = self.clock_names()
        self.box_ab = BoxLoad()
        self.box_ab.start()
        c = self.setup(c_arm)
        self.say(f"warm-up {c.arm.label}")
        result.warmup.append(self.warmup(c))
        if self.cfg.min_calls_per_block is None and c.warm is not None and c.warm.wall_per_call_ms >= SLOW_CALL_MS:
            # a slow candidate (Triton's CPU interpreter) would make each A/B block seconds long;
            # fewer calls per block only widen the A/B's own interval, so this favours no verdict
            k_slow = self.calls_per_block([c.warm.wall_per_call_ms], self.staged_set_bytes(a))
            if k_slow < k:
                result.notes.append(f"A/B: {k_slow} calls per block, not the A/A's {k}: the candidate's call takes "
                                    f"{c.warm.wall_per_call_ms:.0f} ms")
                k = k_slow
        offset = self.cfg.aa_rounds or self.cfg.rounds
        self.say(f"A/B: {self.cfg.rounds} rounds x 4 blocks x {k} calls")
        a_side: TimedArm | list[TimedArm] = a
        if self.cfg.ab_baselines == 2:
            # the A side alternates between the two baseline processes round by round, and the
            # drift is measured against both processes' solo figures
            a_side = [a, solo.a2]
            assert result.aa is not None and result.aa.median_a_ms and result.aa.median_b_ms
            result.solo_baseline_ms = (result.aa.median_a_ms + result.aa.median_b_ms) / 2
            result.notes.append("A/B: the baseline side alternated between processes A and A' round by round")
        data = self.rounds(a_side, c, self.cfg.rounds, k, offset)
        result.ab = self.comparison("A/B", a.arm.label, candidate_label, k, data, self.primary, primary_name, floor[0])
        result.ab_cross = self.comparison("A/B", a.arm.label, candidate_label, k, data, self.cross, cross_name, floor[1])
        result.checked_calls = a.pool.calls + c.pool.calls + solo.a2.pool.calls
        result.value_sets = result.checked_calls
        self._sampled(result, a, c)
        self._clock_check(result, "A/B", data, a.arm.label, candidate_label, reference=False)
        if self.gpu:
            self._interference(result, solo.aa_rounds, data)
        self._decide(result)
        self._drift(result)
        result.neighbours = list(self.seen_neighbours)
        self._load_is_not_blame(result, [a, c, solo.a2])
        if result.failures:
            result.status = "FAIL"
            result.reason = f"{len(result.failures)} timing checks failed: {result.failures[0]}"
        elif result.neighbours:
            result.verdict = None
            result.inconclusive = ("other processes held a context on the device while the arms were timed: "
                                   + "; ".join(result.neighbours[:4]))
            result.reason = "INCONCLUSIVE: " + result.inconclusive
        elif result.verdict is None:
            result.reason = f"INCONCLUSIVE: {result.inconclusive}"
        else:
            ab, x = result.ab, result.ab_cross
            assert ab is not None and x is not None
            result.reason = (
                f"speedup {ab.speedup:.4f} [{ab.ci_low:.4f}, {ab.ci_high:.4f}] vs floor {result.noise_floor:.4f} "
                f"({result.primary_verdict}); judge-side clock {x.speedup:.4f} [{x.ci_low:.4f}, {x.ci_high:.4f}] vs "
                f"floor {result.cross_noise_floor:.4f} ({result.cross_verdict}) -> {result.verdict}")
        return result

    def _load_is_not_blame(self, result: TimingResult, arms: list[TimedArm]) -> None:
        """A check that failed by less than ``GROSS`` x its bound while other processes loaded
        the box (CPU: ``verifiers.hw.boxload``; GPU: a neighbour's context) gives no verdict,
        naming the box, instead of blaming the candidate. Gross violations stay FAIL: the
        clock-lying and drift attacks overshoot their bounds many times over. Converting
        a FAIL into INCONCLUSIVE grants no verdict, so a candidate gains nothing by it; and
        nothing it does raises the measured load (its processes are in the judge's tree)."""
        # the busier of the two windows: a drift compares the phases, and load that came only
        # during the A/B rounds (or only before them) explains it as well
        readings = [b.reading() for b in (self.box, self.box_ab) if b is not None]
        readings = [r for r in readings if r is not None]
        if readings:
            result.box_load = max(readings, key=lambda r: r.foreign_cores)
        if self.gated:
            assert self.pad is not None
            result.late_calls = {t.arm.label: t.late for t in arms}
            result.gate_pad_us = self.pad.us
            late = [t for t in arms if t.arm.trusted and t.timed_calls and t.late > self.cfg.late_limit * t.timed_calls]
            if late and result.inconclusive is None:
                t = late[0]
                # every call late on a quiet box is the arm's own doing: its launch waits for the
                # device (.item(), .cpu(), a blocking copy), so it cannot queue ahead of the gate
                why = ("its launch waits for the device inside the call (a host synchronisation such as "
                       ".item(), .cpu(), a flag read back or a blocking copy), or the box is loaded"
                       if t.late >= t.timed_calls else "the host could not keep ahead of the device (a loaded box?)")
                result.inconclusive = (f"{t.arm.label}: {t.late} of {t.timed_calls} calls were queued after the "
                                       f"judge's ready had fired (host time inside the clocks): {why}")
                result.verdict = None
        loaded = result.box_load.describe() if result.box_load is not None and result.box_load.loaded else None
        if result.neighbours:
            loaded = "other processes held a context on the device: " + "; ".join(result.neighbours[:3])
        if loaded is None:
            if result.box_load is not None and result.box_load.foreign_cores >= 0.1:
                result.notes.append(result.box_load.describe().replace("was loaded", "was partly loaded"))
            return
        excused = [text for text, how_far in self.soft if text in result.failures and how_far < GROSS]
        if not excused:
            if not result.failures:
                result.notes.append(loaded)
            return
        result.failures = [f for f in result.failures if f not in excused]
        result.verdict = None
        result.inconclusive = (f"{loaded}; under that load these timing checks failed by less than {GROSS:g}x their "
                               f"bounds, which load explains: " + " | ".join(e[:300] for e in excused[:3]))

    def _sampled(self, result: TimingResult, a: TimedArm, c: TimedArm) -> None:
        """The parity rules on the pooled samples: the candidate's against the baseline's."""
        base, cand = a.pool.metrics(), c.pool.metrics()
        outputs = {name: t for name, t in a.sets[0].buffers.outputs.items()}
        for t, figures in ((a, base), (c, cand)):
            entry = SampledParity(arm=t.arm.label, calls=t.pool.calls, samples_per_output=self.s.options.check_samples,
                                  outputs=figures)
            if t is c:
                for name, m in figures.items():
                    ref = base.get(name)
                    if ref is None:
                        continue
                    # the problem's mismatch allowance, scaled to the number of sampled elements
                    allowed = math.ceil(self.rules.max_mismatch * m.numel / max(outputs[name].numel(), 1))
                    sampled_rules = self.rules.model_copy(update={"max_mismatch": max(allowed, 2 * ref.mismatches)})
                    entry.failures += [f"{name}: {f}" for f in
                                       parity_failures(sampled_rules, m, ref, output_eps(outputs[name]), "timed calls (sampled)")]
                result.failures += [f"{t.arm.label}: {f}" for f in entry.failures]
            result.sampled.append(entry)

    def _clock_check(self, result: TimingResult, name: str, data: list[RoundCalls], a_label: str, b_label: str,
                     reference: bool) -> None:
        gap_a = _median([c.judge_ms - float(c.arm_ms) for rc in data for c in rc.a])
        gap_b = _median([c.judge_ms - float(c.arm_ms) for rc in data for c in rc.b])
        prep_a = _median([c.prep_ms for rc in data for c in rc.a])
        prep_b = _median([c.prep_ms for rc in data for c in rc.b])
        base_ms = _median([self.primary(c) for rc in data for c in rc.a])
        own_ms = _median([c.judge_ms for rc in data for c in rc.b])  # the judge's clock: not the arm's claim
        bound = self.gap_bound(max(base_ms, own_ms), gap_a)
        if reference:
            self.aa_gap_diff = abs(gap_b - gap_a) if math.isfinite(gap_b - gap_a) else 0.0
        else:
            bound = max(bound, AA_GAP_FACTOR * self.aa_gap_diff)
        ok = abs(gap_b - gap_a) <= bound
        result.clock_checks.append(ClockCheck(comparison=name, arm=a_label, gap_ms=gap_a, reference_gap_ms=gap_a,
                                              bound_ms=bound, prep_ms=prep_a))
        result.clock_checks.append(ClockCheck(comparison=name, arm=b_label, gap_ms=gap_b, reference_gap_ms=gap_a,
                                              bound_ms=bound, prep_ms=prep_b, ok=ok))
        if ok and self.device_ordered:
            self._prep_check(result, name, prep_a, prep_b, b_label, reference)
        if ok:
            return
        text = (f"{name}: {b_label}'s own clock and the judge's differ by {gap_b:.4g} ms per call, the baseline's by "
                f"{gap_a:.4g} ms (allowed difference {bound:.4g} ms)")
        if reference:
            result.inconclusive = text + ": two runs of the same baseline disagree, this box cannot time reliably"
        else:
            result.failures.append(text + ": the arm's timings are not what the judge observed")
            # how far off, for the loaded-box rule (GROSS): by the bound, or by how much smaller the
            # arm's claim is than what the judge saw, against the baseline's own claim; both clocks
            # count the same process's work, so load does not make an honest claim several times short
            self.soft.append((result.failures[-1], max(abs(gap_b - gap_a) / bound, _claim_shortfall(data))))

    def _prep_check(self, result: TimingResult, name: str, prep_a: float, prep_b: float, b_label: str,
                    reference: bool) -> None:
        """The A/A's two baseline processes calibrate how much the judge's preparation differs
        between processes doing the same work (on the H200 0.004-0.08 ms of 0.18-0.33 ms);
        the A/B may differ by twice that (or the fixed bounds). An A/A whose two runs differ
        by more than ``PREP_AA_REL`` of the preparation cannot calibrate it: no verdict."""
        if reference:
            result.aa_prep_gap_ms = abs(prep_b - prep_a)
            text = prep_gap(name, prep_a, prep_b, b_label, rel=PREP_AA_REL, either_way=True)
            if text is not None:
                result.inconclusive = result.inconclusive or text + ": two runs of the same baseline disagree"
            return
        text = prep_gap(name, prep_a, prep_b, b_label, noise=result.aa_prep_gap_ms or 0.0)
        if text is not None:
            result.failures.append(text + ": the arm's device work ran while the judge prepared its next call")
            self.soft.append((result.failures[-1], 1.0))

    def _interference(self, result: TimingResult, aa: list[RoundCalls], ab: list[RoundCalls]) -> None:
        """Right after an arm is suspended the judge runs a tiny kernel of its own: it waits
        when the suspended arm's context still has work queued on the device. Compared with
        the same probe in the solo phase (two baseline processes)."""
        solo = [ms for rc in aa for prev, ms in rc.probes if prev]
        after_c = [ms for rc in ab for prev, ms in rc.probes if prev == "B"]
        if not solo or not after_c:
            return
        result.idle_probe_solo_ms = _quantile(solo, 0.75)
        result.idle_probe_after_candidate_ms = _quantile(after_c, 0.75)
        limit = max(0.5, 5.0 * result.idle_probe_solo_ms)
        if result.idle_probe_after_candidate_ms > limit:
            result.failures.append(
                f"after the candidate was suspended the device stayed busy: the judge's probe kernel took "
                f"{result.idle_probe_after_candidate_ms:.3g} ms (75th percentile) against {result.idle_probe_solo_ms:.3g} ms "
                "with no candidate process: work left running outside the candidate's calls")
            self.soft.append((result.failures[-1], result.idle_probe_after_candidate_ms / limit))

    def _decide(self, result: TimingResult) -> None:
        ab, x, aa, aax = result.ab, result.ab_cross, result.aa, result.aa_cross
        assert ab is not None and x is not None and aa is not None and aax is not None
        platform = self.s.device.platform
        result.declared_noise_floor = self.cfg.noise_floor if self.cfg.noise_floor is not None else PLATFORM_NOISE_FLOOR[platform]
        result.aa_spread = stats.aa_spread(aa.ci_low, aa.ci_high)
        result.noise_floor = max(result.declared_noise_floor, result.aa_spread)
        result.cross_noise_floor = max(result.declared_noise_floor, stats.aa_spread(aax.ci_low, aax.ci_high))
        result.primary_verdict = stats.decide(ab.ci_low, ab.ci_high, result.noise_floor)
        result.cross_verdict = stats.decide(x.ci_low, x.ci_high, result.cross_noise_floor)
        # FASTER / SLOWER only when the judge's own clock says so too; opposite verdicts mean
        # work the arm's clock did not see (it ran after the arm said "done")
        verdict = result.primary_verdict if result.primary_verdict == result.cross_verdict else "NO_DIFFERENCE"
        if {result.primary_verdict, result.cross_verdict} == {"FASTER", "SLOWER"}:
            first, second = ("arm's", "judge's") if self.gpu else ("judge's", "arm's")
            result.failures.append(
                f"the {first} clock says {result.primary_verdict} ({ab.speedup:.3f}), the {second} says "
                f"{result.cross_verdict} ({x.speedup:.3f}): work ran outside the arm's timed window, or an arm's "
                "clock lies")
            # how far apart the two clocks' speedups are: a loaded box blurs both, a lying clock
            # (10x off for timing_patcher) is far beyond GROSS
            apart = x.speedup / ab.speedup if ab.speedup and x.speedup else math.inf
            self.soft.append((result.failures[-1], max(apart, 1.0 / apart) if apart > 0 else math.inf))
        floor = result.timer_floor_ms or 0.0
        # each arm's lower quartile per round, the median over rounds: a busy box only adds time
        # to a call, so the quartile is the call's own length, not the box's load
        lows = {ab.arm_a: [r.a.q1_ms for r in ab.rounds], ab.arm_b: [r.b.q1_ms for r in ab.rounds]}
        short = [lbl for lbl, q1s in lows.items() if q1s and stats.median(q1s) - floor < 0.5 * floor]
        if not self.gpu and x.timer_floor_ms is not None and floor > 0:
            # on CPU the arm's own clock brackets launch() alone: what the call itself costs,
            # beside the judge's per-call overhead (the timer floor). On a loaded box the judge's
            # clock of a no-op and of a tiny call drift apart by as much as the call, so a call
            # costing less than the overhead itself is not judged (a 4x4 torch.mm: 36 us of CPU
            # against 74 us of overhead under load, 0.5x and 0.6x of it in two runs)
            own = {ab.arm_a: [r.a.q1_ms for r in x.rounds], ab.arm_b: [r.b.q1_ms for r in x.rounds]}
            short += [lbl for lbl, q1s in own.items() if lbl not in short and q1s
                      and stats.median(q1s) - x.timer_floor_ms < floor]
        if short and result.inconclusive is None:
            result.inconclusive = (f"{short} run shorter than 1.5x the timer floor ({floor:.4g} ms): "
                                   "the figures are the timer's overhead, not the kernels")
        result.verdict = None if result.inconclusive else verdict

    def _drift(self, result: TimingResult) -> None:
        """The baseline's A/B median against its solo median. On the H200 honest runs moved by
        up to ~40 % between the two phases (clock state), so a drift fails the run only when
        it is large (beyond ``DRIFT_FAIL`` and twice the floor) *and* the verdict against the
        solo time would differ -- a helper or leftover work that slowed the baseline enough to
        buy a verdict -- or when the baseline is more than twice as slow as alone (``DRIFT_HARD``:
        no honest run came near it; the verdict test is too noisy to lean on there, since it
        compares two noisy figures of the same work). Smaller drifts are reported."""
        ab, solo = result.ab, result.solo_baseline_ms
        if ab is None or ab.median_a_ms is None or not solo:
            return
        result.baseline_drift = ab.median_a_ms / solo - 1.0
        # decided on the basis the speedup is on: both medians less the timer floor (raw medians
        # carry the per-call overhead, which understates the drift against a floor-corrected ratio)
        tf = result.timer_floor_ms or 0.0
        drift = _ratio(ab.median_a_ms, solo, tf) - 1.0
        floor = result.noise_floor or 0.0
        limit = max(DRIFT_FAIL, 2 * floor)
        message = (f"the baseline ran {result.baseline_drift:+.1%} against its solo figure "
                   f"({solo:.4g} -> {ab.median_a_ms:.4g} ms; {drift:+.1%} less the timer floor)")
        hard = (message + f": slower with the candidate resident than alone by more than {DRIFT_HARD:.0%} "
                          "(the baseline was slowed, or this box cannot time)")
        # calls under AT_FLOOR x the timer floor: the floor-corrected drift is a ratio of two small
        # remainders (on busy CPU boxes: 0.16 ms calls over a 0.10 ms floor read +76 % raw as +220 %;
        # 0.15 ms over 0.07 ms +78 % as +144 %; 0.098 ms over 0.048 ms +65 % as +128 %, all honest);
        # there a drift is judged by the verdict test alone, never by DRIFT_HARD
        at_floor = tf > 0 and solo < AT_FLOOR * tf
        if result.verdict is None:
            # no verdict to buy, but a baseline more than twice as slow with the candidate resident
            # is named whatever else made the run undecided -- unless its calls sit at the floor
            if drift > DRIFT_HARD and not at_floor:
                result.failures.append(hard)
                self.soft.append((hard, drift / DRIFT_FAIL))  # GROSS x 50 %: 3x as slow
            elif abs(result.baseline_drift) > floor:
                result.notes.append(message + " (no verdict was given)")
            return
        if drift <= limit or ab.ci_low is None or ab.ci_high is None:
            if abs(result.baseline_drift) > floor:
                result.notes.append(message)
            return
        if drift > DRIFT_HARD and not at_floor:
            result.failures.append(hard)
            self.soft.append((hard, drift / DRIFT_FAIL))  # GROSS x 50 %: 3x as slow
            return
        scale = 1.0 / (1.0 + drift)  # against its solo time the candidate's interval shrinks
        honest = stats.decide(ab.ci_low * scale, ab.ci_high * scale, floor)
        if result.primary_verdict is not None and honest != result.primary_verdict:
            result.failures.append(message + f", slower with the candidate resident than alone by more than "
                                             f"{limit:.0%}: against its solo time the verdict would be {honest}, not "
                                             f"{result.primary_verdict} (the baseline was slowed)")
            self.soft.append((result.failures[-1], drift / DRIFT_FAIL))
        else:
            result.notes.append(message + "; the verdict is the same against its solo time")


def prep_gap(name: str, prep_a: float, prep_b: float, b_label: str, noise: float = 0.0, rel: float | None = None,
             either_way: bool = False) -> str | None:
    """Chained protocol: the judge's own device time between two calls (capture, the next
    values, poison, flush) is the same work whichever arm it serves. Device work of an arm
    that runs while the judge prepares its next call -- the only time that call's values
    exist before its ``ready`` -- lengthens it; beyond the bound (``PREP_GAP_MS``, ``rel``
    of the baseline's, ``PREP_NOISE_FACTOR`` x the A/A's own disagreement ``noise``), what
    it says. ``either_way``: a shorter preparation counts too (two runs of one baseline)."""
    base = min(prep_a, prep_b) if either_way else prep_a
    bound = max(PREP_GAP_MS, (PREP_GAP_REL if rel is None else rel) * base, PREP_NOISE_FACTOR * noise)
    diff = abs(prep_b - prep_a) if either_way else prep_b - prep_a
    if not (diff > bound):
        return None
    return (f"{name}: the judge's preparation between {b_label}'s calls took {prep_b:.4g} ms per call, between "
            f"the baseline's {prep_a:.4g} ms (allowed {bound:.4g} ms {'apart' if either_way else 'more'})")


def _round_stats(calls: list["CallTiming"], clock: Callable[["CallTiming"], float]) -> ArmRoundStats:
    times = [clock(c) for c in calls]
    q1, q3 = stats.quartiles(times)
    return ArmRoundStats(n=len(times), median_ms=stats.median(times), q1_ms=q1, q3_ms=q3, min_ms=min(times),
                         max_ms=max(times), host_median_ms=stats.median([c.wall_ms for c in calls]),
                         prep_median_ms=stats.median([c.prep_ms for c in calls]))


def _ratio(a_ms: float, b_ms: float, floor: float) -> float:
    a, b = a_ms - floor, b_ms - floor
    if a > 0 and b > 0:
        return a / b
    return a_ms / b_ms if b_ms > 0 else math.inf

"""``VerifyOptions``: every knob of one verification, validated at the boundary.

These are the options a client may set (the MCP tool passes them through), so none of
them names an interpreter, an executable or a place to write: the verifier always runs
with the server's own interpreter, and where a plot goes is the caller's argument
(``verifiers.api.verify(plot_path=...)``), not an option.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from verifiers.judge.timing import TimingConfig


class VerifyOptions(BaseModel):
    """Options of ``verifiers.api.verify`` (and of the worker they are passed to)."""

    model_config = ConfigDict(extra="forbid")

    # timing protocol
    rounds: int = Field(12, ge=5, description="interleaved A/B rounds (ABBA/BAAB), at least 5")
    aa_rounds: int | None = Field(None, ge=5, description="A/A control rounds (default: rounds)")
    block_ms: float = Field(20.0, gt=0, description="target duration of one block of calls")
    min_calls_per_block: int | None = Field(None, ge=1, description="fewest calls in a block (default: 3, or 2 "
                                            "when a call takes over 100 ms, e.g. Triton's CPU interpreter)")
    max_calls_per_block: int = Field(500, ge=1)
    warmup_ms: float = Field(25.0, ge=25.0)
    warmup_calls: int = Field(10, ge=10)
    rotating_sets: int = Field(3, ge=1, description="buffer sets per arm (values are fresh before every call anyway)")
    flush_bytes: int | None = Field(None, ge=1, description="override the flush size (default max(2 x LLC, floor))")
    bootstrap_samples: int = Field(4000, ge=200)
    bootstrap_seed: int = 20261130
    noise_floor: float | None = Field(
        None, ge=0.0, description="the card's declared noise floor (default: 0.01 on GPUs, 0.05 on CPU)"
    )
    timing: bool = True
    check_samples: int = Field(64, ge=8, le=4096, description="output elements checked against the oracle after every timed call")
    floor_calls: int = Field(40, ge=5, description="no-op calls measuring the timer floor")
    clock_gap_ms: float | None = Field(None, gt=0, description="allowed per-call disagreement of the two clocks (default per platform)")
    clock_gap_rel: float = Field(0.05, ge=0.0, le=1.0)
    call_timeout_s: float = Field(30.0, gt=0, description="a timed call that does not answer within this FAILs (hang)")
    time_failed_parity: bool = Field(False, description="time the arms even when parity failed")
    cpu_threads: int | None = Field(1, ge=1, description="torch threads on CPU (1 keeps CPU timing stable)")
    gpu_protocol: Literal["gated", "per_call", "chained"] = Field(
        "gated", description="GPUs: gated (one call in flight, ordered on the device by interprocess events, both "
                             "clocks device-side; the default), per_call (a host round trip and synchronise inside "
                             "the arm's clock; the fallback where interprocess events do not work) or chained "
                             "(gated calls pipelined back to back; opt-in, gave a false FASTER on the H200)")
    gate_pad_us: float = Field(100.0, ge=0, le=2000, description="gated: judge device slack before each call's ready "
                                                                 "(grows by itself when arms' hosts fall behind)")
    ab_baselines: int = Field(1, ge=1, le=2, description="A/B rounds alternate between this many baseline processes "
                                                         "(2: A and A' round by round; an ablation of per-process bias)")
    warm_burst_ms: float | None = Field(None, ge=0, le=50, description="judge device work before every block "
                                                                       "(default: 1 ms on GPUs, none on CPU)")

    # parity protocol
    seeds: list[int] | None = Field(None, description="parity seeds (default: the problem's)")
    secret_seed: bool = Field(True, description="add a seed drawn from os.urandom, revealed in the report")
    hidden_shapes: bool = Field(True, description="also check the problem's hidden shapes (parity only)")
    strict_min_cosine: float = Field(0.99, ge=-1.0, le=1.0, description="cosine floor in strict mode when the problem sets none")
    max_error_ratio: float = Field(
        2.0, gt=0, description="candidate rel-L2 <= this x the baseline's (when the problem sets no ratio)"
    )
    determinism_atol: float | None = Field(None, ge=0.0)
    determinism_rtol: float | None = Field(None, ge=0.0)
    settle_ms: float = Field(20.0, ge=0.0, description="wait before checking outputs did not change after return")

    # runtime signature / segment
    profile: bool = True
    profile_calls: int = Field(3, ge=1)
    profiler_loads_during_timing: bool = Field(
        True, description="the profiler processes (never timed) load the profiler while arms are timed: host work "
                          "in processes that launch nothing (~6 s on the H200). Off: the judge waits for it before "
                          "each timed phase (the bench's ablation row)")
    candidate_required: list[str] = Field(default_factory=list, description="extra kernel regexes the candidate must run")
    candidate_forbidden: list[str] = Field(default_factory=list)
    candidate_launches_per_iter: int | None = Field(None, ge=1)
    forbid_baseline_kernels: bool = Field(True, description="the candidate may not run the baseline arm's required kernels")
    rocprof_trace: str | None = Field(None, description="rocprofv3 kernel-trace CSV of the candidate arm")
    rocprof_baseline_trace: str | None = Field(None, description="rocprofv3 kernel-trace CSV of the baseline arm")

    # physical bounds
    peak_tflops: float | None = Field(None, gt=0, description="declared peak for the problem's dtype (TFLOP/s)")
    peak_bandwidth_gbs: float | None = Field(None, gt=0, description="declared bandwidth (GB/s); default: measured copy")
    bound_margin: float = Field(0.2, ge=0.0, lt=1.0)

    # process
    device: str = Field("auto", description="auto | cpu | cuda | cuda:N (ROCm devices are cuda:N in torch) | "
                        "gfx950-emulated (FlyDSL arms on the gfx950 emulator, CPU: parity only, no timing)")
    time_limit_s: float = Field(900.0, gt=0, description="wall-clock limit per shape (arms that do not answer in time FAIL)")
    load_timeout_s: float = Field(300.0, gt=0, description="an arm process must import its code within this")
    require_sandbox: bool = Field(False, description="refuse to run when the arms cannot be confined (Landlock); "
                                                     "SKILL_SERVER_REQUIRE_SANDBOX=1 forces it on")

    def timing_config(self) -> TimingConfig:
        return TimingConfig(
            rounds=self.rounds,
            aa_rounds=self.aa_rounds,
            block_ms=self.block_ms,
            min_calls_per_block=self.min_calls_per_block,
            max_calls_per_block=self.max_calls_per_block,
            warmup_ms=self.warmup_ms,
            warmup_calls=self.warmup_calls,
            rotating_sets=self.rotating_sets,
            bootstrap_samples=self.bootstrap_samples,
            bootstrap_seed=self.bootstrap_seed,
            noise_floor=self.noise_floor,
            floor_calls=self.floor_calls,
            clock_gap_ms=self.clock_gap_ms,
            clock_gap_rel=self.clock_gap_rel,
            call_timeout_s=self.call_timeout_s,
            gpu_protocol=self.gpu_protocol,
            gate_pad_us=self.gate_pad_us,
            warm_burst_ms=self.warm_burst_ms,
            ab_baselines=self.ab_baselines,
        )

"""The verification report (JSON via pydantic) and its per-round timing plot.

Stage statuses are PASS / FAIL / SKIPPED / ERROR. A stage that did not run is SKIPPED with
its reason and never counts as a pass: ``complete`` is true only when every stage passed.
The verdict is FAIL whenever a stage failed (a fast wrong kernel scores 0), ERROR when the
harness or the problem could not decide, INCONCLUSIVE when nothing was timed, otherwise the
timing verdict FASTER / SLOWER / NO_DIFFERENCE.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from verifiers.hw.bounds import PhysicalBound
from verifiers.judge.parity import ParityResult
from verifiers.provenance import Provenance
from verifiers.judge.segment import SegmentScore
from verifiers.judge.signature import SignatureCheck
from verifiers.judge.timing import TimingResult

SCHEMA_VERSION = 1
Status = Literal["PASS", "FAIL", "SKIPPED", "ERROR"]
Verdict = Literal["FASTER", "SLOWER", "NO_DIFFERENCE", "FAIL", "ERROR", "INCONCLUSIVE"]
STAGES = ("load", "integrity", "parity", "signature", "segment", "timing")
# a hidden shape is checked for parity only: these stages never run there by design
HIDDEN_ONLY_STAGES = ("signature", "segment", "timing")
_STATUS_RANK = {"PASS": 0, "SKIPPED": 1, "ERROR": 2, "FAIL": 3}


class StageResult(BaseModel):
    name: str
    status: Status
    reason: str = ""
    seconds: float = 0.0


class Flag(BaseModel):
    code: str
    severity: Literal["fail", "warn", "info"]
    message: str
    shape: str | None = None


class ShapeReport(BaseModel):
    """What the judge found for one shape (a hidden one: parity only)."""

    model_config = ConfigDict(ser_json_inf_nan="constants")  # inf/NaN survive a JSON round trip

    shape: str
    dims: dict[str, int] | None = None  # withheld for hidden shapes
    baseline_arm: str | None = None
    # what the baseline's builder says production dispatch picked (e.g. the CK block-scale
    # arm's tuned kernel instance), and the one-off builds its prepare step made
    baseline_instance: str | None = None
    prepared: list[str] = Field(default_factory=list)
    hidden: bool = False
    stages: dict[str, StageResult] = Field(default_factory=dict)
    verdict: Verdict = "ERROR"
    parity: ParityResult | None = None
    signature: list[SignatureCheck] = Field(default_factory=list)
    segment: list[SegmentScore] = Field(default_factory=list)
    segment_speedup: float | None = None  # profiler segment score, baseline / candidate
    timing: TimingResult | None = None
    bound: PhysicalBound | None = None
    integrity_changes: list[str] = Field(default_factory=list)  # files, processes, channel
    flags: list[Flag] = Field(default_factory=list)
    secret_seed: int | None = None  # revealed after the run
    provenance: Provenance = Field(default_factory=Provenance)
    seconds: float = 0.0
    # where the shape's time went, in order (seconds): the judge's start-up before any shape
    # (baselines, probe), the baseline's parity references, its solo timing, the candidate's
    # start, its parity, the A/B rounds, and the profiling's build / start / calls / stop
    phase_seconds: dict[str, float] = Field(default_factory=dict)
    log_tail: str = ""


class VerificationReport(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")  # inf/NaN survive a JSON round trip

    schema_version: int = SCHEMA_VERSION
    problem: str
    card_id: str | None = None
    candidate: str
    baseline: str | None = None
    shapes: list[str] = Field(default_factory=list)
    verdict: Verdict = "ERROR"
    complete: bool = False  # every stage of every shape passed
    speedup: float | None = None  # single timed shape: A/B speedup (baseline / candidate time)
    ci_low: float | None = None
    ci_high: float | None = None
    noise_floor: float | None = None
    stages: dict[str, StageResult] = Field(default_factory=dict)
    shape_reports: list[ShapeReport] = Field(default_factory=list)
    flags: list[Flag] = Field(default_factory=list)
    options: dict[str, Any] = Field(default_factory=dict)
    provenance: Provenance = Field(default_factory=Provenance)
    plot_path: str | None = None
    seconds: float = 0.0

    def summary(self) -> str:
        lines = [f"{self.problem}: {self.candidate} vs {self.baseline}: {self.verdict}"]
        if self.provenance.platform == "gfx950-emulated":
            lines[0] += " (platform gfx950-emulated: parity only, nothing timed; not an MI355X result)"
        for s in self.shape_reports:
            parity_only = s.hidden and s.verdict == "INCONCLUSIVE" and all(
                s.stages[n].status == "SKIPPED" for n in HIDDEN_ONLY_STAGES if n in s.stages)
            if parity_only:  # the expected outcome of a hidden shape: say so in one line
                status = s.stages["parity"].status if "parity" in s.stages else "SKIPPED"
                lines.append(f"  {s.shape}: parity {status} (hidden shape: parity only)")
            else:
                line = f"  {s.shape}: {s.verdict}"
                t = s.timing
                if t and t.ab and t.ab.speedup is not None:
                    line += f"  speedup {t.ab.speedup:.4f} [{t.ab.ci_low:.4f}, {t.ab.ci_high:.4f}] floor {t.noise_floor:.4f}"
                lines.append(line)
            for name in STAGES:
                st = s.stages.get(name)
                if parity_only and name in HIDDEN_ONLY_STAGES:
                    continue
                undecided = name == "timing" and s.verdict == "INCONCLUSIVE" and not parity_only
                if st and (st.status != "PASS" or undecided):
                    lines.append(f"    {name}: {st.status} - {st.reason[:300]}")
        for f in self.flags:
            if f.severity != "info" and f.code != "sandbox":
                lines.append(f"  [{f.severity}] {f.code}: {f.message[:300]}")
        if self.provenance.sandbox:
            lines.append(f"  sandbox: {self.provenance.sandbox}")
        return "\n".join(lines)


def worst(statuses: list[Status]) -> Status:
    return max(statuses, key=lambda s: _STATUS_RANK[s]) if statuses else "SKIPPED"


def shape_verdict(stages: dict[str, StageResult], timing: TimingResult | None) -> Verdict:
    statuses = [s.status for s in stages.values()]
    if "FAIL" in statuses:
        return "FAIL"
    if "ERROR" in statuses:
        return "ERROR"
    if timing is None or timing.verdict is None or stages.get("timing", StageResult(name="timing", status="SKIPPED")).status != "PASS":
        return "INCONCLUSIVE"
    return timing.verdict


def overall_verdict(shapes: list[ShapeReport]) -> Verdict:
    """FAIL / ERROR if any shape; FASTER only if every timed shape is FASTER; SLOWER if any is."""
    verdicts = [s.verdict for s in shapes]
    if not verdicts:
        return "ERROR"
    for v in ("FAIL", "ERROR"):
        if v in verdicts:
            return v  # type: ignore[return-value]
    timed = [s.verdict for s in shapes if not s.hidden]
    if not timed or all(v == "INCONCLUSIVE" for v in timed):
        return "INCONCLUSIVE"
    if "SLOWER" in timed:
        return "SLOWER"
    if all(v == "FASTER" for v in timed):
        return "FASTER"
    return "NO_DIFFERENCE"


def aggregate_stages(shapes: list[ShapeReport]) -> dict[str, StageResult]:
    """Worst status per stage over the shapes; a hidden shape counts only for the stages it
    runs (its signature, segment and timing are not run by design, never a missing pass)."""
    out = {}
    for name in STAGES:
        relevant = [s for s in shapes if not (s.hidden and name in HIDDEN_ONLY_STAGES)] or shapes
        results = [s.stages[name] for s in relevant if name in s.stages]
        if not results:
            out[name] = StageResult(name=name, status="SKIPPED", reason="no shape ran")
            continue
        status = worst([r.status for r in results])
        reasons = [f"{s.shape}: {s.stages[name].reason}" for s in relevant if name in s.stages and s.stages[name].status == status]
        out[name] = StageResult(name=name, status=status, reason="; ".join(reasons)[:2000], seconds=sum(r.seconds for r in results))
    return out


def plot_rounds(report: VerificationReport, path: str | Path) -> Path | None:
    """PNG of both arms' per-round median times (A/A control and A/B) for every timed shape."""
    timed = [s for s in report.shape_reports if s.timing and s.timing.ab and s.timing.ab.rounds]
    if not timed:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(timed), 1, figsize=(8, 3.2 * len(timed)), squeeze=False)
    for ax, s in zip(axes[:, 0], timed):
        t = s.timing
        assert t is not None and t.ab is not None
        offset = 0
        if t.aa and t.aa.rounds:
            xs = [r.index for r in t.aa.rounds]
            ax.plot(xs, [r.a.median_ms for r in t.aa.rounds], "o:", color="grey", label=f"A/A {t.aa.arm_a}")
            ax.plot(xs, [r.b.median_ms for r in t.aa.rounds], "x:", color="silver", label=f"A/A {t.aa.arm_b}")
            offset = len(xs)
        xs = [offset + r.index for r in t.ab.rounds]
        ax.errorbar(xs, [r.a.median_ms for r in t.ab.rounds],
                    yerr=[[r.a.median_ms - r.a.q1_ms for r in t.ab.rounds], [r.a.q3_ms - r.a.median_ms for r in t.ab.rounds]],
                    fmt="o-", color="tab:blue", label=f"baseline {t.ab.arm_a}")
        ax.errorbar(xs, [r.b.median_ms for r in t.ab.rounds],
                    yerr=[[r.b.median_ms - r.b.q1_ms for r in t.ab.rounds], [r.b.q3_ms - r.b.median_ms for r in t.ab.rounds]],
                    fmt="s-", color="tab:orange", label=f"candidate {Path(t.ab.arm_b).name}")
        title = f"{report.problem} {s.shape}: {s.verdict}"
        if t.ab.speedup is not None:
            title += f"  speedup {t.ab.speedup:.3f} [{t.ab.ci_low:.3f}, {t.ab.ci_high:.3f}]"
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("round (A/A control, then A/B)")
        ax.set_ylabel("per-round median (ms)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out

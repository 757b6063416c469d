"""Runtime signature and segment: profile each arm outside the timed loop, judge the trace.

Each arm profiles its own calls (torch.profiler in its process; every profiled call gets
fresh inputs, and poisoned outputs, from the judge and is checked like a timed one) and
returns the kernel records as JSON; the judge validates them, normalises the names and
applies the signature rules, the problem's cross-kernel name rule and the segment rules.
The baseline's trace comes from the baseline's own process, so a candidate cannot empty
or edit it; a baseline whose declared kernels do not show is ERROR on every platform. A
candidate's trace is what its process reports: evidence against an honest mistake (a
ghost branch, a silent fallback), not against a candidate that forges its own profile --
that one is held to account by the checked calls and the timing.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from verifiers.arms.handle import ArmFailure
from verifiers.judge import checks, signature as sig
from verifiers.judge.blame import Blame
from verifiers.judge.kernel_trace import KernelRecord, from_rocprofv3_csv
from verifiers.judge.segment import SegmentScore, score_segment, segment_speedup
from verifiers.judge.signature import SignatureCheck
from verifiers.problem import SignatureSpec

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from verifiers.judge.session import Arm, BoundSet, Session
    from verifiers.options import VerifyOptions
    from verifiers.problem import ArmSpec, Problem

MAX_RECORDS = 200_000
WARM_CALLS = 2


def profile(session: "Session", arm: "Arm", calls: int, rtol: float, atol: float,
            generator: "torch.Generator") -> list[KernelRecord]:
    """``calls`` checked, profiled calls of ``arm``; its kernel records (names normalised)."""
    return profile_arms([(arm, session)], calls, rtol, atol, generator)[0][0]


def profile_arms(jobs: list[tuple["Arm", "Session"]], calls: int, rtol: float, atol: float,
                 generator: "torch.Generator") -> tuple[list[list[KernelRecord]], dict[str, float]]:
    """Profile each job (an arm process at a shape's session, one job per arm): ``calls``
    checked, profiled calls each; the kernel records per job, and where the time went (seconds
    per phase). The arms are the judge's profiler processes (``verifiers.judge.profiler_arms``),
    never timed. The profiler's own start
    (loading CUPTI and enabling its activity records, seconds on a GPU) and stop (flushing and
    exporting the trace) are host work inside each arm's process, and nothing is measured while
    they run: the arms do them side by side, so a verdict pays them once rather than once per
    arm. The profiled calls themselves run one arm at a time with every other arm suspended;
    every one of them is checked like a timed call."""
    arms = [arm for arm, _ in jobs]
    if len({id(arm) for arm in arms}) != len(arms):
        raise ValueError("profile_arms: one job per arm process")
    last = jobs[-1][1]
    t0 = time.perf_counter()
    bounds: list[Any] = []
    try:
        for arm, session in jobs:  # each job's buffers, built and warmed with no profiler running anywhere
            _suspend_others(arms, arm)
            bound = session.bind(arm, session.values_for(session.fresh_seed()))
            bounds.append(bound)
            for _ in range(WARM_CALLS):
                _checked_call(session, bound, {"op": "call", "id": bound.id}, "warm-up", generator, rtol, atol)
        t1 = time.perf_counter()
        _all(last, arms, {"op": "profile_start"}, last.timeout(300.0))
        t2 = time.perf_counter()
        for (arm, session), bound in zip(jobs, bounds):
            _suspend_others(arms, arm)
            for i in range(calls):
                _checked_call(session, bound, {"op": "pcall", "id": bound.id, "i": i}, "profiled", generator,
                              rtol, atol)
        t3 = time.perf_counter()
        replies = _all(last, arms, {"op": "profile_stop"}, last.timeout(300.0))
        t4 = time.perf_counter()
    finally:
        for (_, session), bound in zip(jobs, bounds):
            session.release(bound)
    out: list[list[KernelRecord]] = []
    for arm, reply in zip(arms, replies):
        raw = reply.get("records")
        if not isinstance(raw, list) or len(raw) > MAX_RECORDS:
            raise Blame(f"{arm.label}: the profile reply holds no usable record list", arm)
        try:
            records = [KernelRecord.model_validate(r).normalised() for r in raw]
        except ValidationError as exc:
            raise Blame(f"{arm.label}: malformed kernel records: {exc.errors()[0].get('msg', exc)}", arm) from None
        # the kernels of its calls, and every kernel that belongs to no call (launched outside
        # every range: it fails the signature)
        out.append([r for r in records if r.iteration is None or 0 <= r.iteration < calls])
    phases = {"profile_build": t1 - t0, "profile_start": t2 - t1, "profile_calls": t3 - t2, "profile_stop": t4 - t3,
              "profile_records": time.perf_counter() - t4}
    return out, {k: round(v, 3) for k, v in phases.items()}


def _suspend_others(arms: list["Arm"], active: "Arm") -> None:
    for other in arms:
        if other is not active:
            try:
                other.handle.suspend()
            except ArmFailure as exc:
                raise Blame(str(exc), other) from None


def _checked_call(session: "Session", bound: "BoundSet", message: dict, what: str, generator: "torch.Generator",
                  rtol: float, atol: float) -> None:
    """Fresh inputs, poison and flush by the judge (outside the arm's trace), the call, then
    its inputs and sampled outputs checked against this call's oracle."""
    session.prepare(bound)
    session.request(bound.arm, message)
    problems = session.check_call(session.record(bound, session.read_samples(bound, generator)),
                                  checks.SampleChecks(rtol, atol))
    if problems:
        raise Blame(f"{bound.arm.label}: {what} call: " + "; ".join(problems[:3]), bound.arm)


def _all(session: "Session", arms: list["Arm"], message: dict, timeout_s: float) -> list[dict]:
    """The same request to every arm at once (each on its own socket, from its own thread);
    the replies in the arms' order. The first arm at fault is blamed, as a lone request would."""
    if len(arms) == 1:
        return [session.request(arms[0], dict(message), timeout_s)]
    with ThreadPoolExecutor(max_workers=len(arms), thread_name_prefix="judge-profile") as pool:
        futures = [pool.submit(session.request, arm, dict(message), timeout_s) for arm in arms]
        wait(futures)
    for future in futures:
        exc = future.exception()
        if exc is not None:
            raise exc
    return [future.result() for future in futures]


def candidate_signature(problem: "Problem", options: "VerifyOptions", base: "ArmSpec", candidate_arm: str | None,
                        is_aa: bool) -> SignatureSpec:
    extra = SignatureSpec(required=tuple(options.candidate_required), forbidden=tuple(options.candidate_forbidden),
                          launches_per_iter=options.candidate_launches_per_iter)
    own = problem.arm(candidate_arm).signature if candidate_arm else problem.candidate_signature
    spec = sig.merge(own, extra)
    if options.forbid_baseline_kernels and not is_aa and base.signature.required:
        spec = sig.merge(spec, SignatureSpec(forbidden=base.signature.required))
    return spec


@dataclass
class ProfileOutcome:
    signature_status: str
    signature_reason: str
    segment_status: str
    segment_reason: str
    checks: list[SignatureCheck] = field(default_factory=list)
    segments: list[SegmentScore] = field(default_factory=list)
    segment_speedup: float | None = None


def judge_traces(problem: "Problem", options: "VerifyOptions", base: "ArmSpec", cand_spec: SignatureSpec,
                 base_records: list[KernelRecord], cand_records: list[KernelRecord], cand_label: str,
                 platform: str = "cuda") -> ProfileOutcome:
    """The signature and segment stages from both arms' traces. What the platform's trace
    cannot show (kernel names under Triton's CPU interpreter) makes the signature SKIPPED
    with the reason, never FAIL."""
    fp = problem.segment.flush_pattern
    base_label = f"baseline {base.name}"
    checks_ = [sig.check_signature(base_records, base.signature, base_label, fp,
                                   sig.opaque_cpu_trace(base_records, platform)),
               sig.check_signature(cand_records, cand_spec, f"candidate {cand_label}", fp,
                                   sig.opaque_cpu_trace(cand_records, platform))]
    segments = [score_segment(base_records, problem.segment, base_label),
                score_segment(cand_records, problem.segment, f"candidate {cand_label}")]
    errors: list[str] = []
    for path, spec, who in ((options.rocprof_baseline_trace, base.signature, base_label),
                            (options.rocprof_trace, cand_spec, f"candidate {cand_label}")):
        if not path:
            continue
        try:
            recs = from_rocprofv3_csv(path)
        except ValueError as exc:
            errors.append(str(exc))
            continue
        checks_.append(sig.check_signature(recs, spec, who, fp))
        segments.append(score_segment(recs, problem.segment, who))
    if problem.kernel_name_check is not None:
        for check in checks_:
            names = [k.name for k in check.kernels]
            for failure in problem.kernel_name_check(names):
                check.failures.append(f"{check.arm}: {failure}")
                check.status = "FAIL"
    out = ProfileOutcome("PASS", "", "PASS", "", checks_, segments, segment_speedup(segments[0], segments[1]))
    base_sig, base_seg = checks_[0], segments[0]
    if base_sig.status == "FAIL" or base_seg.status == "FAIL":
        why = "; ".join(base_sig.failures + base_seg.failures)[:2000]
        reason = ("the baseline arm's declared runtime signature cannot be observed here, so nothing can be "
                  f"concluded about the candidate's: {why}")
        return ProfileOutcome("ERROR", reason, "ERROR", reason, checks_, segments, out.segment_speedup)
    out.signature_status, out.signature_reason = _stage(
        [c.status for c in checks_], [f for c in checks_ for f in c.failures], errors,
        f"required/forbidden kernels and launch counts hold for both arms ({len(checks_)} traces)")
    unseen = [u for c in checks_ for u in c.unobservable]
    if out.signature_status == "PASS" and unseen:
        out.signature_status = "SKIPPED"
        out.signature_reason = (f"not observable on {platform}: the trace holds tensor operators only (Triton's CPU "
                                "interpreter launches no named kernel), so kernel names and launch counts cannot be "
                                "checked here; forbidden kernels were checked and none ran. Unchecked: "
                                + "; ".join(unseen))[:3000]
    out.segment_status, out.segment_reason = _stage(
        [s.status for s in segments], [f for s in segments for f in s.failures], errors,
        "segment = every kernel of the call (the judge's flush and poison run in the judge's process)"
        + (f"; declared kernels {list(problem.segment.kernels)} all present and complete" if problem.segment.kernels else ""))
    return out


def _stage(statuses: list[str], failures: list[str], errors: list[str], ok: str) -> tuple[str, str]:
    if "FAIL" in statuses:
        return "FAIL", "; ".join(failures)[:3000]
    if errors:
        return "ERROR", "; ".join(errors)[:3000]
    return "PASS", ok

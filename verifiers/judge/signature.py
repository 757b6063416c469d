"""Runtime signature gate: did the arm run the kernels it claims to run?

Read off a profiled run outside the timed loop. Required patterns must each match a kernel
the calls launched (a "ghost" optimised branch that never runs fails here); forbidden
patterns must match none (a silent fallback to the baseline's kernel fails here); launches
per iteration must be the same every iteration and match the declared count; kernels
launched outside every call window (helper threads, deferred work) fail.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from verifiers.judge.kernel_trace import KernelRecord
from verifiers.problem import SignatureSpec
from verifiers.judge.segment import KernelStat, breakdown, call_kernels, per_iteration

Status = Literal["PASS", "FAIL", "SKIPPED", "ERROR"]


class SignatureCheck(BaseModel):
    arm: str
    source: str
    status: Status
    required: list[str] = Field(default_factory=list)
    forbidden: list[str] = Field(default_factory=list)
    expected_launches_per_iter: int | None = None
    launches_per_iter: list[int] = Field(default_factory=list)
    kernels: list[KernelStat] = Field(default_factory=list)
    required_missing: list[str] = Field(default_factory=list)
    forbidden_found: dict[str, list[str]] = Field(default_factory=dict)
    unattributed: list[str] = Field(default_factory=list)
    failures: list[str] = Field(default_factory=list)
    unobservable: list[str] = Field(default_factory=list, description="rules this platform's trace cannot show")


def merge(*specs: SignatureSpec) -> SignatureSpec:
    required: list[str] = []
    forbidden: list[str] = []
    launches = None
    for s in specs:
        required += [p for p in s.required if p not in required]
        forbidden += [p for p in s.forbidden if p not in forbidden]
        launches = s.launches_per_iter if s.launches_per_iter is not None else launches
    return SignatureSpec(required=tuple(required), forbidden=tuple(forbidden), launches_per_iter=launches)


def opaque_cpu_trace(records: Sequence[KernelRecord], platform: str) -> bool:
    """On CPU a trace of operators only (``aten::...``) cannot show a compiled kernel's name:
    Triton's CPU interpreter runs a kernel as tensor operations and launches nothing named.
    (A problem that wraps each interpreted kernel in a range named after it makes the names
    observable again: ``kernel_trace._cpu_kernels``.) An empty trace is not opaque: it shows
    nothing at all, which an arm gets by emptying its own trace (tests/test_verifier_attacks.py)."""
    return platform == "cpu" and bool(records) and all("::" in r.name for r in records)


def check_signature(records: Sequence[KernelRecord], spec: SignatureSpec, arm: str, flush_pattern: str,
                    opaque: bool = False) -> SignatureCheck:
    """``opaque``: the trace cannot show kernel names (``opaque_cpu_trace``): a required kernel
    that does not show, a launch count and an empty trace are then unobservable (the check is
    SKIPPED with the reason), never a failure; forbidden kernels that do show still fail."""
    source = records[0].source if records else "none"
    kernels = call_kernels(records, flush_pattern)
    iters = per_iteration(kernels)
    check = SignatureCheck(
        arm=arm, source=source, status="PASS", required=list(spec.required), forbidden=list(spec.forbidden),
        expected_launches_per_iter=spec.launches_per_iter,
        launches_per_iter=[len(ks) for ks in iters.values()],
        kernels=breakdown(kernels, len(iters)),
    )
    names = sorted({k.name for k in kernels})
    for pattern in spec.required:
        if not any(re.search(pattern, n) for n in names):
            check.required_missing.append(pattern)
            (check.unobservable if opaque else check.failures).append(
                f"{arm}: required kernel {pattern!r} never ran (kernels seen: {names[:12]}); "
                "the optimised branch is not what executes"
            )
    for pattern in spec.forbidden:
        hits = [n for n in names if re.search(pattern, n)]
        if hits:
            check.forbidden_found[pattern] = hits
            check.failures.append(f"{arm}: forbidden kernel {pattern!r} ran: {hits[:6]} (fallback to the baseline?)")
    counts = set(check.launches_per_iter)
    if len(counts) > 1:
        check.failures.append(f"{arm}: launches per iteration vary across calls: {check.launches_per_iter}")
    if spec.launches_per_iter is not None and counts and counts != {spec.launches_per_iter}:
        (check.unobservable if opaque else check.failures).append(
            f"{arm}: {sorted(counts)} launches per iteration, the signature declares {spec.launches_per_iter}"
        )
    stray = [r for r in records if r.window is None and r.source != "rocprofv3"]
    if stray and any(r.window is not None for r in records):
        check.unattributed = sorted({r.name for r in stray})
        check.failures.append(
            f"{arm}: {len(stray)} kernels ran outside every call window ({check.unattributed[:6]}): "
            "work launched from another thread or deferred past launch()"
        )
    if not kernels:
        (check.unobservable if opaque else check.failures).append(f"{arm}: the profiled calls launched no kernels")
    if check.failures:
        check.status = "FAIL"
    elif check.unobservable:
        check.status = "SKIPPED"
    return check

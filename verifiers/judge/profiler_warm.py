"""The profiler's first start, paid while the judge starts rather than after the timing.

On a GPU the first ``torch.profiler`` start in a process loads CUPTI: 5-6.5 s of host work on
the H200 whether or not the process has a context yet, while a second start takes 1 ms and a
cuBLAS GEMM times the same before and after a finished session (bench/results/
h200_profiler_start). The judge profiles the baseline process A and each shape's candidate
process after their timing; it has both load the profiler side by side with its own start-up
(spawning A', the candidate probe, hashing the manifest), so the profiling stage costs ~0.1 s.

The candidate's process is forked from the zygote before the baseline is timed and warms the
profiler running trusted code only: the candidate's module is imported into it (``greet``) once
the baseline was timed alone, as before. Nothing is timed while any warm-up runs: the judge
waits for them before the first timed phase. A warm-up that fails is noted and costs nothing
but time: the profiling stage then starts the profiler itself, as it always could.

Off by default (``VerifyOptions.profiler_warm_early``): on the H200 (2026-12-02, 20 A/A runs) it
cut the median verdict from 15.8 s to 14.8 s with the arm-clock precision unchanged (A/A
half-width 0.14 % / 0.32 %, 20/20 NO_DIFFERENCE), but the judge's own clock then read the
baseline 0.6-1.4 % slower than the candidate in every A/A run (0.994-1.002 without it), which
widened that clock's floor: 2 of 11 FASTER power tests read NO_DIFFERENCE. The cause is not
known yet; ``bench/profiler_warm_aa.py`` is the measurement that decides it.
"""
from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable


class EarlyProfiler:
    def __init__(self, enabled: bool, device: str, timeout_s: float, note: Callable[[str], None]) -> None:
        self.enabled = enabled
        self.device = device
        self.timeout_s = timeout_s
        self.note = note
        self.pending: list[tuple[Any, Future]] = []
        self.pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="judge-profiler-warm") if enabled else None

    def warm(self, arm: Any) -> None:
        """Start ``arm``'s warm-up; it runs on its own socket while the judge goes on."""
        if self.pool is None:
            return
        message = {"op": "profile_warm", "device": self.device}
        self.pending.append((arm, self.pool.submit(arm.handle.request, message, self.timeout_s)))

    def wait(self) -> float:
        """Every warm-up started so far has ended (or failed: noted); seconds spent waiting."""
        t0 = time.perf_counter()
        pending, self.pending = self.pending, []
        for arm, future in pending:
            try:
                reply = future.result(timeout=self.timeout_s + 5.0)
            except Exception as exc:  # noqa: BLE001 - a failed warm-up only costs the saving
                self.note(f"{arm.label}: the profiler's early start failed ({type(exc).__name__}: {exc}); "
                          "it starts at the profiling stage instead")
                continue
            if not reply.get("ok", False):
                self.note(f"{arm.label}: the profiler's early start failed ({reply.get('error', '?')[:200]}); "
                          "it starts at the profiling stage instead")
        return time.perf_counter() - t0

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)

"""The doctor's checks, in the order they run: id, what it checks, the function, its time
limit, and what it needs from the checks before it.

``needs``: ``torch`` (the torch check found an importable torch) or ``gpu`` (the device check
found a usable GPU). A check whose need is not met is not run; its result says why, naming
the check that decided (on a CPU box the GPU checks read "not applicable: no GPU ..."). The
parent (which enforces the limits) and the check process both read this one table.
"""
from __future__ import annotations

from dataclasses import dataclass

from skill_server.doctor.result import CheckResult, result

ENV = "skill_server.doctor.env_checks"
TOOLS = "skill_server.doctor.tool_checks"
MEASURE = "skill_server.doctor.measure_checks"
PROJECT = "skill_server.doctor.project_checks"


@dataclass(frozen=True)
class CheckSpec:
    id: str
    title: str
    target: str  # "module:function" taking a CheckContext
    limit_s: float
    needs: tuple[str, ...] = ()


CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("install", "project install", f"{PROJECT}:check_install", 10),
    CheckSpec("torch", "torch build", f"{ENV}:check_torch", 45),
    CheckSpec("device", "GPU device", f"{ENV}:check_device", 45, ("torch",)),
    CheckSpec("caches", "caches and flush size", f"{ENV}:check_caches", 10, ("gpu",)),
    CheckSpec("rocm", "ROCm install", f"{ENV}:check_rocm", 10),
    CheckSpec("linker", "ld.lld for gfx950", f"{TOOLS}:check_linker", 15),
    CheckSpec("flydsl", "FlyDSL", f"{TOOLS}:check_flydsl", 30, ("torch",)),
    CheckSpec("triton", "Triton", f"{TOOLS}:check_triton", 30),
    CheckSpec("card_tools", "what the cards' own arms need", f"{TOOLS}:check_card_tools", 60, ("torch",)),
    CheckSpec("runtimes", "one HIP/CUDA runtime per process", f"{ENV}:check_runtimes", 30, ("torch",)),
    CheckSpec("profiler", "profiler", f"{ENV}:check_profiler", 30, ("torch",)),
    CheckSpec("timer_floor", "timer floor", f"{MEASURE}:check_timer_floor", 20, ("torch",)),
    CheckSpec("flush_eviction", "cache flush evicts", f"{MEASURE}:check_flush_eviction", 30, ("gpu",)),
    CheckSpec("kernel_names", "profiler kernel names", f"{MEASURE}:check_kernel_names", 60, ("gpu",)),
    CheckSpec("rocprofv3", "rocprofv3", f"{TOOLS}:check_rocprofv3", 15),
    CheckSpec("cards", "card prerequisites", f"{PROJECT}:check_cards", 45),
)
BY_ID = {c.id: c for c in CHECKS}
#: the checks a verification on this box depends on (the verify pre-flight runs these)
VERIFY_CHECKS = ("torch", "device", "runtimes", "profiler")


def select(ids: list[str] | None) -> list[CheckSpec]:
    """The checks to run, in plan order; unknown ids raise ValueError naming the known ones.
    A check's needs are added (the device check for a GPU one): they decide whether it runs."""
    if not ids:
        return list(CHECKS)
    unknown = sorted(set(ids) - set(BY_ID))
    if unknown:
        raise ValueError(f"unknown doctor check(s) {unknown}; checks: {', '.join(BY_ID)}")
    wanted = set(ids)
    for i in list(wanted):
        for need in BY_ID[i].needs:
            wanted.add("torch")
            if need == "gpu":
                wanted.add("device")
    return [c for c in CHECKS if c.id in wanted]


def _first(results: list[CheckResult] | None) -> CheckResult | None:
    return results[0] if results else None


def blocked(spec: CheckSpec, done: dict[str, list[CheckResult]]) -> CheckResult | None:
    """The result for ``spec`` when a need is not met (None: it can run)."""
    for need in spec.needs:
        decider = "torch" if need == "torch" else "device"
        found = _first(done.get(decider))
        if found is not None and found.status in ("ok", "warn"):
            continue
        if found is None:
            why = f"not checked: needs the {decider} check, which did not run"
            return result(spec.id, spec.title, "not_applicable", why)
        if need == "gpu" and found.status == "not_applicable":  # its first clause is the reason: "no GPU: ..."
            return result(spec.id, spec.title, "not_applicable", found.finding.split(";")[0] + " (see device)")
        what = "a usable GPU" if need == "gpu" else "an importable torch"
        return result(spec.id, spec.title, "not_applicable",
                      f"not checked: needs {what}; {decider}: {found.status}: {found.finding}"[:500], found.fix)
    return None

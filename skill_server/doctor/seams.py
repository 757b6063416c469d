"""Every call ``skill-server doctor`` makes into the verifier, the toolchain finder and the
kernels, in one place.

The doctor measures with the verifier's own parts (its device, timer, flush, profiler path
and signature gate), so what it reports is what a verification on this box will see. Those
modules are being reworked on other branches (a judge/arm-process verifier, a per-session
timer floor, ROCm ``.kd`` name normalisation); when they move, this adapter is the only file
that changes. Each function imports what it needs when called: importing this module costs
nothing, and a box without torch can still run the checks that do not need it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from verifiers.gfx950.env import ROCM_LLD, ToolchainMissing, find_linker as _find, rocm_roots
from verifiers.hw.amd_caches import layout_for
from verifiers.hw.device import CallTimer, Device, Flusher, open_device as _open
from verifiers.hw.runtime_check import check_this_process
from verifiers.judge.kernel_trace import CALL_PREFIX, KernelRecord, from_chrome_trace
from verifiers.judge.signature import check_signature
from verifiers.problem import SegmentSpec, SignatureSpec

if TYPE_CHECKING:  # pragma: no cover
    from verifiers.gfx950.env import Linker
    from verifiers.hw.amd_caches import AmdCacheLayout
    from verifiers.hw.device import Device
    from verifiers.hw.runtime_check import RuntimeCheck
    from verifiers.judge.kernel_trace import KernelRecord
    from verifiers.judge.signature import SignatureCheck

MIB = 1 << 20


# ------------------------------------------------------------------ device, timer, flush
def open_device(choice: str = "auto") -> "Device":

    return _open(choice)


def flush_rule_bytes(platform: str, llc_bytes: int, arch: str | None = None) -> int:
    """What the verifier's flush writes by default on a device of ``platform`` whose reported
    last-level cache is ``llc_bytes`` (its own rule, asked without opening a device)."""

    return Device(torch_device=None, platform=platform, name="", llc_bytes=llc_bytes,  # type: ignore[arg-type]
                  properties={"gcnArchName": arch or ""}).default_flush_bytes()


def make_flusher(device: "Device", nbytes: int | None = None) -> Any:

    return Flusher(device, nbytes)


def time_calls(device: "Device", fn: Callable[[], Any], calls: int,
               before: Callable[[], Any] | None = None) -> tuple[list[float], list[float]]:
    """Time ``calls`` calls of ``fn`` through the verifier's ``CallTimer`` (device events ending
    after a device-wide synchronise on a GPU, the process CPU time on CPU), with ``before``
    run untimed ahead of each call. Returns (timed ms, host wall ms)."""

    timer = CallTimer(device, calls)
    for _ in range(calls):
        if before is not None:
            before()
            device.sync()
        timer.time_call(fn)
    return timer.results_ms()


def timer_description(device: "Device") -> str:
    if device.is_gpu:
        return "device events (end recorded after a device-wide synchronise), as the verifier times calls"
    return f"host {device.cpu_timer} (the verifier's CPU timer)"


# ------------------------------------------------------------- profiler and signature gate
def default_flush_pattern() -> str:

    return SegmentSpec().flush_pattern


def profile_records(launches: Sequence[Callable[[], None]], device: "Device", flusher: Any,
                    calls: int = 3) -> list["KernelRecord"]:
    """Profile ``calls`` calls the way an arm process does for the signature stage: each call in
    its ``verifier::call::<i>`` range and nothing else in the trace. In a verification the judge
    flushes from its own process, so the arm's trace never holds a flush: here the flush runs
    once before the profiler starts (a flush kernel inside the trace would count as work
    outside every call window)."""
    import tempfile
    from pathlib import Path

    from torch.profiler import ProfilerActivity, profile, record_function


    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.is_gpu else [])
    flusher.flush()
    device.sync()
    with profile(activities=activities) as prof:
        for i in range(calls):
            with record_function(f"{CALL_PREFIX}{i}"):
                launches[i % len(launches)]()
            device.sync()
    with tempfile.TemporaryDirectory(prefix="doctor-trace-") as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return from_chrome_trace(path, cpu=not device.is_gpu)


def signature_gate(records: Sequence["KernelRecord"], required: Sequence[str], launches_per_iter: int | None,
                   arm: str, flush_pattern: str | None = None) -> "SignatureCheck":
    """The verifier's runtime-signature gate on ``records`` (its name handling included)."""

    spec = SignatureSpec(required=tuple(required), launches_per_iter=launches_per_iter)
    return check_signature(records, spec, arm, flush_pattern or default_flush_pattern())


def kernel_record(name: str, window: str | None, iteration: int | None, start_us: float = 0.0,
                  dur_us: float = 1.0) -> "KernelRecord":

    return KernelRecord(name=name, start_us=start_us, dur_us=dur_us, window=window, iteration=iteration)


# ------------------------------------------------------------------------ toolchain, runtimes
def find_linker() -> "Linker":
    """:func:`verifiers.gfx950.env.find_linker` (raises ToolchainMissing with its one line)."""

    return _find()


def toolchain_missing_error() -> type[Exception]:

    return ToolchainMissing


def rocm_trees() -> list[Any]:
    """The ROCm trees the linker search looks in ($ROCM_PATH, then /opt/rocm), and the linker's
    path inside one."""

    return rocm_roots()


def rocm_linker_relpath() -> Any:

    return ROCM_LLD


def runtimes_in_this_process() -> "RuntimeCheck":

    return check_this_process()


# ------------------------------------------------------------------------------ caches
def known_amd_cache(arch: str | None) -> "AmdCacheLayout | None":
    """The full cache layout of a known AMD arch (L2 per XCD, XCDs, MALL), or None."""

    return layout_for(arch)

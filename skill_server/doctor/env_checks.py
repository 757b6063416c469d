"""Doctor checks of the box itself: torch's build, the GPU, its caches, the ROCm install,
the HIP/CUDA runtimes loaded in one process, and the profiler.

Each ``check_*`` takes the shared :class:`~skill_server.doctor.context.CheckContext` and returns
one :class:`~skill_server.doctor.result.CheckResult`. The decisions that need figures are pure
functions (``judge_*``) so they can be tested on the exact forms a real device reports.
"""
from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path
from typing import Any

from skill_server.doctor import seams as doctor_seams
from skill_server.doctor.context import CheckContext, build_of, module_present
from skill_server.doctor.result import (
    CacheDetails,
    CheckResult,
    DeviceDetails,
    RuntimeDetails,
    ToolDetails,
    result,
)

MIB = 1 << 20
TARGET_ARCH = "gfx950"
MIN_TORCH = (2, 6)
TORCH_FIX = ("install the platform's torch: on ROCm the wheel built for this box's ROCm "
             "(pip install torch --index-url https://download.pytorch.org/whl/rocmX.Y), on CUDA the CUDA wheel, "
             "elsewhere the CPU build (pip install torch==2.13.0)")


def _mib(n: int | float) -> str:
    return f"{n / MIB:.0f} MiB"


def _short(exc: BaseException, n: int = 240) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text if len(text) <= n else text[: n - 3] + "..."


# ------------------------------------------------------------------------------ torch
def check_torch(ctx: CheckContext) -> CheckResult:
    title = "torch build"
    if not module_present("torch"):
        return result("torch", title, "missing", "torch is not installed (nothing can be verified on this box)", TORCH_FIX)
    try:
        torch = ctx.torch()
    except Exception as exc:  # a broken ROCm/CUDA install shows up as an OSError from a shared library
        lib = isinstance(exc, OSError) or ".so" in str(exc)
        fix = ("torch's GPU libraries do not load: check the ROCm/CUDA install it was built against "
               "(ldd on torch/lib/libtorch_hip.so or libtorch_cuda.so, LD_LIBRARY_PATH), or reinstall the wheel"
               if lib else TORCH_FIX)
        return result("torch", title, "failed", f"import torch failed: {_short(exc)}", fix)
    build = build_of(torch)
    version = str(torch.__version__)
    what = {"rocm": f"ROCm build (HIP {torch.version.hip})", "cuda": f"CUDA build (CUDA {torch.version.cuda})",
            "cpu": "CPU build"}[build]
    details = ToolDetails(name="torch", version=version, path=str(Path(torch.__file__).parent),
                          expected=f">={MIN_TORCH[0]}.{MIN_TORCH[1]}")
    parts = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    if parts and parts < MIN_TORCH:
        return result("torch", title, "warn", f"torch {version}, {what}: older than the kernels need "
                      f"(>= {MIN_TORCH[0]}.{MIN_TORCH[1]})", TORCH_FIX, details)
    return result("torch", title, "ok", f"torch {version}, {what}", None, details)


# ----------------------------------------------------------------------------- device
def _visibility_env() -> str:
    names = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "HSA_OVERRIDE_GFX_VERSION")
    shown = [f"{n}={os.environ[n]!r}" for n in names if n in os.environ]
    return f"; set: {', '.join(shown)}" if shown else ""


def _device_nodes(build: str) -> str:
    if build == "rocm":
        kfd = Path("/dev/kfd")
        renders = sorted(Path("/dev/dri").glob("renderD*")) if Path("/dev/dri").is_dir() else []
        if not kfd.exists():
            return "; /dev/kfd is absent (no amdgpu driver, or a container started without --device=/dev/kfd)"
        if not os.access(kfd, os.R_OK | os.W_OK):
            return "; /dev/kfd is not readable and writable by this user (groups render, video)"
        if not renders:
            return "; no /dev/dri/renderD* node (container started without --device=/dev/dri?)"
        return ""
    nodes = sorted(Path("/dev").glob("nvidia[0-9]*"))
    return "" if nodes else "; no /dev/nvidia* node (driver not loaded, or a container started without GPUs)"


def check_device(ctx: CheckContext) -> CheckResult:
    title = "GPU device"
    torch = ctx.torch()
    build = ctx.build()
    version = str(torch.__version__)
    details = DeviceDetails(torch_version=version, build=build, hip=getattr(torch.version, "hip", None),
                            cuda=getattr(torch.version, "cuda", None))
    if build == "cpu":
        return result("device", title, "not_applicable",
                      f"no GPU: torch {version} is a CPU build; the GPU checks (caches, flush, kernel names) cannot "
                      "run here; verification runs on the CPU (host timer, Triton interpreter)",
                      "on the GPU box install the ROCm (or CUDA) build of torch", details)
    try:
        count = int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception as exc:
        return result("device", title, "failed", f"asking torch for GPUs raised {_short(exc)}",
                      "the GPU driver or runtime is broken: check `amd-smi list` / `rocminfo` (or `nvidia-smi`)", details)
    details.device_count = count
    runtime = f"ROCm build (HIP {details.hip})" if build == "rocm" else f"CUDA build (CUDA {details.cuda})"
    if count == 0:
        fix = ("check `amd-smi list` and `rocminfo`, that this user can open /dev/kfd and /dev/dri/renderD* "
               "(groups render and video), and that HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES are unset"
               if build == "rocm" else "check `nvidia-smi` and that CUDA_VISIBLE_DEVICES is unset")
        return result("device", title, "missing", f"torch {version} is a {runtime} but sees no GPU"
                      f"{_device_nodes(build)}{_visibility_env()}", fix + "; or verify on the CPU with --device cpu",
                      details)
    try:
        dev = ctx.gpu_device()
    except Exception as exc:
        return result("device", title, "failed", f"opening GPU 0 failed: {_short(exc)}",
                      "the GPU runtime is broken or the device is busy: check `amd-smi` / `nvidia-smi`", details)
    props = dev.properties
    details.device_name = dev.name
    details.arch = props.get("gcnArchName") or None
    details.capability = props.get("capability")
    details.compute_units = props.get("multi_processor_count")
    details.total_memory_bytes = props.get("total_memory")
    where = f"{dev.name}" + (f", {details.arch}" if details.arch else f", sm_{str(details.capability).replace('.', '')}")
    where += f", {details.compute_units} CUs/SMs, {(details.total_memory_bytes or 0) / (1 << 30):.0f} GiB; {count} GPU(s)"
    if build == "rocm":
        base = (details.arch or "").split(":")[0]
        if base != TARGET_ARCH:
            return result("device", title, "warn", f"{where}; torch {version} ({runtime}): the cards target {TARGET_ARCH} "
                          f"(MI355X), this is {base or 'an unknown arch'}: the FlyDSL gfx950 arms cannot run here",
                          "run the FlyDSL arms on an MI355X; the Triton twins and torch arms run here", details)
        return result("device", title, "ok", f"{where}; torch {version} ({runtime})", None, details)
    return result("device", title, "ok", f"{where}; torch {version} ({runtime}): the Triton twins and cuBLAS "
                  "baselines run here, the FlyDSL gfx950 arms only on an MI355X", None, details)


# ----------------------------------------------------------------------------- caches
def judge_caches(platform: str, arch: str | None, reported_l2: int, known: Any, flush_bytes: int,
                 device_name: str = "") -> CheckResult:
    """The cache layout a flush must beat, against what the verifier's flush writes.

    ``known``: the full layout of a known AMD arch (``AmdCacheLayout``: L2 per XCD, XCDs, MALL)
    or None. The last-level cache counted is every L2 plus the MALL: a flush must push the
    data out of all of them, and twice that is the verifier's own margin."""
    title = "caches and flush size"
    if known is not None:
        l2_each, domains, mall = int(known.l2_per_xcd_bytes), int(known.xcds), known.mall_bytes
        source = known.source
    else:
        l2_each, domains, mall = int(reported_l2), 1, None
        source = f"reported by {device_name or 'the device'}"
    llc = l2_each * domains + int(mall or 0)
    required = 2 * llc
    details = CacheDetails(l2_reported_bytes=int(reported_l2), l2_domains=domains, l2_total_bytes=l2_each * domains,
                           mall_bytes=mall, llc_bytes=llc, flush_bytes=int(flush_bytes), required_flush_bytes=required,
                           source=source)
    layout = (f"{domains} x {_mib(l2_each)} L2" if domains > 1 else f"{_mib(l2_each)} L2") + (
        f" + {_mib(mall)} MALL" if mall else "")
    torch_says = f" (torch reports {_mib(reported_l2)} L2_cache_size)" if known is not None else ""
    finding = f"{layout} = {_mib(llc)}{torch_says}; the verifier's flush writes {_mib(flush_bytes)}, 2x the LLC is {_mib(required)}"
    if platform == "rocm" and known is None:
        with_mall = 2 * (l2_each * domains + 256 * MIB)
        return result("caches", title, "warn",
                      f"{finding}; the Infinity Cache (MALL) size of {(arch or 'this arch').split(':')[0]} is not known to the "
                      "project and torch does not report it: whether the flush covers it cannot be told from sizes "
                      "(see flush_eviction)",
                      f"if the part has a 256 MiB Infinity Cache, verify with {_flush_option(with_mall)}", details)
    if flush_bytes < required:
        return result("caches", title, "warn", f"{finding}: {_mib(required - flush_bytes)} short, so data can stay "
                      "cached between timed calls and favour the arm that reuses it",
                      f"verify with {_flush_option(required)}", details)
    return result("caches", title, "ok", finding, None, details)


def _flush_option(nbytes: int) -> str:
    return f"--options '{{\"flush_bytes\": {nbytes}}}'"


def check_caches(ctx: CheckContext) -> CheckResult:
    dev = ctx.gpu_device()
    reported = int(dev.properties.get("L2_cache_size") or 0)
    arch = dev.properties.get("gcnArchName")
    known = doctor_seams.known_amd_cache(arch) if dev.platform == "rocm" else None
    flush = doctor_seams.flush_rule_bytes(dev.platform, dev.llc_bytes, arch)
    return judge_caches(dev.platform, arch, reported, known, flush, dev.name)


# ------------------------------------------------------------------------------- ROCm
def _rocm_version(root: Path) -> str | None:
    for name in (".info/version", ".info/version-dev"):
        try:
            text = (root / name).read_text().strip()
        except OSError:
            continue
        if text:
            return text.splitlines()[0].strip()
    libs = sorted((root / "lib").glob("libamdhip64.so.*")) if (root / "lib").is_dir() else []
    full = [p.name for p in libs if p.name.count(".") >= 3]
    return full[-1].removeprefix("libamdhip64.so.") + " (from libamdhip64)" if full else None


def _torch_hip(ctx: CheckContext) -> str | None:
    torch_result = ctx.results.get("torch")
    if torch_result is None or torch_result.status not in ("ok", "warn"):
        return None
    return getattr(ctx.torch().version, "hip", None)


def check_rocm(ctx: CheckContext) -> CheckResult:
    title = "ROCm install"
    env_root = os.environ.get("ROCM_PATH")
    hip = _torch_hip(ctx)
    if env_root:
        root = Path(env_root).expanduser()
        if not root.is_dir():
            return result("rocm", title, "failed", f"ROCM_PATH={env_root} does not exist",
                          "point ROCM_PATH at the ROCm install (e.g. /opt/rocm-7.0.0) or unset it")
        version = _rocm_version(root)
        has_lib = (root / "lib").is_dir() and any((root / "lib").glob("libamdhip64.so*"))
        if version is None and not has_lib:
            return result("rocm", title, "failed", f"ROCM_PATH={env_root} is not a ROCm install: no .info/version and "
                          "no lib/libamdhip64.so (a partial or broken install)",
                          "reinstall ROCm there, or point ROCM_PATH at a complete install (or unset it)")
    else:
        root = doctor_seams.rocm_trees()[-1]
        if not root.is_dir():
            if hip:
                return result("rocm", title, "warn", f"no system ROCm (ROCM_PATH unset, {root} absent): torch's own "
                              f"HIP {hip} runs kernels, but ROCm's ld.lld and rocprofv3 are not available",
                              "install ROCm (matching torch's HIP major version) for rocprofv3 and ROCm's ld.lld")
            return result("rocm", title, "not_applicable", f"no ROCm install here (ROCM_PATH unset, {root} absent): "
                          "not a ROCm box")
        version = _rocm_version(root)
    where = f"ROCm {version or '(version unknown)'} at {root}"
    if hip and version and hip.split(".")[0] != version.split(".")[0]:
        return result("rocm", title, "warn", f"{where}, but torch is built for HIP {hip}: torch's and the system's "
                      "HIP runtimes can both load into one process (see runtimes)",
                      "install the torch wheel built for this ROCm, or a ROCm matching torch's HIP")
    return result("rocm", title, "ok", where + (f"; torch HIP {hip}" if hip else ""))


# --------------------------------------------------------------------------- runtimes
def load_flydsl_runtime() -> tuple[str | None, str | None]:
    """Load FlyDSL's JIT runtime library the way FlyDSL does (dlopen of the file it resolves).
    Returns (path, error): path None when FlyDSL is absent."""
    if not module_present("flydsl"):
        return None, None
    try:
        from flydsl.compiler.jit_executor import _resolve_runtime_libs  # FlyDSL's own resolution

        path = _resolve_runtime_libs()[0]
    except Exception as exc:
        return None, f"FlyDSL's runtime library cannot be located: {_short(exc)}"
    try:
        ctypes.CDLL(path)
    except OSError as exc:
        return path, str(exc)
    return path, None


def _load_kernel_libraries(ctx: CheckContext, gpu: bool) -> tuple[list[str], list[str], str | None]:
    """Load what a verification loads: torch (and its GPU context), Triton's driver, FlyDSL's
    runtime, aiter. Returns (what loaded, notes, FlyDSL runtime error)."""
    torch = ctx.torch()
    loaded, notes = [f"torch {torch.__version__}"], []
    if gpu:
        dev = ctx.gpu_device()
        torch.empty(1, device=dev.torch_device)  # creates the context: the runtime is live
        if module_present("triton"):
            try:
                import triton

                triton.runtime.driver.active.get_current_device()
                loaded.append(f"Triton {triton.__version__} driver")
            except Exception as exc:
                notes.append(f"Triton's driver did not start: {_short(exc, 160)}")
    path, error = load_flydsl_runtime()
    if path and not error:
        loaded.append(f"FlyDSL runtime {Path(path).name}")
    if ctx.build() == "rocm" and module_present("aiter"):
        try:
            import aiter  # noqa: F401

            loaded.append("aiter")
        except Exception as exc:
            notes.append(f"aiter did not import: {_short(exc, 160)}")
    return loaded, notes, error


def check_runtimes(ctx: CheckContext) -> CheckResult:
    title = "one HIP/CUDA runtime per process"
    gpu = ctx.gpu_ready()
    loaded, notes, fly_error = _load_kernel_libraries(ctx, gpu)
    check = doctor_seams.runtimes_in_this_process()
    details = RuntimeDetails(loaded_first=loaded, libraries=[lib.label for lib in check.libraries], notes=notes)
    after = ", ".join(loaded)
    if not check.checked:
        return result("runtimes", title, "not_applicable", check.note or "the loaded libraries cannot be listed", None, details)
    if check.problem:
        return result("runtimes", title, "failed", f"after loading {after}: {check.problem}",
                      "use one ROCm (or CUDA) install for torch, FlyDSL and aiter: a torch wheel built for the box's "
                      "ROCm, and LD_LIBRARY_PATH naming only that install's lib folder", details)
    build = ctx.build()
    if fly_error and build == "rocm":
        return result("runtimes", title, "missing", f"FlyDSL's JIT runtime does not load ({fly_error}): FlyDSL kernels "
                      "cannot launch in this process",
                      "FlyDSL 0.5.0's runtime links libamdhip64.so.7 (ROCm 7): install ROCm 7 and a torch built for it, "
                      "or put ROCm 7's lib folder on LD_LIBRARY_PATH", details)
    if not check.libraries:
        why = f" (FlyDSL's runtime does not load here: {fly_error})" if fly_error else ""
        return result("runtimes", title, "not_applicable",
                      f"no HIP/CUDA runtime is loaded after {after}: no GPU build of torch here{why}", None, details)
    names = ", ".join(details.libraries)
    return result("runtimes", title, "ok", f"one runtime per family after loading {after}: {names}", None, details)


# --------------------------------------------------------------------------- profiler
def judge_profiler(is_gpu: bool, supported: set[str], call_kernels: list[str]) -> tuple[str, str, str | None]:
    """(status, finding, fix) for the profiler from the activities torch supports and the
    kernels it recorded inside one profiled call."""
    shown = ", ".join(sorted(call_kernels)[:4]) or "none"
    if not is_gpu:
        if call_kernels:
            return "ok", (f"torch.profiler records CPU ops here ({shown}): the verifier's CPU signature path works; "
                          "device kernel tracing needs a GPU build"), None
        return ("missing", "torch.profiler recorded nothing for a CPU op: the verifier's signature stage cannot run",
                "reinstall torch (its profiler, kineto, is broken) or verify with --no-profile")
    fix = ("install a torch build whose profiler traces the GPU (the official ROCm and CUDA wheels do; on ROCm "
           "kineto needs roctracer / rocprofiler-sdk loadable), or verify with --no-profile (signature gates SKIPPED)")
    if "CUDA" not in supported:
        return ("missing", f"torch.profiler supports {sorted(supported)} only: no device activity, so the verifier's "
                "runtime signatures cannot be read", fix)
    if not call_kernels:
        return ("missing", "torch.profiler recorded no device kernel for a torch kernel launch: the verifier's "
                "runtime-signature stage will ERROR", fix)
    return "ok", f"torch.profiler records device kernels ({shown})", None


def check_profiler(ctx: CheckContext) -> CheckResult:
    title = "profiler"
    torch = ctx.torch()
    supported = {a.name for a in torch.profiler.supported_activities()}
    dev = ctx.timing_device()
    x = torch.zeros(256, device=dev.torch_device)
    flusher = doctor_seams.make_flusher(dev, 1 << 20)
    records = doctor_seams.profile_records([lambda: x.add_(1.0)], dev, flusher, calls=2)
    kernels = sorted({r.name for r in records if r.window == "call"})
    status, finding, fix = judge_profiler(dev.is_gpu, supported, kernels)
    return result("profiler", title, status, finding, fix, ToolDetails(name="torch.profiler", version=str(torch.__version__)))

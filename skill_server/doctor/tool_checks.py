"""Doctor checks of the toolchain: ld.lld for gfx950, FlyDSL (against the pinned version),
Triton, aiter with its CK block-scale module, and rocprofv3.

A tool that is found is also run (``--version``) with a time limit: a ROCm tree whose
binaries are broken or hang must read as ``failed``, not as present.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from verifiers import locations
from skill_server.doctor import seams as doctor_seams
from skill_server.doctor.context import CheckContext, module_present
from skill_server.doctor.result import CheckResult, ToolDetails, result

TOOL_TIMEOUT_S = 10.0
#: the oldest upstream LLVM whose lld links gfx950 code objects
MIN_UPSTREAM_LLD = 20
AITER_INSTALL = ("install aiter on the ROCm box (git clone --recursive https://github.com/ROCm/aiter; "
                 "pip install -e aiter)")


def run_version(path: str | Path, flag: str = "--version", timeout_s: float = TOOL_TIMEOUT_S) -> tuple[str | None, str | None]:
    """(first line of the version output, None) or (None, why it did not answer)."""
    try:
        proc = subprocess.run([str(path), flag], capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, errors="replace")
    except subprocess.TimeoutExpired:
        return None, f"`{path} {flag}` did not answer within {timeout_s:.0f} s (hung)"
    except OSError as exc:
        return None, f"`{path} {flag}` cannot run: {exc.strerror or exc}"
    out = (proc.stdout or "").strip() or (proc.stderr or "").strip()
    if proc.returncode != 0:
        tail = " ".join(out.splitlines()[-2:])[:200]
        return None, f"`{path} {flag}` exited {proc.returncode}" + (f": {tail}" if tail else "")
    return (out.splitlines()[0].strip() if out else ""), None


# ------------------------------------------------------------------------------ linker
def check_linker(ctx: CheckContext) -> CheckResult:
    title = "ld.lld for gfx950"
    missing = doctor_seams.toolchain_missing_error()
    try:
        linker = doctor_seams.find_linker()
    except missing as exc:
        return result("linker", title, "missing", str(exc).split("; on a ROCm box")[0],
                      "on a ROCm box set ROCM_PATH to the ROCm install (its llvm/bin/ld.lld); elsewhere "
                      "`apt-get install -y lld-22`; or point SKILL_SERVER_LD_LLD at an ld.lld from LLVM >= 20")
    version, error = run_version(linker.path)
    details = ToolDetails(name="ld.lld", version=version, path=str(linker.path))
    origin = {"rocm": f"ROCm's {linker.path}", "system": f"Debian's {linker.path}",
              "override": f"SKILL_SERVER_LD_LLD={linker.path}"}[linker.origin]
    if error:
        fix = ("reinstall ROCm's compiler (the rocm-llvm package) or point ROCM_PATH at a complete install"
               if linker.origin == "rocm" else "reinstall it (`apt-get install --reinstall lld-22`) or set SKILL_SERVER_LD_LLD")
        return result("linker", title, "failed", f"{origin} is found but broken: {error}", fix, details)
    partial = [str(root) for root in doctor_seams.rocm_trees()
               if linker.origin != "rocm" and root.is_dir() and not (root / doctor_seams.rocm_linker_relpath()).is_file()]
    major = re.search(r"LLD (\d+)", version or "")
    if linker.origin == "system" and major and int(major.group(1)) < MIN_UPSTREAM_LLD:
        return result("linker", title, "warn", f"{origin}: {version}: older than LLVM {MIN_UPSTREAM_LLD}, which "
                      "first links gfx950", "`apt-get install -y lld-22`", details)
    finding = f"{origin}: {version}"
    if partial:
        return result("linker", title, "warn", f"{finding}; the ROCm tree {', '.join(partial)} has no llvm/bin/ld.lld "
                      "(a partial ROCm install?), so compiles link with this one instead",
                      "install ROCm's compiler (rocm-llvm) so gfx950 code links with ROCm's own linker", details)
    return result("linker", title, "ok", finding, None, details)


# ------------------------------------------------------------------------------ FlyDSL
def flydsl_pin() -> str | None:
    """The FlyDSL version the project pins (pyproject's ``flydsl`` extra; the wheel's metadata when installed)."""
    pyproject = locations.CODE_ROOT / "pyproject.toml"
    requirements: list[str] = []
    if pyproject.is_file():
        import tomllib

        try:
            extras = tomllib.loads(pyproject.read_text()).get("project", {}).get("optional-dependencies", {})
        except (OSError, tomllib.TOMLDecodeError):
            extras = {}
        requirements = [r for group in extras.values() for r in group]
    else:
        from importlib.metadata import PackageNotFoundError, requires

        try:
            requirements = list(requires(locations.APP_NAME) or [])
        except PackageNotFoundError:
            pass
    for req in requirements:
        m = re.match(r"\s*flydsl\s*==\s*([\w.]+)", req)
        if m:
            return m.group(1)
    return None


def _installed_version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def check_flydsl(ctx: CheckContext) -> CheckResult:
    title = "FlyDSL"
    pin = flydsl_pin()
    install = f"pip install flydsl=={pin}" if pin else "pip install flydsl"
    version = _installed_version("flydsl")
    details = ToolDetails(name="flydsl", version=version, expected=pin)
    if version is None or not module_present("flydsl"):
        return result("flydsl", title, "missing", "FlyDSL is not installed: the gfx950 reference kernels and the "
                      "static gates cannot compile", install, details)
    try:
        import flydsl
    except Exception as exc:
        return result("flydsl", title, "failed", f"import flydsl {version} failed: {type(exc).__name__}: {exc}"[:300],
                      f"reinstall it ({install}); FlyDSL needs torch and numpy importable", details)
    details.path = str(Path(flydsl.__file__).parent)
    arch_note = ""
    if ctx.gpu_ready() and ctx.build() == "rocm":
        device_arch = str(ctx.gpu_device().properties.get("gcnArchName") or "").split(":")[0]
        try:
            from flydsl.runtime.device import get_rocm_arch

            fly_arch = get_rocm_arch()
        except Exception as exc:
            fly_arch = f"unknown ({type(exc).__name__})"
        if device_arch and fly_arch != device_arch:
            return result("flydsl", title, "failed", f"FlyDSL {version} would compile for {fly_arch} but the GPU is "
                          f"{device_arch} (rocm_agent_enumerator missing or a stale FLYDSL_GPU_ARCH)",
                          f"export FLYDSL_GPU_ARCH={device_arch}, or install rocminfo (rocm_agent_enumerator)", details)
        arch_note = f"; compiles for {fly_arch}, the GPU's arch"
    if pin and version != pin:
        return result("flydsl", title, "warn", f"FlyDSL {version} installed; the kernels are written against {pin} "
                      "(FlyDSL changes helper signatures between releases)" + arch_note, install, details)
    return result("flydsl", title, "ok", f"FlyDSL {version} (the pinned version){arch_note}", None, details)


# ------------------------------------------------------------------------------ Triton
def check_triton(ctx: CheckContext) -> CheckResult:
    title = "Triton"
    if not module_present("triton"):
        return result("triton", title, "missing", "Triton is not installed: the portable twins cannot run",
                      "pip install triton (ROCm torch wheels bring it as pytorch-triton-rocm)")
    try:
        import triton
    except Exception as exc:
        return result("triton", title, "failed", f"import triton failed: {type(exc).__name__}: {exc}"[:300],
                      "reinstall the Triton that matches torch (pip install --force-reinstall triton)")
    version = str(getattr(triton, "__version__", "?"))
    details = ToolDetails(name="triton", version=version, path=str(Path(triton.__file__).parent))
    if not ctx.gpu_ready():
        return result("triton", title, "ok", f"Triton {version}; no GPU here, so its kernels run under "
                      "TRITON_INTERPRET=1 (slow; small shapes only)", None, details)
    try:
        target = triton.runtime.driver.active.get_current_target()
    except Exception as exc:
        return result("triton", title, "failed", f"Triton {version} has no working GPU driver: {type(exc).__name__}: {exc}"[:300],
                      "install the Triton built for this torch (ROCm: pytorch-triton-rocm from the same index)", details)
    backend, arch = str(getattr(target, "backend", "?")), str(getattr(target, "arch", "?"))
    want = "hip" if ctx.build() == "rocm" else "cuda"
    if backend != want:
        return result("triton", title, "failed", f"Triton {version} targets {backend} {arch} on a {want} box",
                      "install the Triton built for this torch", details)
    return result("triton", title, "ok", f"Triton {version}, backend {backend} {arch}", None, details)


# ------------------------------------------------------------------------------- aiter
def check_aiter(ctx: CheckContext) -> CheckResult:
    title = "aiter (CK block-scale baseline)"
    build = ctx.build()
    version = _installed_version("aiter")
    details = ToolDetails(name="aiter", version=version)
    if build != "rocm":
        here = "installed but unused" if module_present("aiter") else "not installed"
        return result("aiter", title, "not_applicable", f"aiter is ROCm-only ({here}): on a {build} box the block-scale "
                      "card's baseline is " + ("cuBLAS" if build == "cuda" else "the torch dequant arm"), None, details)
    shapes = doctor_seams.ck_blockscale_shapes()
    prepare = doctor_seams.ck_prepare_command(shapes)
    if not module_present("aiter"):
        return result("aiter", title, "missing", "aiter is not installed: the block-scale card's ROCm baseline "
                      "(ck_blockscale, the production CK kernel) cannot run", f"{AITER_INSTALL}; then {prepare}", details)
    try:
        import aiter
    except Exception as exc:
        return result("aiter", title, "failed", f"import aiter failed: {type(exc).__name__}: {exc}"[:300],
                      "reinstall aiter against this torch and ROCm", details)
    details.path = str(Path(aiter.__file__).parent)
    if not ctx.gpu_ready():
        return result("aiter", title, "warn", f"aiter {version} imports, but with no GPU its tuned dispatch cannot be "
                      "looked up", None, details)
    unbuilt: dict[str, list[str]] = {}
    instances = []
    for s in shapes:
        label = f"{s['M']}x{s['N']}x{s['K']}"
        try:
            instance, module, built = doctor_seams.ck_blockscale_dispatch(aiter, s)
        except Exception as exc:
            return result("aiter", title, "failed", f"aiter's tuned dispatch for {label} failed: {type(exc).__name__}: "
                          f"{exc}"[:300], "reinstall aiter (its tuned CSV or gemm_a8w8 ops are missing)", details)
        instances.append(f"{label}: {instance}")
        if not built:
            unbuilt.setdefault(module or "?", []).append(label)
    if unbuilt:
        what = "; ".join(f"{m} (for {', '.join(v)})" for m, v in unbuilt.items())
        return result("aiter", title, "missing", f"aiter {version}: the CK block-scale modules the card's shapes need are "
                      f"not built: {what}; the ck_blockscale baseline refuses until they are (first build: minutes)",
                      prepare, details)
    return result("aiter", title, "ok", f"aiter {version}; CK block-scale modules built; dispatch: {'; '.join(instances)}"[:600],
                  None, details)


# ---------------------------------------------------------------------------- rocprofv3
def find_rocprofv3() -> str | None:
    found = shutil.which("rocprofv3")
    if found:
        return found
    for root in doctor_seams.rocm_trees():
        cand = Path(root) / "bin" / "rocprofv3"
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return None


def check_rocprofv3(ctx: CheckContext) -> CheckResult:
    title = "rocprofv3"
    path = find_rocprofv3()
    rocm = ctx.results.get("torch") is not None and ctx.results["torch"].status in ("ok", "warn") and ctx.build() == "rocm"
    if path is None:
        if rocm:
            return result("rocprofv3", title, "warn", "rocprofv3 not found (PATH, $ROCM_PATH/bin, /opt/rocm/bin): no "
                          "independent kernel trace for --rocprof-trace or for a failure report",
                          "install rocprofiler-sdk (part of ROCm >= 6.2) and put $ROCM_PATH/bin on PATH")
        return result("rocprofv3", title, "not_applicable", "rocprofv3 not found: not a ROCm box")
    _, error = run_version(path, "--help")  # its argparse CLI always has --help; --version is not documented
    details = ToolDetails(name="rocprofv3", path=path)
    if error:
        return result("rocprofv3", title, "failed", f"rocprofv3 at {path} is broken: {error}",
                      "reinstall rocprofiler-sdk", details)
    return result("rocprofv3", title, "ok", f"rocprofv3 at {path} answers --help; ROCm 7 writes a "
                  "rocpd database by default: pass --output-format csv for a kernel_trace.csv", None, details)

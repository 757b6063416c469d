"""Doctor checks of the toolchain: ld.lld for gfx950, FlyDSL (against the pinned version),
Triton, rocprofv3, and what the cards' own arms need (their ``doctor_checks.py``).

A tool that is found is also run (``--version``) with a time limit: a ROCm tree whose
binaries are broken or hang must read as ``failed``, not as present.
"""
from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from verifiers import card_folder, locations
from skill_server.doctor import seams as doctor_seams
from skill_server.doctor.context import CheckContext, module_present
from skill_server.doctor.result import CheckResult, ToolDetails, result

TOOL_TIMEOUT_S = 10.0
#: the oldest upstream LLVM whose lld links gfx950 code objects
MIN_UPSTREAM_LLD = 20


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


# ------------------------------------------------------------------------ the cards' own
def check_card_tools(ctx: CheckContext) -> list[CheckResult]:
    """What each card's own arms need from the box: the ``CHECKS`` of every card folder's
    ``doctor_checks.py`` (the card-folder convention, ``verifiers.card_folder``), run here
    with this context; a check that raises is ``failed`` with its error, never a crash."""
    out: list[CheckResult] = []
    for folder in card_folder.card_folders():
        if not card_folder.module_file(folder, card_folder.DOCTOR_CHECKS).is_file():
            continue
        try:
            checks = importlib.import_module(card_folder.module_name(folder, card_folder.DOCTOR_CHECKS)).CHECKS
        except Exception as exc:  # noqa: BLE001 - card code
            out.append(result(f"card:{folder}", f"doctor checks of kernels/{folder}", "failed",
                              f"kernels/{folder}/doctor_checks.py does not load: {type(exc).__name__}: {exc}"[:400],
                              "fix the card folder (kernels/README.md says what doctor_checks.py defines)"))
            continue
        for check_id, (title, fn) in checks.items():
            try:
                found = fn(ctx)
            except Exception as exc:  # noqa: BLE001 - card code
                found = {"status": "failed", "finding": f"{type(exc).__name__}: {exc}"[:400]}
            details = ToolDetails(name=check_id, version=found.get("version"), path=found.get("path"))
            out.append(result(check_id, title, found["status"], found["finding"], found.get("fix"), details))
    return out


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

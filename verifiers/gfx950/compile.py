"""Compile one CompileTarget for gfx950 (compile-only) and collect ISA, IR and resources.

``compile_targets(folder, names)`` compiles in fresh subprocesses
(``python -m verifiers.gfx950.compile FOLDER OUT_ROOT CACHE_ROOT TARGET...``), so the
compile-only environment and FlyDSL's global state never leak into the caller and a
compiler crash cannot take it down. Uncached targets are split into ``jobs`` batches (one
subprocess each, so torch/flydsl are imported once per batch); a target whose batch died
without a result is retried alone, so a crash is attributed to the right target.

FlyDSL's ``FLYDSL_DUMP_IR`` stages give the final ISA (``*_final_isa.s``) and the LLVM IR
(``*_llvm_ir.ll``); resources are parsed from the ISA directives and metadata.

Cache: ``cache_root()/artifacts/<folder>/<target>-<key>/`` where ``key`` hashes the target
name and config, the flydsl version, the arch and the ld.lld in use; the entry also records
the sha256 of every repo source file the compile imported (``kernels/**``,
``verifiers/gfx950/{compile,env}.py``, the target's extra ``sources``) and is valid only
while all of them are unchanged. Layout: ``artifacts.json`` (CompileArtifacts without the
big texts) and per kernel ``<kernel>.s`` (final ISA) and ``<kernel>.ll`` (LLVM IR).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, PrivateAttr

from verifiers import locations
from verifiers.gfx950 import env as _env
from verifiers.gfx950.isa import KernelArtifacts, ir_function, kernel_names, parse_resources
from verifiers.gfx950.targets import load_targets

KERNELS_DIR = locations.KERNELS_DIR
#: files of this package that shape the compiled code
_OWN_SOURCES = ("verifiers/gfx950/compile.py", "verifiers/gfx950/env.py")
EXIT_SKIPPED = 3  # the child found the toolchain missing
ARTIFACT_FORMAT = "2"  # 2: entries keep each kernel's code object and host launcher (the emulator's input)


class CompileArtifacts(BaseModel):
    """The outcome of compiling one target.

    status: 'ok' (kernels filled), 'skipped' (toolchain missing: reason says what to
      install), 'error' (the compile failed: reason holds the tail of its output).
    """

    folder: str
    target: str
    status: Literal["ok", "skipped", "error"]
    reason: str | None = None
    kernels: list[KernelArtifacts] = []
    compile_seconds: float | None = None  # the compile itself (make + flyc.compile), also on a cache hit
    cache_hit: bool = False
    flydsl_version: str | None = None
    artifacts_dir: str | None = None
    sources: dict[str, str] = {}  # repo-relative path -> sha256 of what the compile imported
    #: bytes of the per-kernel code object / host launcher files between the child and the cache
    _files: dict[str, bytes] = PrivateAttr(default_factory=dict)


def compile_target(
    folder: str,
    target: str,
    *,
    use_cache: bool = True,
    cache_dir: Path | None = None,
    timeout_s: float = 600.0,
) -> CompileArtifacts:
    """Compile ``target`` of ``kernels/<folder>/gfx950_targets.py`` for gfx950.

    Never raises for a missing toolchain or a failing compile: returns status 'skipped' /
    'error' with the reason. Raises KeyError for an unknown target name.
    """
    return compile_targets(folder, [target], use_cache=use_cache, cache_dir=cache_dir, timeout_s=timeout_s)[target]


def compile_targets(
    folder: str,
    targets: list[str],
    *,
    use_cache: bool = True,
    cache_dir: Path | None = None,
    timeout_s: float = 600.0,
    jobs: int | None = None,
) -> dict[str, CompileArtifacts]:
    """Compile several targets of one folder; cached ones are not recompiled.

    timeout_s is per target. jobs: parallel subprocesses (default min(2, CPUs)).
    """
    decl = load_targets(folder)
    specs = {name: decl.get(name)[0] for name in targets}  # KeyError lists the valid names
    problem = _env.toolchain_problem()
    if problem:
        return {n: CompileArtifacts(folder=folder, target=n, status="skipped", reason=problem) for n in targets}
    root = cache_dir or _env.cache_root()
    results: dict[str, CompileArtifacts] = {}
    entries = {n: root / "artifacts" / folder / f"{n}-{cache_key(specs[n])[:16]}" for n in targets}
    todo = []
    for n in targets:
        hit = _load_entry(entries[n]) if use_cache else None
        if hit is not None:
            hit.cache_hit = True
            results[n] = hit
        else:
            todo.append(n)
    if todo:
        jobs = max(1, min(jobs or min(2, os.cpu_count() or 1), len(todo)))
        batches = [todo[i::jobs] for i in range(jobs)]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for batch_result in pool.map(lambda b: _run_batch(folder, b, root, timeout_s), batches):
                results.update(batch_result)
        # a batch that crashed leaves targets without a result: retry them one by one
        for n in [n for n in todo if n not in results]:
            results.update(_run_batch(folder, [n], root, timeout_s))
        for n in todo:
            if results[n].status == "ok":
                _store_entry(results[n], entries[n])
    return {n: results[n] for n in targets}


def cache_key(target) -> str:  # noqa: ANN001 - CompileTarget
    """The entry key: target name + config, flydsl version, arch, ld.lld. Source files are
    checked separately (``CompileArtifacts.sources``)."""
    h = hashlib.sha256()
    h.update(json.dumps({"target": target.name, "config": dict(target.config)}, sort_keys=True, default=str).encode())
    h.update(_env.flydsl_version().encode())
    h.update(_env.ARCH.encode())
    h.update(str(_env.find_ld_lld().resolve()).encode())
    h.update(ARTIFACT_FORMAT.encode())
    return h.hexdigest()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _sources_unchanged(sources: dict[str, str]) -> bool:
    if not sources:
        return False
    for rel, digest in sources.items():
        f = locations.repo_path(rel)
        if not f.is_file() or _sha256(f) != digest:
            return False
    return True


def _load_entry(entry: Path) -> CompileArtifacts | None:
    meta = entry / "artifacts.json"
    if not meta.is_file():
        return None
    try:
        art = CompileArtifacts.model_validate_json(meta.read_text())
        if not _sources_unchanged(art.sources):
            return None
        for k in art.kernels:
            k.isa = (entry / f"{k.kernel}.s").read_text()
            ll = entry / f"{k.kernel}.ll"
            k.llvm_ir = ll.read_text() if ll.is_file() else ""
    except (OSError, ValueError):
        return None  # a broken entry is a miss, never an error
    art.artifacts_dir = str(entry)
    return art


def _store_entry(art: CompileArtifacts, entry: Path) -> None:
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
    for k in art.kernels:
        (tmp / f"{k.kernel}.s").write_text(k.isa)
        (tmp / f"{k.kernel}.ll").write_text(k.llvm_ir)
    for fname, blob in art._files.items():  # code objects and host launchers read from the child
        (tmp / fname).write_bytes(blob)
    slim = art.model_copy(deep=True)
    for k in slim.kernels:
        k.isa, k.llvm_ir = "", ""
    slim.artifacts_dir = None
    (tmp / "artifacts.json").write_text(slim.model_dump_json(indent=1))
    # drop older entries of this target (other keys), then publish atomically
    prefix = entry.name.rsplit("-", 1)[0] + "-"
    for old in entry.parent.glob(prefix + "*"):
        if old != entry and old.is_dir() and not old.name.startswith(".") and len(old.name) == len(entry.name):
            shutil.rmtree(old, ignore_errors=True)
    if entry.exists():
        shutil.rmtree(entry, ignore_errors=True)  # stale sources: replace
    try:
        os.replace(tmp, entry)
    except OSError:  # another process published the same entry first
        shutil.rmtree(tmp, ignore_errors=True)
    art.artifacts_dir = str(entry)


def _run_batch(folder: str, names: list[str], root: Path, timeout_s: float) -> dict[str, CompileArtifacts]:
    """One subprocess compiling ``names`` in order; returns the targets it finished."""
    with tempfile.TemporaryDirectory(prefix="gfx950-") as tmp:
        out = Path(tmp)
        cmd = [sys.executable, "-m", "verifiers.gfx950.compile", folder, str(out), str(root), *names]
        child_env = dict(os.environ)
        child_env["PYTHONPATH"] = locations.child_pythonpath(child_env.get("PYTHONPATH"), out / "pyroot")
        limit = timeout_s * len(names)
        try:
            proc = subprocess.run(
                cmd, cwd=str(locations.CODE_ROOT if not locations.INSTALLED else out), env=child_env, capture_output=True, text=True, timeout=limit
            )
            rc, tail = proc.returncode, (proc.stdout[-2000:] + "\n" + proc.stderr[-4000:]).strip()
        except subprocess.TimeoutExpired:
            rc, tail = None, f"compile timed out after {limit:.0f} s"
        results: dict[str, CompileArtifacts] = {}
        for n in names:
            r = _read_result(folder, n, out / _safe(n))
            if r is not None:
                results[n] = r
        if len(names) == 1 and names[0] not in results:
            reason = f"compile subprocess exited {rc}:\n{tail}" if rc is not None else tail
            status = "skipped" if rc == EXIT_SKIPPED else "error"
            results[names[0]] = CompileArtifacts(folder=folder, target=names[0], status=status, reason=reason)
        return results


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _read_result(folder: str, name: str, d: Path) -> CompileArtifacts | None:
    if (d / "skipped.txt").is_file():
        return CompileArtifacts(folder=folder, target=name, status="skipped", reason=(d / "skipped.txt").read_text())
    if (d / "error.txt").is_file():
        return CompileArtifacts(folder=folder, target=name, status="error", reason=(d / "error.txt").read_text())
    if not (d / "result.json").is_file():
        return None
    try:
        info = json.loads((d / "result.json").read_text())
        kernels = [_kernel_artifacts(d, k) for k in info["kernels"]]
    except (OSError, ValueError, KeyError) as exc:
        return CompileArtifacts(folder=folder, target=name, status="error", reason=f"unreadable artifacts: {exc}")
    if not kernels:
        return CompileArtifacts(
            folder=folder, target=name, status="error",
            reason="the compile produced no kernel (no .amdhsa_kernel in the final ISA)",
        )
    art = CompileArtifacts(
        folder=folder,
        target=name,
        status="ok",
        kernels=kernels,
        compile_seconds=round(float(info.get("compile_seconds", 0.0)), 3),
        flydsl_version=info.get("flydsl_version"),
        sources=info.get("sources", {}),
    )
    for k in kernels:
        for fname in (k.code_object_file, k.host_ir_file):
            if fname:
                art._files[fname] = (d / fname).read_bytes()
    return art


def _kernel_artifacts(d: Path, name: str) -> KernelArtifacts:
    isa = (d / f"{name}.s").read_text()
    ll = d / f"{name}.ll"
    return KernelArtifacts(
        kernel=name,
        isa=isa,
        llvm_ir=ll.read_text() if ll.is_file() else "",
        resources=parse_resources(isa, name),
        code_object_file=f"{name}.hsaco" if (d / f"{name}.hsaco").is_file() else "",
        host_ir_file=f"{name}.host.mlir" if (d / f"{name}.host.mlir").is_file() else "",
    )


_BIN_ATTR = re.compile(r'bin = "((?:[^"\\]|\\.)*)"')


def split_binary_module(text: str) -> tuple[bytes, str]:
    """From FlyDSL's ``*_gpu_module_to_binary.mlir`` dump: the code object bytes of its
    ``gpu.binary`` (an MLIR string literal: ``\\XX`` hex escapes) and the module text with
    that blob replaced by ``bin = "<code object>"`` (the host launcher the emulator reads)."""
    m = _BIN_ATTR.search(text)
    if not m:
        return b"", text
    return unescape_mlir_string(m.group(1)), text[: m.start()] + 'bin = "<code object>"' + text[m.end():]


def unescape_mlir_string(s: str) -> bytes:
    out = bytearray()
    i, n = 0, len(s)
    simple = {"n": 10, "t": 9, '"': 34, "\\": 92}
    while i < n:
        c = s[i]
        if c != "\\":
            out += c.encode()
            i += 1
        elif s[i + 1] in simple:
            out.append(simple[s[i + 1]])
            i += 2
        else:
            out.append(int(s[i + 1 : i + 3], 16))
            i += 3
    return bytes(out)


# --------------------------------------------------------------------------- child side


def _imported_sources(extra: tuple[str, ...]) -> dict[str, str]:
    """sha256 of the repo files that shape the compile: imported kernel modules, this
    package's compile/env code and the target's declared extra sources."""
    files: set[Path] = {locations.repo_path(s) for s in (*_OWN_SOURCES, *extra)}
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if not f:
            continue
        p = Path(f).resolve()
        if p.is_relative_to(KERNELS_DIR) or p.is_relative_to(locations.CODE_ROOT / "skill_kernels"):
            files.add(p)
    keyed = {rel: p for p in files if p.is_file() and (rel := locations.repo_relative(p)) is not None}
    return {rel: _sha256(p) for rel, p in sorted(keyed.items())}


class DumpedKernel(BaseModel):
    """One kernel out of FlyDSL's ``FLYDSL_DUMP_IR`` stages."""

    kernel: str
    isa: str
    llvm_ir: str
    code_object: bytes = b""  # empty when the dump has no gpu.binary stage
    host_ir: str = ""


def read_dump(dump: Path) -> list[DumpedKernel]:
    """Every kernel of a FlyDSL dump folder: final ISA, its LLVM IR function, and the linked
    code object with the host launcher module (the emulator's input)."""
    out = []
    for isa_file in sorted(dump.glob("*/*_final_isa.s")):
        isa = isa_file.read_text()
        lls = sorted(isa_file.parent.glob("*_llvm_ir.ll"))
        ir = lls[-1].read_text() if lls else ""
        binaries = sorted(isa_file.parent.glob("*_gpu_module_to_binary.mlir"))
        hsaco, host = split_binary_module(binaries[-1].read_text()) if binaries else (b"", "")
        for kname in kernel_names(isa):
            out.append(DumpedKernel(kernel=kname, isa=isa, llvm_ir=ir_function(ir, kname) or ir, code_object=hsaco,
                                    host_ir=host))
    return out


#: id(jit function) -> (the function, the target folder it was compiled into) in this process
_COMPILED: dict[int, tuple[object, Path]] = {}
_KERNEL_FILES = (".s", ".ll", ".hsaco", ".mlir")


def _compile_one(folder: str, name: str, d: Path) -> None:
    import flydsl.compiler as flyc

    spec, _neg = load_targets(folder).get(name)
    dump = d / "dump"
    os.environ["FLYDSL_DUMP_DIR"] = str(dump)
    t0 = time.perf_counter()
    fn, args = spec.make()
    flyc.compile(fn, *args)
    seconds = time.perf_counter() - t0
    names: list[str] = []
    kernels = read_dump(dump)
    earlier = _COMPILED.get(id(fn))
    if not kernels and earlier is not None:
        # two targets of this batch share one (lru-cached) launcher: FlyDSL reuses the kernel it
        # compiled in this process and dumps nothing, so the code is the earlier target's
        for f in earlier[1].iterdir():
            if f.suffix in _KERNEL_FILES:
                shutil.copyfile(f, d / f.name)
        names = json.loads((earlier[1] / "result.json").read_text())["kernels"]
    for k in kernels:
        (d / f"{k.kernel}.s").write_text(k.isa)
        (d / f"{k.kernel}.ll").write_text(k.llvm_ir)
        if k.code_object:  # the linked code object and the host launcher, for the emulator
            (d / f"{k.kernel}.hsaco").write_bytes(k.code_object)
            (d / f"{k.kernel}.host.mlir").write_text(k.host_ir)
        names.append(k.kernel)
    shutil.rmtree(dump, ignore_errors=True)
    if names:
        _COMPILED[id(fn)] = (fn, d)  # the function is kept alive, so its id stays its own
    (d / "result.json").write_text(
        json.dumps(
            {
                "kernels": names,
                "compile_seconds": seconds,
                "flydsl_version": _env.flydsl_version(),
                "sources": _imported_sources(tuple(spec.sources)),
            }
        )
    )


def _child(folder: str, out: Path, root: Path, names: list[str]) -> int:
    """Runs in the compile subprocess: set the compile-only env, then make + compile each
    target into ``out/<target>/`` (result.json, or skipped.txt / error.txt)."""
    problem = _env.toolchain_problem()
    if problem:
        for n in names:
            (out / _safe(n)).mkdir(parents=True, exist_ok=True)
            (out / _safe(n) / "skipped.txt").write_text(problem)
        return EXIT_SKIPPED
    os.environ.update(_env.compile_only_env(dump_dir=out / "_dump", cache_dir=root))
    os.environ["FLYDSL_RUNTIME_ENABLE_CACHE"] = "0"  # our cache is keyed by source; FlyDSL's would hide dumps
    try:
        import flydsl.compiler  # noqa: F401 - fail early, as a skip
    except ImportError as exc:
        for n in names:
            (out / _safe(n)).mkdir(parents=True, exist_ok=True)
            (out / _safe(n) / "skipped.txt").write_text(f"flydsl does not import: {exc}; `pip install flydsl==0.5.0`")
        return EXIT_SKIPPED
    for n in names:
        d = out / _safe(n)
        d.mkdir(parents=True, exist_ok=True)
        try:
            _compile_one(folder, n, d)
        except Exception:  # noqa: BLE001 - reported per target, the batch goes on
            (d / "error.txt").write_text(traceback.format_exc()[-6000:])
    return 0


def _main(argv: list[str]) -> int:
    if len(argv) < 4:
        print("usage: python -m verifiers.gfx950.compile FOLDER OUT_ROOT CACHE_ROOT TARGET [TARGET...]", file=sys.stderr)
        return 2
    folder, out, root, *names = argv
    try:
        return _child(folder, Path(out), Path(root), names)
    except Exception:  # noqa: BLE001 - the parent reports the traceback tail
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

"""CK a8w8 block-scale GEMM arm (ROCm): the card's production baseline, through aiter's own dispatch.

What production runs (aiter's ``gemm_a8w8_blockscale_bpreshuffle``, read in ROCm/aiter):
the shape is looked up in aiter's tuned CSV (``get_CKGEMM_config``: key ``(gfx, cu_num, M,
N, K)``, then M padded by aiter's ``getPaddedM``; the file is
``AITER_CONFIGS.AITER_CONFIG_GEMM_A8W8_BLOCKSCALE_BPRESHUFFLE_FILE``, the packaged CSV merged
with its ``model_configs/`` rows, which carry gfx950 rows for the card's four shapes), and the
row's ``libtype`` (``ck``, ``cktile``, ``asm``, ...) runs with the row's ``kernelName``. A shape
without a row runs CK's default heuristic instance. Calling the CK entry point without the
name (what this arm did before) always gets that default, whatever is tuned.

This arm takes the same path and writes ``c`` in place (no MxN copy):
- aiter whose public entry takes ``out=`` (2026-08 on): that entry, with ``out=c``;
- older aiter: the same lookup (aiter's ``get_CKGEMM_config``), then the row's entry point
  with its ``kernelName`` and ``c`` as the output.

Builder contract extension (read by the verifier's report): the returned ``launch`` carries
``launch.variant`` (the entry point called) and ``launch.kernel_instance`` (the tuned row's
kernel name with its libtype and where it came from, or the default heuristic).

aiter JIT-builds a CK module on its first call, which takes minutes: never inside a timed
worker. :func:`prepare` builds what the shapes need beforehand, in a subprocess without the
worker's time limit, printing progress (``python -m
skill_kernels.flydsl_fp8_blockscale_gemm.ck_baseline prepare --shape MxNxK ...``); ``build``
refuses with that command when a module is still unbuilt. aiter is not a dependency of
this project: without it the arm refuses with one line saying how to install it.
"""
from __future__ import annotations

import csv
import inspect
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifiers.locations import child_pythonpath

from .contract import check_contract, platform_of

if TYPE_CHECKING:  # pragma: no cover
    import torch

Launch = Callable[[], None]
Progress = Callable[[str], None]

#: CK's instance for a shape with no tuned row (aiter's C++ default, see its .cu dispatch)
DEFAULT_INSTANCE = "default heuristic (no tuned row for this shape)"
PUBLIC_ENTRY = "gemm_a8w8_blockscale_bpreshuffle"
#: libtype -> (aiter entry point, the JIT module it loads), as aiter's compile_ops declare them
ENTRY_POINTS = {
    "ck": ("gemm_a8w8_blockscale_bpreshuffle_ck", "module_gemm_a8w8_blockscale_bpreshuffle"),
    "cktile": ("gemm_a8w8_blockscale_bpreshuffle_cktile", "module_gemm_a8w8_blockscale_bpreshuffle_cktile"),
    "asm": ("gemm_a8w8_blockscale_bpreshuffle_asm", "module_gemm_a8w8_blockscale_bpreshuffle_asm"),
}
TUNED_FILE_ATTR = "AITER_CONFIG_GEMM_A8W8_BLOCKSCALE_BPRESHUFFLE_FILE"
PREPARE_COMMAND = f"{sys.executable} -m skill_kernels.flydsl_fp8_blockscale_gemm.ck_baseline prepare"
_REQUIRED_COLUMNS = ("cu_num", "M", "N", "K", "libtype", "kernelName")


class PlatformError(RuntimeError):
    """The arm cannot run on this platform; the message says why and what to do."""


class TunedCsvError(ValueError):
    """A tuned-GEMM CSV that cannot be read; the message names the file, line and column."""


# --------------------------------------------------------------------------- tuned rows


@dataclass(frozen=True)
class TunedRow:
    """One row of aiter's tuned block-scale GEMM CSV."""

    gfx: str | None  # None in CSVs that predate the gfx column (and in aiter's lookup answer)
    cu_num: int | None
    m: int
    n: int
    k: int
    libtype: str
    kernel_name: str
    kernel_id: int | None = None
    split_k: int = 0
    us: float | None = None
    source: str = ""  # file:line, or the lookup that returned it

    @classmethod
    def from_config(cls, config: dict, m: int, n: int, k: int, source: str) -> "TunedRow":
        """From the dict aiter's ``get_CKGEMM_config`` returns (the row without its index columns)."""
        def num(key: str, kind: type, default: Any = None) -> Any:
            value = config.get(key, default)
            try:
                return kind(value) if value is not None and str(value) != "nan" else default
            except (TypeError, ValueError):
                return default

        return cls(gfx=None, cu_num=None, m=m, n=n, k=k, libtype=str(config.get("libtype", "")),
                   kernel_name=str(config.get("kernelName", "")), kernel_id=num("kernelId", int),
                   split_k=num("splitK", int, 0), us=num("us", float), source=source)

    @property
    def instance(self) -> str:
        return f"{self.libtype}:{self.kernel_name} (tuned, {self.source})"


def read_tuned_csv(path: Path | str) -> dict[tuple, TunedRow]:
    """aiter's tuned CSV keyed as aiter keys it: ``(gfx, cu_num, M, N, K)``, or
    ``(cu_num, M, N, K)`` for a file without a gfx column. Duplicate keys keep the first row
    (aiter drops exact duplicates; for conflicting ones its dict keeps the last: a tuned file
    should not have them)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise TunedCsvError(f"{path}: cannot read the tuned GEMM CSV: {exc.strerror or exc}") from None
    reader = csv.DictReader(text.splitlines())
    columns = reader.fieldnames or []
    missing = [c for c in _REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise TunedCsvError(f"{path}: line 1: missing column(s) {missing}; a tuned a8w8 block-scale CSV has "
                            f"{', '.join(('gfx', *_REQUIRED_COLUMNS))} (and kernelId, splitK, us)")
    has_gfx = "gfx" in columns
    table: dict[tuple, TunedRow] = {}
    for line, rec in enumerate(reader, start=2):
        try:
            row = TunedRow(
                gfx=rec["gfx"].strip() if has_gfx else None, cu_num=int(rec["cu_num"]), m=int(rec["M"]),
                n=int(rec["N"]), k=int(rec["K"]), libtype=rec["libtype"].strip(), kernel_name=rec["kernelName"].strip(),
                kernel_id=int(rec["kernelId"]) if rec.get("kernelId") not in (None, "") else None,
                split_k=int(rec["splitK"]) if rec.get("splitK") not in (None, "") else 0,
                us=float(rec["us"]) if rec.get("us") not in (None, "") else None, source=f"{path.name}:{line}")
        except (TypeError, ValueError) as exc:
            raise TunedCsvError(f"{path}: line {line}: {exc}") from None
        key = (row.gfx, row.cu_num, row.m, row.n, row.k) if has_gfx else (row.cu_num, row.m, row.n, row.k)
        table.setdefault(key, row)
    return table


def lookup_tuned(table: dict[tuple, TunedRow], gfx: str, cu_num: int, m: int, n: int, k: int,
                 padded_ms: Sequence[int] = ()) -> TunedRow | None:
    """The row production dispatch picks: exact M first, then each padded M in order (aiter
    pads with its compiled ``getPaddedM``; pass its answers)."""
    has_gfx = any(len(key) == 5 for key in table)
    for mm in dict.fromkeys((m, *padded_ms)):
        row = table.get((gfx, cu_num, mm, n, k) if has_gfx else (cu_num, mm, n, k))
        if row is not None:
            return row
    return None


# --------------------------------------------------------------------------- dispatch


@dataclass(frozen=True)
class Dispatch:
    """How production runs one shape: the entry point, and the tuned row (None: default instance)."""

    entry: str
    row: TunedRow | None
    in_place_public: bool  # the public entry with out= (it does its own lookup, the same one)

    @property
    def module(self) -> str | None:
        """The aiter JIT module this dispatch loads (None: not a CK/asm module we know)."""
        libtype = self.row.libtype if self.row else "ck"
        return ENTRY_POINTS.get(libtype, (None, None))[1]

    @property
    def kernel_instance(self) -> str:
        return self.row.instance if self.row else f"ck:{DEFAULT_INSTANCE}"

    @property
    def variant(self) -> str:
        return f"{self.entry}(out=c)" if self.in_place_public else f"{self.entry}(Y=c)"


def choose_dispatch(row: TunedRow | None, public_takes_out: bool) -> Dispatch:
    """Production's choice for a shape's tuned row, as an in-place call."""
    if public_takes_out:
        return Dispatch(entry=PUBLIC_ENTRY, row=row, in_place_public=True)
    libtype = row.libtype if row else "ck"
    if libtype not in ENTRY_POINTS:
        raise PlatformError(
            f"the tuned row for this shape runs libtype {libtype!r} ({row.kernel_name if row else ''}), which this "
            f"aiter can only call through {PUBLIC_ENTRY} returning a new tensor; install an aiter whose "
            f"{PUBLIC_ENTRY} takes out= (2026-08 or later) so the baseline writes c in place"
        )
    return Dispatch(entry=ENTRY_POINTS[libtype][0], row=row, in_place_public=False)


def annotate(launch: Launch, dispatch: Dispatch) -> Launch:
    """Attach what ran, for the report (``variant``, ``kernel_instance``)."""
    launch.variant = dispatch.variant  # type: ignore[attr-defined]
    launch.kernel_instance = dispatch.kernel_instance  # type: ignore[attr-defined]
    return launch


def _import_aiter() -> Any:
    try:
        import aiter  # type: ignore[import-not-found]
    except ImportError as e:
        raise PlatformError(
            "ck_blockscale needs AMD's aiter (CK a8w8 block-scale GEMM): install aiter on the ROCm "
            f"box (https://github.com/ROCm/aiter); import failed: {e}"
        ) from e
    return aiter


def _takes(fn: Any, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def tuned_row_for(aiter: Any, m: int, n: int, k: int, device: Any) -> TunedRow | None:
    """The tuned row aiter's own dispatch picks for ``(m, n, k)`` on this device."""
    from aiter.jit.core import AITER_CONFIGS  # type: ignore[import-not-found]

    tuned_file = getattr(AITER_CONFIGS, TUNED_FILE_ATTR)
    try:
        from aiter.ops.gemm_op_a8w8 import get_CKGEMM_config  # type: ignore[import-not-found]
    except ImportError:
        get_CKGEMM_config = None
    if get_CKGEMM_config is not None:
        config = get_CKGEMM_config(m, n, k, tuned_file)
        return TunedRow.from_config(config, m, n, k, f"aiter get_CKGEMM_config, {Path(tuned_file).name}") if config else None
    import torch

    props = torch.cuda.get_device_properties(device)
    gfx = str(getattr(props, "gcnArchName", "")).split(":")[0]
    return lookup_tuned(read_tuned_csv(tuned_file), gfx, props.multi_processor_count, m, n, k)


def module_built(module: str | None) -> bool:
    """True when aiter can load ``module`` without building it (None: nothing to check)."""
    if module is None:
        return True
    try:
        from aiter.jit.core import get_module  # type: ignore[import-not-found]
    except ImportError:  # an aiter without this loader: it cannot be told, aiter builds on first call
        return True
    try:
        get_module(module)
    except ImportError:
        return False
    return True


def _make_call(aiter: Any, dispatch: Dispatch, a, b_shuffled, a_scale_t_view, b_scale, c) -> Callable[[], Any]:
    import torch

    fn = getattr(aiter, dispatch.entry, None)
    if fn is None:
        raise PlatformError(f"aiter is installed but has no {dispatch.entry}: update aiter")
    if dispatch.in_place_public:
        return lambda: fn(a, b_shuffled, a_scale_t_view, b_scale, torch.bfloat16, out=c)
    row = dispatch.row
    named = {"kernelName": row.kernel_name} if row and _takes(fn, "kernelName") else {}
    libtype = row.libtype if row else "ck"
    if libtype == "asm":
        return lambda: fn(a, b_shuffled, c, a_scale_t_view, b_scale, splitK=row.split_k, **named)
    return lambda: fn(a, b_shuffled, a_scale_t_view, b_scale, c, **named)


def build(inputs: dict[str, "torch.Tensor"], outputs: dict[str, "torch.Tensor"]) -> Launch:
    check_contract(inputs, outputs)
    platform = platform_of(inputs["a"])
    if platform != "rocm":
        raise PlatformError(f"ck_blockscale runs on ROCm only (CK via aiter); this is {platform}")
    import torch

    aiter = _import_aiter()
    a, c = inputs["a"], outputs["c"]
    m, kb = inputs["a_scale"].shape
    n, k = inputs["b"].shape
    # CK's b-preshuffle kernel reads A's scales K-block major: [K/128, M] memory viewed as [M, K/128]
    a_scale_t_view = inputs["a_scale_t"].view(m, kb)
    row = tuned_row_for(aiter, m, n, k, a.device)
    dispatch = choose_dispatch(row, _takes(getattr(aiter, PUBLIC_ENTRY, None), "out"))
    if not module_built(dispatch.module):
        raise PlatformError(
            f"aiter's {dispatch.module} is not built yet; its JIT build takes minutes and must not run inside the "
            f"timed worker: run `{PREPARE_COMMAND} --shape {m}x{n}x{k}` first (the verifier's prepare step does)"
        )
    call = _make_call(aiter, dispatch, a, inputs["b_shuffled"], a_scale_t_view, inputs["b_scale"], c)
    result = call()
    torch.cuda.synchronize()
    if result is not None and result.data_ptr() != c.data_ptr():
        raise PlatformError(f"{dispatch.variant} returned a new tensor instead of writing c in place")

    def launch() -> None:
        call()

    return annotate(launch, dispatch)


# --------------------------------------------------------------------------- prepare (outside the timed worker)


def _build_for_shape(aiter: Any, m: int, n: int, k: int, progress: Progress) -> None:
    """Run the shape's dispatch once on zero inputs: aiter JIT-builds the module it loads."""
    import torch

    dev = torch.device("cuda")
    row = tuned_row_for(aiter, m, n, k, dev)
    dispatch = choose_dispatch(row, _takes(getattr(aiter, PUBLIC_ENTRY, None), "out"))
    if module_built(dispatch.module):
        progress(f"{m}x{n}x{k}: {dispatch.kernel_instance} via {dispatch.variant}: module ready")
        return
    progress(f"{m}x{n}x{k}: building aiter's {dispatch.module} for {dispatch.kernel_instance} (first use: minutes)")
    fp8 = torch.float8_e4m3fnuz if "gfx942" in str(torch.cuda.get_device_properties(dev).gcnArchName) else torch.float8_e4m3fn
    a = torch.zeros(m, k, device=dev).to(fp8)
    b = torch.zeros(n, k, device=dev).to(fp8)
    a_scale_t = torch.ones(k // 128, m, device=dev)
    b_scale = torch.ones(n // 128, k // 128, device=dev)
    c = torch.empty(m, n, dtype=torch.bfloat16, device=dev)
    t0, done = time.monotonic(), threading.Event()

    def heartbeat() -> None:
        while not done.wait(30):
            progress(f"{m}x{n}x{k}: still building {dispatch.module} ({time.monotonic() - t0:.0f} s)")

    threading.Thread(target=heartbeat, daemon=True).start()
    try:
        _make_call(aiter, dispatch, a, b, a_scale_t.view(m, k // 128), b_scale, c)()
        torch.cuda.synchronize()
    finally:
        done.set()
    progress(f"{m}x{n}x{k}: built {dispatch.module} in {time.monotonic() - t0:.0f} s")


def prepare(shapes: Iterable[dict[str, int]], progress: Progress = print, timeout_s: float = 3600.0) -> None:
    """Build the aiter modules the shapes' dispatch needs, in a subprocess of its own (no
    worker time limit), relaying its progress lines. Raises PlatformError with its last line."""
    args = [a for s in shapes for a in ("--shape", f"{s['M']}x{s['N']}x{s['K']}")]
    env = dict(os.environ, PYTHONPATH=child_pythonpath(os.environ.get("PYTHONPATH")))
    proc = subprocess.Popen([sys.executable, "-m", __name__, "prepare", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1, env=env)
    assert proc.stdout is not None
    last = ""
    deadline = time.monotonic() + timeout_s
    for line in proc.stdout:
        last = line.rstrip("\n")
        progress(last)
        if time.monotonic() > deadline:
            proc.kill()
            raise PlatformError(f"ck_blockscale prepare: still building after {timeout_s:.0f} s; last: {last}")
    if proc.wait() != 0:
        raise PlatformError(f"ck_blockscale prepare failed: {last}")


def prepare_for_verifier(shapes: Iterable[dict[str, int]], progress: Progress) -> list[str]:
    """The arm's ``prepare`` step (``ArmSpec.prepare``): build what the shapes' production
    dispatch loads before the verifier times anything; the lines say what is ready."""
    ready: list[str] = []

    def relay(line: str) -> None:
        progress(line)
        if line.endswith("module ready") or ": built " in line:
            ready.append(line)

    prepare(list(shapes), relay)
    return ready


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog=PREPARE_COMMAND.rsplit(" ", 1)[0],
                                     description="build aiter's CK block-scale modules before timing")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="JIT-build the modules the shapes' production dispatch loads")
    p.add_argument("--shape", action="append", required=True, metavar="MxNxK")
    args = parser.parse_args(argv)
    try:
        shapes = [tuple(int(v) for v in s.lower().split("x")) for s in args.shape]
        if any(len(s) != 3 or min(s) <= 0 for s in shapes):
            raise ValueError
    except ValueError:
        print(f"ck_blockscale prepare: shapes are MxNxK with positive integers, got {args.shape}", file=sys.stderr)
        return 2
    try:
        aiter = _import_aiter()
        import torch

        if not (torch.cuda.is_available() and torch.version.hip):
            raise PlatformError("ck_blockscale prepare needs a ROCm GPU (aiter builds for the GPU it finds)")
        for m, n, k in shapes:
            _build_for_shape(aiter, m, n, k, lambda msg: print(msg, flush=True))
    except (PlatformError, TunedCsvError) as exc:
        print(f"ck_blockscale prepare: {exc}", flush=True)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through a subprocess
    sys.exit(main())

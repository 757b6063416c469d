"""Check profile ingestion against a real torch.profiler trace taken on the GPU.

    python bench/profile_ingest_cuda.py [--out bench/results]     # CUDA (the H200)
    python bench/profile_ingest_cuda.py --smoke                   # CPU, seconds

The test fixtures' device traces are synthetic (built where there is no GPU), so this
script records a real one: a small model (an ``nn.Linear`` pair, a plain ``torch.mm`` and,
where the GPU has fp8, a tensor-wise ``torch._scaled_mm``) under
``torch.profiler`` with CPU + CUDA activities, ``record_shapes``, ``with_stack`` and
``with_modules``, exports it gzip'd, reads it back with ``load_profile`` and checks that
every kernel is linked to a CPU op, that each GEMM kernel reports the shape it ran at, that
the Linear kernels carry their module as label/scope, and that the device gives a
generation. On ``--smoke`` (CPU, no kernels) it checks that the same trace is refused with
the "no device kernels" error and that the repo's synthetic ROCm fixture still loads.

Writes ``profile_ingest_cuda.json`` (summary + checks) and ``profile_ingest_cuda.md`` under
``--out``, and keeps the trace (``profile_ingest_cuda.pt.trace.json.gz``) for
reuse as a fixture. Prints the hotspot table and the checks last; exits 1 if a check fails.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from skill_server.profiles import ProfileError, ProfileSummary, load_profile  # noqa: E402


def record_trace(path: Path, smoke: bool) -> dict[str, tuple[int, int, int]]:
    """Run the model under the profiler; return {launching op label: expected (M, N, K)}."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    device = "cpu" if smoke else "cuda"
    dtype = torch.float32 if smoke else torch.bfloat16
    m, n, k = (64, 48, 32) if smoke else (4096, 2048, 7168)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(k, n), torch.nn.GELU(), torch.nn.Linear(n, k)).to(device, dtype)
    x = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    fp8 = (not smoke) and torch.cuda.get_device_capability() >= (8, 9)
    if fp8:
        a8 = x.to(torch.float8_e4m3fn)
        b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()  # column-major B, as _scaled_mm wants
        one = torch.ones((), device=device)
    activities = [ProfilerActivity.CPU] + ([] if smoke else [ProfilerActivity.CUDA])
    with torch.no_grad():
        for _ in range(2):  # warm up (cuBLAS handles, autotuning)
            model(x), torch.mm(x, b)
        if not smoke:
            torch.cuda.synchronize()
        with profile(activities=activities, record_shapes=True, with_stack=True, with_modules=True) as prof:
            for _ in range(3):
                model(x)
                torch.mm(x, b)
                if fp8:
                    torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            if not smoke:
                torch.cuda.synchronize()
    prof.export_chrome_trace(str(path))
    expected = {"Linear_0": (m, n, k), "Linear_1": (m, k, n), "aten::mm": (m, n, k)}
    if fp8:
        expected["aten::_scaled_mm"] = (m, n, k)
    return expected


def check_gpu_summary(s: ProfileSummary, expected: dict[str, tuple[int, int, int]]) -> list[tuple[str, bool, str]]:
    checks: list[tuple[str, bool, str]] = []
    unlinked = [n for n in s.notes if "could not be linked" in n]
    checks.append(("every kernel linked to a CPU op", not unlinked, "; ".join(unlinked) or "all linked"))
    checks.append(("device gives a generation", any(h.hotspot.gen for h in s.hotspots),
                   f"devices {s.device_names}, gen {s.hotspots[0].hotspot.gen if s.hotspots else None}"))
    seen: dict[str, set[tuple[int, int, int]]] = {}
    for h in s.hotspots:
        for v in (v for v in h.variants if v.shape is not None):
            keys = [v.source_op] + [sc.split(": ", 1)[-1] for sc in h.scopes]
            for key in keys:
                seen.setdefault(key, set()).add((v.shape.M, v.shape.N, v.shape.K))
    for label, shape in expected.items():
        got = seen.get(label, set())
        checks.append((f"{label} kernel reports shape {shape}", shape in got, f"seen {sorted(got) or 'nothing'}"))
    linear_labels = {h.hotspot.label for h in s.hotspots if h.hotspot.label and "Linear" in h.hotspot.label}
    checks.append(("Linear kernels labelled with their module", bool(linear_labels), f"labels {sorted(linear_labels)}"))
    checks.append(("shares sum to 100 %", abs(sum(h.hotspot.pct_gpu for h in s.hotspots) - 100) < 0.01 or s.omitted_kernels > 0,
                   f"{sum(h.hotspot.pct_gpu for h in s.hotspots):.3f} % over {len(s.hotspots)} shown"))
    return checks


def table(s: ProfileSummary) -> list[str]:
    rows = ["| rank | kernel | % GPU | calls | shape | dtype | scale | label | segment |", "|---|---|---|---|---|---|---|---|---|"]
    for h in s.hotspots:
        hs = h.hotspot
        shape = str(hs.shape) if hs.shape else ", ".join(str(v.shape) for v in h.variants if v.shape) or "-"
        rows.append(f"| {h.rank} | `{hs.op_name[:60]}` | {hs.pct_gpu:.2f} | {h.calls} | {shape} | {hs.dtype or '-'} | "
                    f"{hs.scale_format or '-'} | {hs.label or '-'} | {', '.join(hs.segment_kernels)[:80] or '-'} |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="CPU only: check the refusal path and the fixture")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    trace = args.out / "profile_ingest_cuda.pt.trace.json.gz"
    expected = record_trace(trace, args.smoke)

    checks: list[tuple[str, bool, str]] = []
    summary: ProfileSummary | None = None
    if args.smoke:
        try:
            load_profile(trace)
            checks.append(("CPU-only trace refused", False, "it loaded"))
        except ProfileError as exc:
            checks.append(("CPU-only trace refused", "no device kernels" in str(exc), str(exc)[:160]))
        summary = load_profile(REPO / "tests" / "fixtures" / "profiles" / "torch_rocm_trace.json")
        checks.append(("synthetic ROCm fixture loads", summary.dispatch_count > 0, f"{summary.dispatch_count} dispatches"))
    else:
        summary = load_profile(trace, top=30)
        checks = check_gpu_summary(summary, expected)

    lines = ["# profile ingestion on a real trace", "", f"trace: `{trace}` ({'smoke, CPU' if args.smoke else 'CUDA'})", ""]
    lines += table(summary) + ["", "| check | ok | detail |", "|---|---|---|"]
    lines += [f"| {name} | {'yes' if ok else 'NO'} | {detail} |" for name, ok, detail in checks]
    (args.out / "profile_ingest_cuda.md").write_text("\n".join(lines) + "\n")
    (args.out / "profile_ingest_cuda.json").write_text(json.dumps({
        "smoke": args.smoke, "trace": str(trace), "expected_shapes": expected,
        "summary": summary.model_dump(mode="json"),
        "checks": [{"check": n, "ok": ok, "detail": d} for n, ok, d in checks],
    }, indent=1))
    print("\n".join(table(summary)))
    print()
    for name, ok, detail in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())

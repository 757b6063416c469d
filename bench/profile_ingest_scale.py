"""Profile ingestion at scale: a ~450 MB torch trace and a 1 M-row rocprofv3 kernel trace,
read by this branch and by ``main`` in the same run, side by side.

    python bench/profile_ingest_scale.py [--torch-mb 450] [--csv-rows 1000000] [--baseline main]
                                         [--tmp /tmp/profile_ingest_scale] [--out bench/results]

Inputs are generated into ``--tmp`` (never committed):
- a torch.profiler Chrome trace shaped like Kineto's (one event per line group, as
  ``export_chrome_trace`` writes them): per launch a ``cpu_op`` with ``record_shapes``
  arguments inside ``python_function`` frames (``with_stack``, ``nn.Module`` scopes), a
  ``cuda_runtime`` launch with its correlation, the ``kernel`` event and its ``ac2g`` flow pair;
  12 kernel names (CK block-scale GEMMs with 0.7 kB template names, attention, norms, MoE);
- a kernel_trace.csv with ROCm 7 columns, the same kernel mix, one queue per 8 rows rotating
  over 4 queues.
Each reader runs in its own subprocess (``load_profile(path, top=20)``): wall time and peak
resident memory (``wait4`` rusage of that child) are recorded. ``--baseline`` names the git
revision whose ``skill_server``, ``trace_readers`` and ``verifiers`` packages are extracted
(``git archive``) into a temp dir and run the same way (each child starts in the temp folder,
so neither imports the other's checkout). Results: ``<out>/profile_ingest_scale.{json,md}``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from baseline import baseline_tree, short_rev  # noqa: E402
CK = ("void ck::kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle<ck::GridwiseGemmMultiD_ABScale_xdl_cshuffle_v3"
      "<ck::tensor_layout::gemm::RowMajor, ck::tensor_layout::gemm::ColumnMajor, ck::Tuple<>, ck::f8_t, float, ck::f8_t, "
      "float, ck::bhalf_t, float, ck::bhalf_t, 256, 1, 128, 128, 128, 16, 16, 4, 4, ck::Sequence<8, 32, 1>, "
      "ck::Sequence<1, 0, 2>, 2, 16, 16, false, 0, ck::Sequence<1, 32, 1, 8>, ck::Sequence<8>>, true, "
      "(ck::InMemoryDataOperationEnum)0, 1, (ck::TailNumber){}>(ck::GridwiseGemmMultiD_ABScale::Argument)")
KERNELS = [CK.format(t) for t in (2, 10)] + [
    "_ZN5aiter35fmha_fwd_hd128_bf16_causal_a32_psskE.kd",
    "void aiter::add_rmsnorm_quant_kernel<c10::BFloat16, 256, 8, true>(c10::BFloat16*, float*, int)",
    "void aiter::moe_sorting_kernel<int, float>(aiter::MoeSortingKernelArgs)",
    "moe_gemm1_a8w4_mfma_moe1_silu_t128x128", "moe_gemm2_a8w4_mfma_moe2_cshuffle_pf8_t128x256",
    "moe_topk_reduce_infp8_bf16out", "_ZN5aiter43fp8gemm_bf16_blockscale_BpreShuffle_128x128E.kd",
    "void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda>(int)",
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_GRVWA8",
    "void ck::kernel_moe_gemm<ck::GridwiseMoeGemm<256, 128, 128>, true>(ck::Argument)",
]
OPS = [("aiter::gemm_a8w8_blockscale", [[4096, 7168], [2048, 7168], [4096, 56], [16, 56]],
        ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float"]),
       ("aten::addmm", [[7168], [4096, 2048], [2048, 7168], [], []], ["c10::BFloat16"] * 3 + ["Scalar", "Scalar"]),
       ("aiter::fused_moe_", [[4096, 7168], [256, 4096, 7168], [256, 7168, 2048]], ["c10::BFloat16"] * 3),
       ("aten::copy_", [[4096, 7168], [4096, 7168], []], ["c10::BFloat16", "float", "Scalar"])]


def _event(obj: dict) -> str:
    # Kineto's writer: one key per line group, 2-space indentation
    return "  " + json.dumps(obj, separators=(", ", ": "))


def write_torch_trace(path: Path, target_mb: float) -> dict:
    rng = random.Random(0)
    target = int(target_mb * 1e6)
    pid, tid, ext, corr, t, gpu_t, launches = 1234, 1234, 0, 0, 1.0e9, 1.0e9 + 50, 0
    with path.open("w") as f:
        f.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {"id": 0, "name": "AMD Instinct MI355X", '
                '"totalGlobalMem": 309220868096, "computeMajor": 9, "computeMinor": 5, "numSms": 256}\n  ],\n'
                '  "record_shapes": 1,\n  "traceEvents": [\n')
        first = True
        while f.tell() < target:
            layer_t = t
            events = [{"ph": "X", "cat": "python_function", "name": "nn.Module: DecoderLayer_0", "pid": pid, "tid": tid,
                       "ts": round(t, 3), "dur": 400.0, "args": {"Python parent id": 1, "Python id": 2}}]
            for j in range(12):
                ext += 1
                corr += 1
                name, dims, types = OPS[j % len(OPS)]
                kernel = KERNELS[j]
                op_t = t + 1 + j * 30
                events += [
                    {"ph": "X", "cat": "python_function", "name": f"model.py({100 + j}): forward", "pid": pid, "tid": tid,
                     "ts": round(op_t - 0.5, 3), "dur": 28.0, "args": {"Python parent id": 2, "Python id": 3 + j}},
                    {"ph": "X", "cat": "cpu_op", "name": name, "pid": pid, "tid": tid, "ts": round(op_t, 3), "dur": 25.0,
                     "args": {"External id": ext, "Record function id": 0, "Ev Idx": ext, "Input Dims": dims,
                              "Input type": types, "Input Strides": [[d[-1], 1] if d else [] for d in dims],
                              "Concrete Inputs": ["" for _ in dims], "Sequence number": ext, "Fwd thread id": 0}},
                    {"ph": "X", "cat": "cuda_runtime", "name": "hipModuleLaunchKernel", "pid": pid, "tid": tid,
                     "ts": round(op_t + 10, 3), "dur": 4.5, "args": {"External id": ext, "cbid": 52, "correlation": corr}},
                    {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 0, "ts": round(gpu_t, 3),
                     "dur": round(5 + rng.random() * 80, 3),
                     "args": {"External id": ext, "device": 0, "stream": 0, "correlation": corr, "kind": "Dispatch Kernel",
                              "grid": [8192, 1, 1], "block": [256, 1, 1]}},
                    {"ph": "s", "id": corr, "pid": pid, "tid": tid, "ts": round(op_t + 10, 3), "cat": "ac2g", "name": "ac2g"},
                    {"ph": "f", "id": corr, "pid": 0, "tid": 0, "ts": round(gpu_t, 3), "cat": "ac2g", "name": "ac2g",
                     "bp": "e"},
                ]
                gpu_t += 90
                launches += 1
            for ev in events:
                f.write(("" if first else ",\n") + _event(ev))
                first = False
            t = layer_t + 400
        f.write('\n  ],\n  "traceName": "bench.pt.trace.json"\n}\n')
    return {"bytes": path.stat().st_size, "kernels": launches}


def write_kernel_trace(path: Path, rows: int) -> dict:
    cols = ["Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id", "Kernel_Name",
            "Correlation_Id", "Start_Timestamp", "End_Timestamp", "LDS_Block_Size", "Scratch_Size", "VGPR_Count",
            "Accum_VGPR_Count", "SGPR_Count", "Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z",
            "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z"]
    names = [k[:400] for k in KERNELS]  # rocprofv3 --truncate-kernels off: still long template names
    rng = random.Random(1)
    t = 1_143_263_119_836_160
    with path.open("w", newline="") as f:
        f.write(",".join(f'"{c}"' for c in cols) + "\n")
        for i in range(rows):
            dur = 2000 + rng.randrange(90_000)
            q = 1 + (i // 8) % 4
            name = names[i % len(names)]
            f.write(f'"KERNEL_DISPATCH",4,{q},{q},3071,{i},{i % len(names)},"{name}",{i},{t},{t + dur},'
                    f"8192,0,128,0,64,256,1,1,65536,1,1\n")
            t += dur + 1500
    return {"bytes": path.stat().st_size, "rows": rows}


def write_rocprof_json(path: Path, records: int) -> dict:
    """rocprofv3 --output-format json: one tool entry, the records before kernel_symbols
    (a reader that streams must resolve names at the end)."""
    rng = random.Random(2)
    names = [k[:400] for k in KERNELS]
    t = 1_143_263_119_836_160
    with path.open("w") as f:
        f.write('{"rocprofiler-sdk-tool": [{"metadata": {"pid": 4242}, "agents": [{"id": {"handle": 9}, "type": 2, '
                '"name": "gfx950", "product_name": "AMD Instinct MI355X"}],\n "buffer_records": {"kernel_dispatch": [\n')
        for i in range(records):
            dur = 2000 + rng.randrange(90_000)
            q = 1 + (i // 8) % 4
            rec = {"size": 1, "kind": 10, "operation": 1, "thread_id": 4242,
                   "correlation_id": {"internal": i, "external": 0}, "start_timestamp": t, "end_timestamp": t + dur,
                   "dispatch_info": {"size": 1, "agent_id": {"handle": 9}, "queue_id": {"handle": q},
                                     "kernel_id": i % len(names), "dispatch_id": i, "private_segment_size": 0,
                                     "group_segment_size": 8192, "workgroup_size": {"x": 256, "y": 1, "z": 1},
                                     "grid_size": {"x": 65536, "y": 1, "z": 1}}}
            f.write(("," if i else "") + json.dumps(rec) + "\n")
            t += dur + 1500
        symbols = [{"kernel_id": k, "kernel_name": n, "formatted_kernel_name": n} for k, n in enumerate(names)]
        f.write('], "memory_copy": []}, "kernel_symbols": ' + json.dumps(symbols) + "}]}\n")
    return {"bytes": path.stat().st_size, "records": records}


CHILD = ("import sys, time; sys.path.insert(0, sys.argv[1]); t = time.perf_counter(); "
         "from skill_server.profiles import load_profile; s = load_profile(sys.argv[2], top=20); "
         "print(time.perf_counter() - t, s.dispatch_count, s.kernel_count, s.hotspots[0].full_name[:40])")


def run_child(code_root: Path, trace: Path, timeout: float) -> dict:
    """Run the reader in a child and read its peak RSS from wait4 (no other child runs meanwhile)."""
    env = dict(os.environ, PYTHONPATH=str(code_root))
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child: exec the reader (from a neutral folder: '' on sys.path must not be the checkout)
        os.chdir(tempfile.gettempdir())
        os.execve(sys.executable, [sys.executable, "-c", CHILD, str(code_root), str(trace)], env)
    deadline = start + timeout
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.perf_counter() > deadline:
            os.kill(pid, 9)
            os.wait4(pid, 0)
            return {"ok": False, "error": f"timed out after {timeout:.0f} s"}
        time.sleep(0.05)
    wall = time.perf_counter() - start
    return {"ok": os.waitstatus_to_exitcode(status) == 0, "wall_s": round(wall, 2),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}




def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--torch-mb", type=float, default=450.0)
    ap.add_argument("--csv-rows", type=int, default=1_000_000)
    ap.add_argument("--json-records", type=int, default=400_000, help="rocprofv3 results.json dispatch records")
    ap.add_argument("--baseline", default="main", help="git revision to compare against (its skill_server package)")
    ap.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()) / "profile_ingest_scale")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    ap.add_argument("--timeout", type=float, default=900.0)
    args = ap.parse_args()
    args.tmp.mkdir(parents=True, exist_ok=True)
    torch_path, csv_path = args.tmp / "bench.pt.trace.json", args.tmp / "bench_kernel_trace.csv"
    json_path = args.tmp / "bench_results.json"
    inputs = {"torch": write_torch_trace(torch_path, args.torch_mb), "csv": write_kernel_trace(csv_path, args.csv_rows),
              "rocprof_json": write_rocprof_json(json_path, args.json_records)}
    packages = [p for p in ("skill_server", "trace_readers", "verifiers")
                if subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{args.baseline}:{p}"]).returncode == 0]
    base = baseline_tree(args.baseline, *packages)
    rev, base_rev = short_rev(), short_rev(args.baseline)
    load_before = os.getloadavg()
    results = {}
    for label, path in (("torch", torch_path), ("csv", csv_path), ("rocprof_json", json_path)):
        results[label] = {"this branch": run_child(REPO, path, args.timeout),
                          f"baseline {args.baseline}": run_child(base, path, args.timeout)}
        print(label, json.dumps(results[label]), flush=True)
    record = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": f"{platform.node()} ({os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()})",
        "revision": rev, "baseline": f"{args.baseline} ({base_rev})", "inputs": inputs, "results": results,
        "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]},
        "targets": {"torch": "<= 60 s and <= 1024 MB peak", "csv": "<= 5 s",
                    "rocprof_json": "peak memory bounded (streamed: not the whole document)"},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "profile_ingest_scale.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [f"# Profile ingestion at scale ({record['date']})", "",
             f"Command: `{record['command']}`  ",
             f"Device: {record['device']}; 1/5/15-min load average {record['load_average']['before']} before, "
             f"{record['load_average']['after']} after (a shared box: CPU time is the steadier figure)  ",
             f"This branch {rev} vs {record['baseline']}, each reader in its own process (load_profile, top=20).", "",
             f"- torch trace: {inputs['torch']['bytes'] / 1e6:.0f} MB, {inputs['torch']['kernels']} kernel launches",
             f"- kernel_trace.csv: {inputs['csv']['rows']} rows, {inputs['csv']['bytes'] / 1e6:.0f} MB",
             f"- rocprofv3 results.json: {inputs['rocprof_json']['records']} dispatch records, "
             f"{inputs['rocprof_json']['bytes'] / 1e6:.0f} MB (kernel_symbols after the records)", "",
             "| input | reader | wall s | CPU s | peak RSS MB | ok |", "|---|---|---|---|---|---|"]
    for label, by_reader in results.items():
        for reader, r in by_reader.items():
            lines.append(f"| {label} | {reader} | {r.get('wall_s', '-')} | {r.get('cpu_s', '-')} | {r.get('peak_rss_mb', '-')} | "
                         f"{'yes' if r.get('ok') else r.get('error', 'no')} |")
    for label in results:
        a, b = results[label]["this branch"], results[label][f"baseline {args.baseline}"]
        if a.get("ok") and b.get("ok"):
            lines.append(f"\n{label}: {b['wall_s'] / a['wall_s']:.1f}x less wall time, {b['cpu_s'] / a['cpu_s']:.1f}x less "
                         f"CPU time, {b['peak_rss_mb'] / a['peak_rss_mb']:.1f}x less peak memory than {args.baseline}")
    lines.append(f"\nTargets: torch {record['targets']['torch']}; csv {record['targets']['csv']}; "
                 f"rocprof_json {record['targets']['rocprof_json']}.")
    (args.out / "profile_ingest_scale.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

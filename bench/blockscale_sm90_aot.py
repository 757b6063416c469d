"""Compile every Triton-twin sweep config for sm_90 on this machine (no GPU needed).

    python bench/blockscale_sm90_aot.py [--out bench/results] [--shapes 4096x65536x1536,...]

For each config of ``sweep_configs`` at the card's shapes: registers per thread, spill
bytes, shared memory, CTAs per SM (H100/H200 limits) and the wgmma shapes in the PTX,
from Triton's own NVIDIA pipeline and the ptxas bundled with it. A config that spills or
does not compile here will not be fast on the H200 either; the H200 bench
(``blockscale_h200.py``) measures the rest. Writes ``blockscale_sm90_aot.json/.md``.
``--smoke``: the first two configs of one shape.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CARD_SHAPES = ["4096x65536x1536", "4096x2048x7168", "16384x1536x7168", "16384x7168x768"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    ap.add_argument("--shapes", default=",".join(CARD_SHAPES))
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    os.environ.pop("TRITON_INTERPRET", None)  # compile for real (no GPU needed for that)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    sys.path.insert(0, str(REPO))
    from skill_kernels.flydsl_fp8_blockscale_gemm.twin_aot import report
    from skill_kernels.flydsl_fp8_blockscale_gemm.twin_configs import pick_config, sweep_configs

    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    if args.smoke:
        shapes = shapes[:1]
    rows, seen = [], {}
    for m, n, k in shapes:
        choice = pick_config(m, n, k)
        configs = sweep_configs(m, n, k)[: 2 if args.smoke else None]
        for cfg in configs:
            # group_m only changes the program order, not the code: compile once per code shape
            key = cfg.model_copy(update={"group_m": 8}).label
            row = {"shape": f"{m}x{n}x{k}", "class": choice.shape_class, "config": cfg.label,
                   "picked": cfg == choice.config}
            if key not in seen:
                t0 = time.perf_counter()
                try:
                    seen[key] = report(cfg).as_dict() | {"compile_s": round(time.perf_counter() - t0, 1)}
                except Exception as e:  # a config that does not compile is a finding
                    seen[key] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"}
            row.update({k2: v for k2, v in seen[key].items() if k2 != "config"})
            rows.append(row)
            print(f"{row['shape']:>16} {row['config']:>44} " + (
                f"regs {row['registers']:3d} spill {row['spill_bytes']:3d} smem {row['shared_bytes'] // 1024:3d} KiB "
                f"CTAs/SM {row['ctas_per_sm']} {','.join(row['mma'])}" if "registers" in row else row["error"]),
                flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "blockscale_sm90_aot.json").write_text(json.dumps(rows, indent=1))
    lines = ["# Triton twin compiled for sm_90 (no GPU): resources per sweep config", "",
             "| shape | class | config | picked | regs | spill B | smem KiB | CTAs/SM | wgmma | note |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['shape']} | {r['class']} | {r['config']} | {'yes' if r['picked'] else ''} "
                     f"| {r.get('registers', '')} | {r.get('spill_bytes', '')} "
                     f"| {r['shared_bytes'] // 1024 if 'shared_bytes' in r else ''} | {r.get('ctas_per_sm', '')} "
                     f"| {','.join(r.get('mma', []))} | {r.get('error', '')} |")
    (out / "blockscale_sm90_aot.md").write_text("\n".join(lines) + "\n")
    bad = [r for r in rows if r.get("picked") and (r.get("spill_bytes", 1) or "error" in r)]
    print(f"wrote {out / 'blockscale_sm90_aot.md'}; picked configs spilling or failing: {len(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""How much each MCP answer puts into an agent's context, measured with the real client.

    python bench/mcp_context.py [--baseline-root DIR] [--out bench/results] [--no-verify]

Starts ``skill-server serve --enable-exec-tools --enable-write-tools`` over stdio with the
official SDK client (``mcp.client.stdio``) and measures, in characters of the JSON result
the client receives (``model_dump(mode="json", by_alias=True, exclude_none=True)``: text
blocks plus structured content):

- ``tools/list`` with every tool enabled (goal <= 16,000);
- ``match_skill`` for the three seed hotspots, one per card (goal <= 4,000 each);
- ``match_profile`` with default arguments on the three fixture profiles (goal <= 8,000);
- ``run_verifier`` on CPU: the block-scale card, an honest candidate file, one shape
  (goal <= 4,000).

``--baseline-root`` runs a second server from another source tree (e.g. a copy of main:
``git archive main | tar -x -C /tmp/main``) in the same run, so both columns come from one
machine and one client. Results go to <out>/mcp_context.json and <out>/mcp_context.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parents[1]
PROFILES = ("tests/fixtures/profiles/rocprofv3_kernel_trace.csv", "tests/fixtures/profiles/rocprofv3_kernel_stats.csv",
            "tests/fixtures/profiles/torch_rocm_trace.json")
HOTSPOTS = {
    "blockscale (fp32_block)": {"op_name": "gemm_a8w8_blockscale_bpreshuffle", "gen": "MI355X", "dtype": "fp8_e4m3",
                                "scale_format": "fp32_block", "regime": "prefill",
                                "shape": {"M": 4096, "N": 2048, "K": 7168}},
    "mxfp8 (ue8m0_1x32)": {"op_name": "gemm_a8w8_mxfp8", "gen": "gfx950", "scale_format": "ue8m0_1x32",
                           "shape": {"M": 1024, "N": 5120, "K": 2048}},
    "moe stage 2": {"op_name": "fused_moe_kernel", "gen": "gfx950", "stage": "stage2",
                    "segment_kernels": ["moe_sum_reduce"]},
}
VERIFY = {"card_id": "flydsl_fp8_blockscale_gemm",
          "candidate": f"{REPO / 'tests' / 'fixtures' / 'candidates' / 'blockscale_dequant.py'}:build",
          "baseline": "torch_dequant", "shapes": ["128x256x512"],
          "options": {"rounds": 5, "block_ms": 5, "bootstrap_samples": 200, "hidden_shapes": False, "seeds": [0]}}
GOALS = {"tools/list": 16_000, "match_skill": 4_000, "match_profile": 8_000, "run_verifier": 4_000}


def size(result) -> int:
    return len(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True)))


async def measure(root: Path, verify: bool) -> dict:
    state = Path(tempfile.mkdtemp(prefix="mcp_context_"))
    env = {**os.environ, "PYTHONPATH": str(root), "SKILL_SERVER_STATE_DIR": str(state)}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "skill_server.cli.entry", "--skills-dir", str(root / "skills"), "--ledger", str(state / "ledger.sqlite"),
              "serve", "--quiet", "--enable-exec-tools", "--enable-write-tools"],
        env=env, cwd=str(root))
    out: dict = {"root": str(root)}
    with open(state / "stderr.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as c:
            tools = await c.list_tools()
            out["tools/list"] = size(tools)
            out["tools"] = {t.name: len(json.dumps(t.model_dump(mode="json", by_alias=True, exclude_none=True)))
                            for t in tools.tools}
            out["match_skill"] = {}
            for name, hotspot in HOTSPOTS.items():
                r = await c.call_tool("match_skill", {"hotspot": hotspot})
                assert not r.is_error, r
                out["match_skill"][name] = size(r)
            out["match_profile"] = {}
            for path in PROFILES:
                r = await c.call_tool("match_profile", {"path": str(root / path)})
                assert not r.is_error, r
                out["match_profile"][Path(path).name] = size(r)
            if verify:
                r = await c.call_tool("run_verifier", VERIFY)
                assert not r.is_error, r
                out["run_verifier"] = size(r)
    return out


def markdown(res: dict) -> str:
    cols = [k for k in ("baseline", "branch") if k in res]
    lines = [f"# MCP context per answer ({res['date']})", "",
             f"Command: `{res['command']}`", f"Machine: {res['machine']}", "",
             "Characters of the JSON result the official client receives (text blocks + structured content).", "",
             "| answer | goal | " + " | ".join(cols) + (" | branch / baseline |" if len(cols) == 2 else " |"),
             "|---|---|" + "---|" * len(cols) + ("---|" if len(cols) == 2 else "")]

    def row(label, goal, values):
        ratio = f" | {values[1] / values[0]:.2f}" if len(values) == 2 and values[0] else (" | " if len(cols) == 2 else "")
        lines.append(f"| {label} | {goal:,} | " + " | ".join(f"{v:,}" for v in values) + ratio + " |")

    row("tools/list, every tool", GOALS["tools/list"], [res[c]["tools/list"] for c in cols])
    for name in HOTSPOTS:
        row(f"match_skill: {name}", GOALS["match_skill"], [res[c]["match_skill"][name] for c in cols])
    for path in PROFILES:
        name = Path(path).name
        row(f"match_profile (default): {name}", GOALS["match_profile"], [res[c]["match_profile"][name] for c in cols])
    if all("run_verifier" in res[c] for c in cols):
        row("run_verifier: 1 shape, CPU", GOALS["run_verifier"], [res[c]["run_verifier"] for c in cols])
    lines += ["", "Per tool in tools/list:", "", "| tool | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    names = sorted(set().union(*(res[c]["tools"] for c in cols)))
    for n in names:
        lines.append(f"| {n} | " + " | ".join(f"{res[c]['tools'].get(n, 0):,}" for c in cols) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline-root", type=Path, help="another source tree to serve in the same run (e.g. main)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    ap.add_argument("--no-verify", action="store_true", help="skip run_verifier (about 10 s of CPU per server)")
    args = ap.parse_args()
    from verifiers.hw.device import cpu_name  # light: no torch at import

    res: dict = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                 "command": "python " + " ".join(sys.argv),
                 "machine": f"{cpu_name()} ({platform.machine()}, {os.cpu_count()} cores), "
                            f"Python {platform.python_version()}, CPU only"}
    if args.baseline_root:
        res["baseline"] = anyio.run(measure, args.baseline_root.resolve(), not args.no_verify)
    res["branch"] = anyio.run(measure, REPO, not args.no_verify)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "mcp_context.json").write_text(json.dumps(res, indent=1) + "\n")
    (args.out / "mcp_context.md").write_text(markdown(res))
    print(markdown(res))


if __name__ == "__main__":
    main()

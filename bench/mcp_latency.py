"""MCP server latency: cold start to the first answered ``match_skill`` over stdio, and
``match_skill`` round trips over stdio and HTTP. CPU only; not a GPU benchmark.

    python bench/mcp_latency.py [--calls 500] [--starts 5] [--out bench/results] [--smoke]

Two kinds of client, reported separately:
- raw: a minimal JSON-RPC client (one line per message over stdio; keep-alive POSTs over
  HTTP). It measures the server and the transport.
- sdk: the official Python SDK client (``mcp.Client``). It also validates every
  structured result against the tool's outputSchema with ``jsonschema``, which costs the
  client several milliseconds per call; agents' own clients may or may not do that.

Cold start is measured from just before the process is spawned to the reply of the first
``tools/call match_skill`` (after ``initialize``), with the raw client. The server
process's CPU time over its whole life is reported beside it (on a loaded machine wall
time stretches; CPU time does not). A start-up profile (``-X importtime``, self time per
top-level package) says where the time goes.

Figures go to <out>/mcp_latency.json and <out>/mcp_latency.md; a short table is printed last.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOTSPOT = {"op_name": "gemm_a8w8_blockscale_kernel", "gen": "MI355X", "dtype": "fp8_e4m3",
           "scale_format": "fp32_block", "regime": "prefill", "shape": {"M": 4096, "N": 2048, "K": 7168}}
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call_msg(i: int) -> dict:
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "match_skill", "arguments": {"hotspot": HOTSPOT}}}


def server_cmd() -> list[str]:
    exe = shutil.which("skill-server")
    return [exe] if exe else [sys.executable, "-m", "skill_server.cli.entry"]


def cpu_model() -> str:
    from verifiers.hw.device import cpu_name  # light: no torch at import

    return cpu_name()


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


# ---------------------------------------------------------------------- raw stdio
class RawStdio:
    def __init__(self, cmd: list[str] | None = None):
        self.proc = subprocess.Popen(cmd or [*server_cmd(), "serve", "--quiet"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)

    def request(self, msg: dict) -> dict:
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        if "id" not in msg:
            return {}
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"server exited: {self.proc.stderr.read()}")
            reply = json.loads(line)
            if reply.get("id") == msg["id"]:
                if "error" in reply or reply["result"].get("isError"):
                    raise RuntimeError(f"error reply: {line[:300]}")
                return reply

    def close(self) -> str:
        self.proc.stdin.close()
        err = self.proc.stderr.read()
        self.proc.wait(timeout=30)
        return err


def cold_start(runs: int) -> dict:
    walls, inits, cpus = [], [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        s = RawStdio()
        s.request(INIT)
        t_init = time.perf_counter()
        s.request(INITIALIZED)
        s.request(call_msg(1))
        t1 = time.perf_counter()
        s.close()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        walls.append(t1 - t0)
        inits.append(t_init - t0)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return {"runs": runs, "first_answer_s": walls, "initialize_s": inits, "server_cpu_s": cpus,
            "first_answer_median_s": statistics.median(walls), "first_answer_min_s": min(walls),
            "server_cpu_median_s": statistics.median(cpus), "server_cpu_min_s": min(cpus)}


def process_cpu(pid: int) -> float:
    """user+sys CPU seconds of a running process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stdio_round_trips(calls: int, cpu: dict) -> list[float]:
    s = RawStdio()
    s.request(INIT)
    s.request(INITIALIZED)
    for i in range(20):  # warm up
        s.request(call_msg(10_000 + i))
    times = []
    c0 = process_cpu(s.proc.pid)
    for i in range(calls):
        t = time.perf_counter()
        s.request(call_msg(i + 1))
        times.append(time.perf_counter() - t)
    cpu["raw stdio"] = (process_cpu(s.proc.pid) - c0) / calls
    s.close()
    return times


# ----------------------------------------------------------------------- raw HTTP
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RawHttp:
    def __init__(self, port: int, token: str):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                        "Authorization": f"Bearer {token}"}

    def request(self, msg: dict) -> dict:
        self.conn.request("POST", "/mcp", body=json.dumps(msg), headers=self.headers)
        resp = self.conn.getresponse()
        body = resp.read().decode()
        if resp.status >= 300:
            raise RuntimeError(f"HTTP {resp.status}: {body[:300]}")
        if sid := resp.getheader("mcp-session-id"):
            self.headers["mcp-session-id"] = sid
            self.headers["mcp-protocol-version"] = INIT["params"]["protocolVersion"]
        if "id" not in msg:
            return {}
        for line in body.splitlines():  # an SSE stream or plain JSON
            data = line[5:].strip() if line.startswith("data:") else line.strip()
            if data.startswith("{"):
                reply = json.loads(data)
                if reply.get("id") == msg["id"]:
                    if "error" in reply or reply["result"].get("isError"):
                        raise RuntimeError(f"error reply: {data[:300]}")
                    return reply
        raise RuntimeError(f"no reply to {msg['id']} in {body[:300]}")


def start_http(token: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([*server_cmd(), "serve", "--transport", "http", "--port", str(port), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "SKILL_SERVER_TOKEN": token})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(proc.stderr.read())
            time.sleep(0.05)
    raise TimeoutError("HTTP server did not start")


def http_round_trips(calls: int, port: int, token: str, pid: int, cpu: dict) -> list[float]:
    c = RawHttp(port, token)
    c.request(INIT)
    c.request(INITIALIZED)
    for i in range(20):
        c.request(call_msg(10_000 + i))
    times = []
    c0 = process_cpu(pid)
    for i in range(calls):
        t = time.perf_counter()
        c.request(call_msg(i + 1))
        times.append(time.perf_counter() - t)
    cpu["raw HTTP"] = (process_cpu(pid) - c0) / calls
    return times


# ------------------------------------------------------------------- SDK clients
def sdk_round_trips(calls: int, port: int | None, token: str) -> list[float]:
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def run() -> list[float]:
        if port is None:
            cmd = server_cmd()
            target = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "serve", "--quiet"])
            with open(os.devnull, "w") as devnull:
                return await loop(Client(stdio_client(target, errlog=devnull)))
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            return await loop(Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)))

    async def loop(client) -> list[float]:
        async with client as c:
            for _ in range(20):
                await c.call_tool("match_skill", {"hotspot": HOTSPOT})
            times = []
            for _ in range(calls):
                t = time.perf_counter()
                r = await c.call_tool("match_skill", {"hotspot": HOTSPOT})
                times.append(time.perf_counter() - t)
                assert not r.is_error
            return times

    return anyio.run(run)


# --------------------------------------------------------------- start-up profile
def startup_profile() -> dict:
    """Self import time per top-level package in a fresh ``serve`` process (ms)."""
    s = RawStdio([sys.executable, "-X", "importtime", "-m", "skill_server.cli.entry", "serve", "--quiet"])
    s.request(INIT)
    s.request(INITIALIZED)
    s.request(call_msg(1))
    log = s.close()
    per_pkg: dict[str, float] = defaultdict(float)
    for m in re.finditer(r"^import time:\s*(\d+) \|\s*\d+ \|\s*(\S+)", log, re.M):
        per_pkg[m.group(2).split(".")[0]] += int(m.group(1)) / 1000
    top = sorted(per_pkg.items(), key=lambda kv: -kv[1])
    return {"import_ms_total": round(sum(per_pkg.values()), 1), "import_ms_by_package": {k: round(v, 1) for k, v in top[:15]}}


def in_process_build(repeats: int = 3) -> dict:
    """CPU seconds (process_time) of each start-up step, in the order ``serve`` runs them,
    in fresh processes; the least of ``repeats`` runs per step (other jobs on the machine
    only ever add to CPU time, through shared cores and caches)."""
    code = r"""
import json, time, importlib
T = time.process_time
steps = {"interpreter_start": T()}
t = T(); import skill_server.cli.entry as cli; cli.build_parser(); steps["cli_and_command_modules"] = T() - t
t = T(); import mcp.server, mcp.server.mcpserver; steps["import_mcp_sdk"] = T() - t
t = T(); from skill_server.service.facade import SkillService; steps["import_core_service"] = T() - t
t = T(); svc = SkillService(); svc.catalog; steps["load_catalog"] = T() - t
t = T(); from skill_server import mcp_app; from skill_server.mcp.settings import ServerSettings
server = mcp_app.SkillMCPServer("bench"); steps["adapter_and_server_object"] = T() - t
for name in mcp_app.MCP_MODULES:
    t = T(); module = importlib.import_module(name); steps[f"import {name}"] = T() - t
    t = T(); module.register(server, svc, ServerSettings()); steps[f"register {name}"] = T() - t
t = T(); from skill_server.matching.hotspot import Hotspot; svc.match_skill(Hotspot(op_name="gemm_a8w8_blockscale_kernel"))
steps["first_match_in_service"] = T() - t
print(json.dumps(steps))
"""
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                      check=True).stdout) for _ in range(repeats)]
    steps = {k: round(min(r[k] for r in runs), 3) for k in runs[0]}
    steps["total"] = round(sum(steps.values()), 3)
    return steps


def client_validation_ms(repeats: int = 200) -> float:
    """What the SDK client adds per call: validating a match_skill result against the tool's
    outputSchema with jsonschema, as ``ClientSession.validate_tool_result`` does."""
    code = r"""
import json, time
from jsonschema import exceptions, validators
from referencing import Registry
from pydantic import TypeAdapter
from skill_server.matching.hotspot import Hotspot
from skill_server.matching.matcher import MatchResult
from skill_server.service.facade import SkillService
HOTSPOT = %s
data = SkillService().match_skill(Hotspot(**HOTSPOT)).model_dump(mode="json")
schema = TypeAdapter(MatchResult).json_schema()
validator = validators.validator_for(schema)(schema, registry=Registry())
for _ in range(20):
    exceptions.best_match(validator.iter_errors(data))
t = time.perf_counter()
for _ in range(%d):
    exceptions.best_match(validator.iter_errors(data))
print((time.perf_counter() - t) / %d * 1e3)
""" % (json.dumps(HOTSPOT), repeats, repeats)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return round(float(out), 3)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    ap.add_argument("--smoke", action="store_true", help="few calls and starts, to check the script")
    ap.add_argument("--no-sdk", action="store_true", help="skip the SDK-client figures")
    args = ap.parse_args()
    calls, starts = (30, 1) if args.smoke else (args.calls, args.starts)
    token = "bench-token"
    load_before = os.getloadavg()

    result: dict = {
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "loadavg_before": [round(x, 2) for x in load_before]},
        "calls": calls,
    }
    result["cold_start"] = cold_start(starts)
    result["startup_profile"] = startup_profile()
    result["in_process_build"] = in_process_build()
    result["sdk_client_validation_ms"] = client_validation_ms()
    cpu: dict[str, float] = {}
    trips = {"raw stdio": stdio_round_trips(calls, cpu)}
    proc, port = start_http(token)
    try:
        trips["raw HTTP"] = http_round_trips(calls, port, token, proc.pid, cpu)
        if not args.no_sdk:
            trips["sdk stdio"] = sdk_round_trips(calls, None, token)
            trips["sdk HTTP"] = sdk_round_trips(calls, port, token)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    result["round_trip_ms"] = {k: {"p50": round(pct(v, 50) * 1e3, 3), "p99": round(pct(v, 99) * 1e3, 3),
                                   "mean": round(statistics.fmean(v) * 1e3, 3), "n": len(v),
                                   "server_cpu_per_call": round(cpu[k] * 1e3, 3) if k in cpu else None}
                               for k, v in trips.items()}
    result["machine"]["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "mcp_latency_smoke" if args.smoke else "mcp_latency"
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"{name}.md").write_text(render_md(result))
    print(render_table(result))
    return 0


def render_table(r: dict) -> str:
    cs = r["cold_start"]
    lines = [f"cold start -> first match_skill (stdio, raw): median {cs['first_answer_median_s']:.3f} s wall "
             f"(least {cs['first_answer_min_s']:.3f}), server CPU median {cs['server_cpu_median_s']:.3f} s "
             f"(least {cs['server_cpu_min_s']:.3f})   (goal <= 1.5 s)",
             f"{'transport/client':<18}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}{'srv CPU ms':>12}{'n':>6}"]
    for k, v in r["round_trip_ms"].items():
        srv = f"{v['server_cpu_per_call']:.3f}" if v["server_cpu_per_call"] is not None else "-"
        lines.append(f"{k:<18}{v['p50']:>10.3f}{v['p99']:>10.3f}{v['mean']:>10.3f}{srv:>12}{v['n']:>6}")
    return "\n".join(lines)


def render_md(r: dict) -> str:
    m, cs, sp, ib = r["machine"], r["cold_start"], r["startup_profile"], r["in_process_build"]
    rows = "\n".join(f"| {k} | {v['p50']:.3f} | {v['p99']:.3f} | {v['mean']:.3f} | "
                     f"{v['server_cpu_per_call'] if v['server_cpu_per_call'] is not None else '-'} | {v['n']} |"
                     for k, v in r["round_trip_ms"].items())
    pkgs = "\n".join(f"| {k} | {v:.0f} |" for k, v in sp["import_ms_by_package"].items())
    steps = "\n".join(f"| {k} | {v:.3f} |" for k, v in ib.items())
    runs = ", ".join(f"{x:.3f}" for x in cs["first_answer_s"])
    cpus = ", ".join(f"{x:.3f}" for x in cs["server_cpu_s"])
    p50_stdio = r["round_trip_ms"]["raw stdio"]["p50"]
    sdk_share = ib["import_mcp_sdk"] / ib["total"] if ib["total"] else 0.0
    catalog_adapter = sum(v for k, v in ib.items() if k.endswith(("mcp_tools_catalog", "mcp_resources", "mcp_prompts"))
                          or k == "adapter_and_server_object")
    groups = sum(v for k, v in ib.items() if k.startswith(("register", "import skill_server.mcp")))
    verdict = (
        f"- first answer <= 1.5 s: {'met' if cs['first_answer_median_s'] <= 1.5 else 'missed'} "
        f"(median {cs['first_answer_median_s']:.2f} s wall, {cs['server_cpu_median_s']:.2f} s server CPU). "
        f"Importing the MCP SDK alone takes {ib['import_mcp_sdk']:.2f} s CPU, {sdk_share:.0%} of the start-up "
        f"steps ({ib['total']:.2f} s); all MCP tool modules' imports and registration take {groups:.2f} s, of which "
        f"the catalog tools, resources, prompts and server object {catalog_adapter:.2f} s.\n"
        f"- p50 <= 5 ms over stdio: {'met' if p50_stdio <= 5 else 'missed'} (raw client p50 {p50_stdio:.2f} ms)."
    )
    return f"""# MCP server latency

- command: `{r['command']}`
- date: {r['date']}
- machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, {m['platform']}
- load average before / after: {m['loadavg_before']} / {m['loadavg_after']} (other jobs share this machine)

{verdict}

## Cold start to the first answered `match_skill` (stdio, raw client)

From just before the process is spawned to the reply of the first `tools/call`, after `initialize`.

| | median | least | runs |
|---|---|---|---|
| wall, s | {cs['first_answer_median_s']:.3f} | {cs['first_answer_min_s']:.3f} | {runs} |
| server CPU (user+sys, whole life), s | {cs['server_cpu_median_s']:.3f} | {cs['server_cpu_min_s']:.3f} | {cpus} |

Goal: first answer <= 1.5 s.

### Where start-up time goes

Self import time per top-level package in one `serve` process (`-X importtime`, ms; total {sp['import_ms_total']:.0f} ms):

| package | ms |
|---|---|
{pkgs}

CPU seconds per start-up step in a fresh process (`time.process_time`; the least of 3 runs, since
other jobs sharing the cores and caches can only add to it), in the order `serve` runs them:

| step | CPU s |
|---|---|
{steps}

## `match_skill` round trip, {r['calls']} calls each (after 20 warm-up calls)

| transport / client | p50 ms | p99 ms | mean ms | server CPU ms/call | n |
|---|---|---|---|---|---|
{rows}

raw = minimal JSON-RPC client (server + transport cost); sdk = `mcp.Client`, which also validates each
structured result against the outputSchema with `jsonschema` on the client side: that alone measured
{r['sdk_client_validation_ms']:.3f} ms per `match_skill` result here (in-process, same machine).
Goal: p50 <= 5 ms over stdio.
"""


if __name__ == "__main__":
    sys.exit(main())

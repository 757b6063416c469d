"""The served surface under load, today's server (a ref, default ``main``) beside this tree's,
in one invocation: HTTP ``match_skill`` throughput and latency at 1 and 16 clients, server
CPU per call, memory over many calls, ``list_skills`` latency while another client sends
adversarial 4 KB names in a loop, and cold start to the first ``match_skill`` over stdio.

    python bench/mcp_surface.py [--baseline main] [--calls 10000] [--clients 16] [--starts 9]
                                [--repeat 2] [--out bench/results] [--smoke]

The baseline is ``git archive <ref>`` unpacked into a temporary folder and run with the
dependency set it declares: modules this tree added to pyproject.toml (httptools) are
hidden from it, so its figures are today's. Both servers run with this interpreter,
one at a time, on 127.0.0.1, with a bearer token. Phases alternate baseline / new so
that a change in machine load hits both; the load average is recorded around each.

The load generator is a minimal asyncio HTTP/1.1 client (keep-alive, one connection per
client, a session id carried when the server gives one), so that its own CPU, which
shares the machine's cores with the server, stays small; it is reported.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import resource
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PV = "2025-11-25"
TOKEN = "bench-token-0123456789"
HOTSPOT = {"op_name": "gemm_a8w8_blockscale_kernel", "gen": "MI355X", "dtype": "fp8_e4m3",
           "scale_format": "fp32_block", "regime": "prefill", "shape": {"M": 4096, "N": 2048, "K": 7168}}
# names that make the matcher work hardest at 4 KB (index literal hits all along the name)
ADVERSARIAL = [("kernel_gemm_xdl" * 300)[:4096], ("gemm_a8w8_blockscale" * 300)[:4096],
               ("moe2_gemm_moe_reduce_fused_moe_kernel_" * 120)[:4096]]
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": PV, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}


# ----------------------------------------------------------------- the two trees
def baseline_tree(ref: str, dest: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", ref], capture_output=True, check=True)
    tree = dest / "baseline"
    tree.mkdir()
    with tarfile.open(fileobj=__import__("io").BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    return tree


def hidden_modules(tree: Path) -> list[str]:
    """Dependencies this tree declares that the baseline's pyproject.toml does not."""
    def deps(path: Path) -> set[str]:
        text = path.read_text()
        block = re.search(r"dependencies\s*=\s*\[(.*?)\]", text, re.S)
        return {re.split(r"[<>=\[ ;~!]", d)[0].lower() for d in re.findall(r'"([^"]+)"', block.group(1) if block else "")}
    return sorted(deps(REPO / "pyproject.toml") - deps(tree / "pyproject.toml"))


def shim_folder(modules: list[str], dest: Path) -> Path:
    """A folder whose modules raise ImportError: put first on the path, it hides them."""
    shim = dest / "hide"
    shim.mkdir(exist_ok=True)
    for name in modules:
        (shim / f"{name}.py").write_text(f"raise ImportError('{name} hidden: the baseline does not declare it')\n")
    return shim


class Tree:
    def __init__(self, label: str, root: Path, hide: Path | None = None, extra: tuple[str, ...] = ()):
        self.label, self.root, self.hide, self.extra = label, root, hide, extra

    def env(self) -> dict[str, str]:
        path = [str(self.root)] + ([str(self.hide)] if self.hide else [])
        env = {k: v for k, v in os.environ.items() if not k.startswith("SKILL_SERVER_")}
        env.update(PYTHONPATH=os.pathsep.join(path[::-1] if self.hide else path), SKILL_SERVER_TOKEN=TOKEN,
                   SKILL_SERVER_LEDGER=str(Path(tempfile.gettempdir()) / f"bench-ledger-{self.label}.sqlite"))
        return env

    def cmd(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "skill_server.cli.entry", "serve", "--quiet", *args, *self.extra]


# ----------------------------------------------------------------- measurement
def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (the workers of ``serve --workers``)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            todo += [int(c) for c in task.read_text().split()]
    return out


def process_cpu(pid: int) -> float:
    """user+sys CPU seconds of the process and its descendants, alive now."""
    total = 0
    for p in process_tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    total = 0
    for p in process_tree(pid):
        try:
            m = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{p}/status").read_text())
        except OSError:
            continue
        total += int(m.group(1)) if m else 0
    return total / 1024


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))] if s else float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Conn:
    """One keep-alive HTTP/1.1 connection speaking MCP's streamable HTTP (JSON or SSE replies)."""

    def __init__(self, port: int):
        self.port, self.sid = port, None

    async def open(self) -> "Conn":
        self.r, self.w = await asyncio.open_connection("127.0.0.1", self.port)
        await self.post(INIT)
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    async def post(self, msg: dict) -> tuple[int, bytes]:
        try:
            return await self._post(msg)
        except (asyncio.IncompleteReadError, ConnectionResetError):  # the server closed an idle connection
            self.close()
            self.r, self.w = await asyncio.open_connection("127.0.0.1", self.port)
            return await self._post(msg)

    async def _post(self, msg: dict) -> tuple[int, bytes]:
        body = json.dumps(msg).encode()
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nContent-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\nAuthorization: Bearer {TOKEN}\r\n"
                f"Content-Length: {len(body)}\r\n")
        if self.sid:
            head += f"mcp-session-id: {self.sid}\r\nmcp-protocol-version: {PV}\r\n"
        self.w.write(head.encode() + b"\r\n" + body)
        lines = (await self.r.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ":" in ln)}
        self.sid = headers.get("mcp-session-id", self.sid)
        if "content-length" in headers:
            return status, await self.r.readexactly(int(headers["content-length"]))
        if headers.get("transfer-encoding") == "chunked":
            parts = []
            while (size := int((await self.r.readuntil(b"\r\n")).strip(), 16)):
                parts.append(await self.r.readexactly(size))
                await self.r.readexactly(2)
            await self.r.readuntil(b"\r\n")
            return status, b"".join(parts)
        return status, b""

    async def call(self, i: int, tool: str, arguments: dict) -> tuple[bool, float]:
        t = time.perf_counter()
        status, data = await self.post({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                        "params": {"name": tool, "arguments": arguments}})
        ok = status == 200 and b'"isError":true' not in data and b'"error"' not in data[:200]
        return ok, time.perf_counter() - t

    def close(self) -> None:
        self.w.close()


# The new tree's server with the SDK's transport options set one by one (today's defaults
# first), to see what each is worth: (stateless_http, json_response, http parser).
SDK_VARIANTS = [(False, False, "h11"), (False, True, "h11"), (True, True, "h11"), (True, True, "httptools")]
VARIANT_RUNNER = """
import sys, uvicorn
from skill_server.mcp.app import build_server
from skill_server.mcp.http_transport import BearerTokenMiddleware, HttpOptions, transport_security
from skill_server.mcp.settings import ServerSettings
from skill_server.service.facade import SkillService
port, stateless, json_response, parser, token = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3] == "1", sys.argv[4], sys.argv[5]
server = build_server(SkillService(), ServerSettings())
app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1", stateless_http=stateless,
                                 json_response=json_response, transport_security=transport_security(HttpOptions(port=port)))
uvicorn.run(BearerTokenMiddleware(app, token), host="127.0.0.1", port=port, http=parser, log_level="warning",
            access_log=False, lifespan="on")
"""


class HttpServer:
    def __init__(self, tree: Tree, variant: tuple[bool, bool, str] | None = None):
        self.port = free_port()
        cmd = tree.cmd("--transport", "http", "--port", str(self.port))
        if variant is not None:
            stateless, json_response, parser = variant
            cmd = [sys.executable, "-c", VARIANT_RUNNER, str(self.port), str(int(stateless)), str(int(json_response)),
                   parser, TOKEN]
        self.proc = subprocess.Popen(cmd, cwd=str(tree.root),
                                     env=tree.env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        async def answered() -> None:
            (await asyncio.wait_for(Conn(self.port).open(), 5)).close()

        deadline = time.monotonic() + 60
        while True:  # until a request is answered (workers start after the port is bound)
            try:
                asyncio.run(answered())
                return
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{tree.label} server did not start: {self.proc.stderr.read()[-2000:]}")
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


async def match_load(port: int, pid: int, clients: int, calls: int, rss_every: int = 0) -> dict:
    conns = [await Conn(port).open() for _ in range(clients)]
    for c in conns:  # warm up
        for i in range(10):
            await c.call(i, "match_skill", {"hotspot": HOTSPOT})
    latencies: list[float] = []
    errors = 0
    rss: list[tuple[int, float]] = [(0, rss_mib(pid))]
    done = 0
    per_client = calls // clients

    async def run(c: Conn) -> None:
        nonlocal errors, done
        for i in range(per_client):
            ok, dt = await c.call(100 + i, "match_skill", {"hotspot": HOTSPOT})
            latencies.append(dt)
            errors += not ok
            done += 1
            if rss_every and done % rss_every == 0:
                rss.append((done, rss_mib(pid)))

    cpu0, me0, t0 = process_cpu(pid), resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    await asyncio.gather(*(run(c) for c in conns))
    elapsed = time.perf_counter() - t0
    cpu1, me1 = process_cpu(pid), resource.getrusage(resource.RUSAGE_SELF)
    for c in conns:
        c.close()
    n = len(latencies)
    return {"clients": clients, "calls": n, "errors": errors, "req_per_s": round(n / elapsed, 1),
            "p50_ms": round(pct(latencies, 50) * 1e3, 2), "p99_ms": round(pct(latencies, 99) * 1e3, 2),
            "server_cpu_ms_per_call": round((cpu1 - cpu0) / n * 1e3, 3),
            "client_cpu_ms_per_call": round(((me1.ru_utime - me0.ru_utime) + (me1.ru_stime - me0.ru_stime)) / n * 1e3, 3),
            "rss_mib": [(k, round(v, 1)) for k, v in rss]}


async def stall_probe(port: int, probes: int) -> dict:
    """list_skills latency from one client while another sends adversarial 4 KB names."""
    adversary, prober = await Conn(port).open(), await Conn(port).open()
    stop = False
    hostile = 0

    async def attack() -> None:
        nonlocal hostile
        i = 0
        while not stop:
            await adversary.call(i, "match_skill", {"hotspot": {"op_name": ADVERSARIAL[i % len(ADVERSARIAL)]}})
            hostile += 1
            i += 1

    quiet = [(await prober.call(i, "list_skills", {"limit": 10}))[1] for i in range(50)]
    task = asyncio.create_task(attack())
    await asyncio.sleep(0.5)
    latencies, errors = [], 0
    for i in range(probes):
        ok, dt = await prober.call(1000 + i, "list_skills", {"limit": 10})
        latencies.append(dt)
        errors += not ok
    stop = True
    await task
    adversary.close()
    prober.close()
    return {"probes": probes, "errors": errors, "adversarial_calls": hostile,
            "quiet_p50_ms": round(pct(quiet, 50) * 1e3, 2),
            "p50_ms": round(pct(latencies, 50) * 1e3, 2), "p99_ms": round(pct(latencies, 99) * 1e3, 2),
            "max_ms": round(max(latencies) * 1e3, 2)}


async def oversized_name(port: int) -> dict:
    c = await Conn(port).open()
    ok, dt = await c.call(1, "match_skill", {"hotspot": {"op_name": ("kernel_gemm_xdl" * 20000)[:292_000]}})
    c.close()
    return {"name_chars": 292_000, "answered_ms": round(dt * 1e3, 1), "is_error": not ok}


def http_phase(tree: Tree, calls: int, clients: int, probes: int, oversized: bool) -> dict:
    server = HttpServer(tree)
    try:
        pid = server.proc.pid
        out = {"load_before": [round(x, 2) for x in os.getloadavg()]}
        out["one_client"] = asyncio.run(match_load(server.port, pid, 1, max(200, calls // 5)))
        out["many_clients"] = asyncio.run(match_load(server.port, pid, clients, calls, rss_every=max(1, calls // 10)))
        out["stall"] = asyncio.run(stall_probe(server.port, probes))
        if oversized:
            out["oversized_name"] = asyncio.run(oversized_name(server.port))
        out["load_after"] = [round(x, 2) for x in os.getloadavg()]
        return out
    finally:
        server.stop()


def sdk_options_phase(tree: Tree, calls: int, clients: int) -> list[dict]:
    out = []
    for variant in SDK_VARIANTS:
        server = HttpServer(tree, variant)
        try:
            r = asyncio.run(match_load(server.port, server.proc.pid, clients, calls))
        finally:
            server.stop()
        out.append({"stateless_http": variant[0], "json_response": variant[1], "http": variant[2],
                    "load_1min": round(os.getloadavg()[0], 2), **{k: v for k, v in r.items() if k != "rss_mib"}})
    return out


def cold_start(tree: Tree) -> tuple[float, float]:
    """Spawn -> initialize -> first match_skill answered over stdio: (wall s, server CPU s)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(tree.cmd(), cwd=str(tree.root), env=tree.env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
    for msg in (INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                 "params": {"name": "match_skill", "arguments": {"hotspot": HOTSPOT}}}):
        proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()
        while "id" in msg:
            reply = json.loads(proc.stdout.readline())
            if reply.get("id") == msg["id"]:
                break
    wall = time.perf_counter() - t0
    proc.stdin.close()
    proc.wait(timeout=30)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default="main", help="git ref of today's server (default main)")
    ap.add_argument("--calls", type=int, default=10_000, help="match_skill calls at --clients (memory is sampled)")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--probes", type=int, default=500, help="list_skills calls during the adversarial loop")
    ap.add_argument("--starts", type=int, default=9, help="cold starts per tree")
    ap.add_argument("--repeat", type=int, default=1, help="HTTP phases per tree, alternating")
    ap.add_argument("--workers", type=int, default=2, help="also run the new tree with serve --workers N (1: skip)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    ap.add_argument("--smoke", action="store_true", help="a few calls, to check the script")
    args = ap.parse_args()
    if args.smoke:
        args.calls, args.probes, args.starts, args.repeat = 800, 50, 1, 1

    result: dict = {"command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
                    "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                                "platform": platform.platform(), "interpreter": sys.executable}}
    with tempfile.TemporaryDirectory(prefix="bench-surface-") as tmp:
        base_root = baseline_tree(args.baseline, Path(tmp))
        hide = hidden_modules(base_root)
        trees = [Tree("baseline", base_root, shim_folder(hide, Path(tmp)) if hide else None), Tree("new", REPO)]
        result["baseline"] = {"ref": args.baseline, "commit": subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", args.baseline], capture_output=True, text=True).stdout.strip(),
            "hidden_modules": hide}
        result["new"] = {"commit": subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                                                  text=True).stdout.strip(),
                         "dirty": bool(subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"],
                                                      capture_output=True, text=True).stdout.strip())}
        for t in trees:  # one start each first: parse caches, page cache
            cold_start(t)
        starts: dict[str, list[tuple[float, float]]] = {t.label: [] for t in trees}
        for _ in range(args.starts):
            for t in trees:
                starts[t.label].append(cold_start(t))
        result["cold_start"] = {k: {"wall_s": [round(w, 3) for w, _ in v], "cpu_s": [round(c, 3) for _, c in v],
                                    "median_wall_s": round(statistics.median(w for w, _ in v), 3),
                                    "median_cpu_s": round(statistics.median(c for _, c in v), 3)}
                                for k, v in starts.items()}
        result["http"] = {t.label: [] for t in trees}
        for _ in range(args.repeat):
            for t in trees:
                result["http"][t.label].append(http_phase(t, args.calls, args.clients, args.probes,
                                                          oversized=t.label == "new"))
        if args.workers > 1:  # the new tree again, with several processes on the port
            multi = Tree(f"new --workers {args.workers}", REPO, extra=("--workers", str(args.workers)))
            result["http"][multi.label] = [http_phase(multi, args.calls, args.clients, args.probes, oversized=False)
                                           for _ in range(args.repeat)]
        result["sdk_options"] = sdk_options_phase(trees[1], max(1000, args.calls // 3), args.clients)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "mcp_surface_smoke" if args.smoke else "mcp_surface"
    (out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / f"{name}.md").write_text(render_md(result))
    print(render_table(result))
    return 0


def _row(label: str, r: dict) -> str:
    m, o, s = r["many_clients"], r["one_client"], r["stall"]
    rss = m["rss_mib"]
    return (f"| {label} | {o['req_per_s']:.0f} | {o['p50_ms']:.1f} / {o['p99_ms']:.1f} | {m['req_per_s']:.0f} | "
            f"{m['p50_ms']:.1f} / {m['p99_ms']:.1f} | {m['errors']} | {m['server_cpu_ms_per_call']:.2f} | "
            f"{m['client_cpu_ms_per_call']:.2f} | {rss[1][1]:.0f} -> {rss[-1][1]:.0f} | "
            f"{s['quiet_p50_ms']:.1f} | {s['p50_ms']:.1f} / {s['p99_ms']:.1f} / {s['max_ms']:.0f} | "
            f"{r['load_before'][0]:.2f} / {r['load_after'][0]:.2f} |")


def render_table(r: dict) -> str:
    lines = [f"{'':10}{'1c req/s':>10}{'16c req/s':>11}{'16c p99':>9}{'srv ms':>8}{'stall p99':>11}{'errors':>8}"]
    for label, runs in r["http"].items():
        for h in runs:
            m = h["many_clients"]
            lines.append(f"{label:10}{h['one_client']['req_per_s']:>10.0f}{m['req_per_s']:>11.0f}{m['p99_ms']:>9.1f}"
                         f"{m['server_cpu_ms_per_call']:>8.2f}{h['stall']['p99_ms']:>11.1f}{m['errors']:>8}")
    for label, c in r["cold_start"].items():
        lines.append(f"cold start {label}: median {c['median_wall_s']:.3f} s wall, {c['median_cpu_s']:.3f} s CPU")
    return "\n".join(lines)


def render_md(r: dict) -> str:
    rows = "\n".join(_row(f"{label} #{i + 1}", h) for label, runs in r["http"].items() for i, h in enumerate(runs))
    cs = r["cold_start"]
    base, new = r["http"]["baseline"], r["http"]["new"]

    def best(runs: list[dict], key: str, field: str, fn=max) -> float:
        return fn(h[key][field] for h in runs)

    ratios = "\n".join(
        f"- {label}: 16-client throughput {best(runs, 'many_clients', 'req_per_s') / best(base, 'many_clients', 'req_per_s'):.2f}x "
        f"the baseline's (best phase of each); server CPU per call "
        f"{best(base, 'many_clients', 'server_cpu_ms_per_call', min) / best(runs, 'many_clients', 'server_cpu_ms_per_call', min):.2f}x less"
        for label, runs in r["http"].items() if label != "baseline")
    over = "\n".join(f"- oversized name ({h['oversized_name']['name_chars']} characters): answered in "
                     f"{h['oversized_name']['answered_ms']} ms, error={h['oversized_name']['is_error']}"
                     for h in new if "oversized_name" in h)
    sdk_rows = "\n".join(f"| {v['stateless_http']} | {v['json_response']} | {v['http']} | {v['req_per_s']:.0f} | "
                         f"{v['p50_ms']:.1f} / {v['p99_ms']:.1f} | {v['server_cpu_ms_per_call']:.2f} | {v['errors']} | "
                         f"{v['load_1min']:.2f} |" for v in r.get("sdk_options", []))
    starts = "\n".join(f"| {k} | {v['median_wall_s']:.3f} | {v['median_cpu_s']:.3f} | {', '.join(map(str, v['wall_s']))} |"
                       for k, v in cs.items())
    return f"""# The served surface under load: baseline vs this tree

- command: `{r['command']}`
- date: {r['date']}
- machine: {r['machine']['cores']} cores, Python {r['machine']['python']}, {r['machine']['platform']} (shared with other jobs: load averages per phase below)
- baseline: `{r['baseline']['ref']}` at {r['baseline']['commit'][:10]}, run with its own dependency set (hidden: {', '.join(r['baseline']['hidden_modules']) or 'none'})
- new: {r['new']['commit'][:10]}{' (+ uncommitted changes)' if r['new']['dirty'] else ''}

## HTTP `match_skill` and a client under attack

One row per phase (phases alternate baseline / new). 1c: one client; 16c: {base[0]['many_clients']['clients']} concurrent
clients, {base[0]['many_clients']['calls']} calls in all; latencies p50 / p99 in ms; server and load-generator CPU per
call in ms (with --workers: all server processes); RSS of the server (all its processes) after the warm-up -> after the
last call (MiB). Stall: `list_skills` latency of one client
while another sends adversarial 4 KB op names in a loop (p50 / p99 / max ms), and without the adversary (quiet p50).

| phase | 1c req/s | 1c p50 / p99 | 16c req/s | 16c p50 / p99 | errors | server CPU ms/call | client CPU ms/call | RSS MiB | quiet p50 | stall p50 / p99 / max | load 1-min before / after |
|---|---|---|---|---|---|---|---|---|---|---|---|
{rows}

{ratios}
{over}

Memory samples (calls -> RSS MiB), 16 clients:
{chr(10).join(f"- {label} #{i + 1}: {h['many_clients']['rss_mib']}" for label, runs in r['http'].items() for i, h in enumerate(runs))}

## What each SDK transport option is worth (this tree, 16 clients)

The new tree's server built with the SDK's options set one by one, today's defaults first.

| stateless_http | json_response | HTTP parser | req/s | p50 / p99 ms | server CPU ms/call | errors | load 1-min |
|---|---|---|---|---|---|---|---|
{sdk_rows}

## Cold start to the first answered `match_skill` (stdio)

From just before the process is spawned to the reply of the first `tools/call`, after `initialize`; starts
alternate baseline / new.

| tree | median wall s | median server CPU s | runs (wall s) |
|---|---|---|---|
{starts}
"""


if __name__ == "__main__":
    sys.exit(main())

"""`skill-server serve` over stdio, as agent clients launch it: a real subprocess."""
from __future__ import annotations

import json
import os
import re
import subprocess

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_support import BLOCKSCALE, BLOCKSCALE_OP, HEAVY, cli_command, subprocess_env, text

HOTSPOT = {"op_name": BLOCKSCALE_OP, "gen": "gfx950", "scale_format": "fp32_block", "regime": "prefill",
           "shape": {"M": 4096, "N": 2048, "K": 7168}}


def test_stdio_serves_the_sdk_client_without_importing_torch_triton_or_flydsl(tmp_path):
    """A fresh server process answers initialize, list_skills, match_skill and get_recipe; its
    import log (-X importtime, one line per module imported) then names none of the heavy packages."""
    cmd = cli_command()
    params = StdioServerParameters(command=cmd[0], args=["-X", "importtime", *cmd[1:], "serve", "--quiet"],
                                   env=subprocess_env(), cwd=str(tmp_path))
    errlog_path = tmp_path / "stderr.log"

    async def run():
        with errlog_path.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as c:
                listed = await c.call_tool("list_skills", {"limit": 10})
                matched = await c.call_tool("match_skill", {"hotspot": HOTSPOT})
                recipe = await c.call_tool("get_recipe", {"card_id": BLOCKSCALE, "shape": "4096x2048x7168"})
                bad = await c.call_tool("get_recipe", {"card_id": BLOCKSCALE, "shape": "4096"})
                after = await c.call_tool("match_skill", {"hotspot": HOTSPOT})
                return c.instructions, listed, matched, recipe, bad, after

    instructions, listed, matched, recipe, bad, after = anyio.run(run)
    assert "match_skill" in instructions
    assert listed.structured_content["total"] == 3
    assert matched.structured_content["matches"][0]["card_id"] == BLOCKSCALE
    assert recipe.structured_content["recipe"]["core"]
    assert bad.is_error and "expected MxNxK" in text(bad)
    assert not after.is_error and after.structured_content == matched.structured_content

    log = errlog_path.read_text()
    imported = {m.group(1).split(".")[0] for m in re.finditer(r"^import time:\s*\d+ \|\s*\d+ \|\s*(\S+)", log, re.M)}
    assert "mcp" in imported and "skill_server" in imported  # the log is real
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_stdout_carries_only_protocol_and_stderr_says_how_to_connect(tmp_path):
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "match_skill", "arguments": {"hotspot": HOTSPOT}}},
        {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": f"skill://{BLOCKSCALE}/SKILL.md"}},
    ]
    proc = subprocess.Popen([*cli_command(), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=subprocess_env(), cwd=str(tmp_path))
    try:
        out_lines = []
        for message in messages:  # one request at a time, as a client that waits for each reply
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            while "id" in message:
                line = proc.stdout.readline()
                assert line, "server closed stdout"
                out_lines.append(line)
                if json.loads(line).get("id") == message["id"]:
                    break
        rest, err = proc.communicate(timeout=60)  # closes stdin: the server exits at EOF
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = [ln for ln in out_lines + rest.splitlines() if ln.strip()]
    replies = [json.loads(ln) for ln in lines]  # every stdout line is a JSON-RPC message
    assert all(r.get("jsonrpc") == "2.0" for r in replies)
    by_id = {r["id"]: r for r in replies if "id" in r}
    assert by_id[1]["result"]["serverInfo"]["name"] == "skill-server"
    assert by_id[2]["result"]["structuredContent"]["matches"][0]["card_id"] == BLOCKSCALE
    assert by_id[3]["result"]["contents"][0]["mimeType"] == "text/markdown"
    assert "claude mcp add skill-server -- " in err and '"mcpServers"' in err
    assert "claude mcp add --transport http skill-server http://127.0.0.1:8765/mcp" in err
    executable = err.split("claude mcp add skill-server -- ")[1].split()[0]
    assert os.path.isabs(executable) and os.path.exists(executable)
    assert "exec tools off, write tools off" in err

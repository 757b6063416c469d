"""`skill-server serve --transport http` on 127.0.0.1: bearer token enforced, MCP served,
and the start-up refusals that keep the server off the network by default."""
from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_support import BLOCKSCALE, BLOCKSCALE_OP, cli_command, free_port, subprocess_env, text, wait_for_port

TOKEN = "test-token-0123456789"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}


@pytest.fixture(scope="module")
def http_server(tmp_path_factory):
    port = free_port()
    cwd = tmp_path_factory.mktemp("http")
    proc = subprocess.Popen([*cli_command(), "serve", "--transport", "http", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(cwd),
                            env=subprocess_env(SKILL_SERVER_TOKEN=TOKEN))
    try:
        wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def post(url: str, headers: dict[str, str]) -> tuple[int, dict, dict]:
    request = urllib.request.Request(url, data=json.dumps(INIT).encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, dict(resp.headers), {}
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read() or b"{}")


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN},
                                     {"Authorization": f"Basic {TOKEN}"}])
def test_missing_or_wrong_token_is_refused_with_401(http_server, headers):
    url, _ = http_server
    status, resp_headers, body = post(url, headers)
    assert status == 401
    assert resp_headers.get("www-authenticate", resp_headers.get("WWW-Authenticate", "")).startswith("Bearer")
    assert "bearer token" in body["error_description"]


def test_right_token_serves_mcp_and_bad_arguments_do_not_stop_it(http_server):
    url, _ = http_server

    async def run():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
            async with Client(streamable_http_client(url, http_client=http)) as c:
                tools = {t.name for t in (await c.list_tools()).tools}
                bad = await c.call_tool("match_skill", {"hotspot": {"op_name": ""}})
                good = await c.call_tool("match_skill", {"hotspot": {"op_name": BLOCKSCALE_OP, "gen": "gfx950",
                                                                     "scale_format": "fp32_block", "regime": "prefill"}})
                card = await c.read_resource(f"skill://{BLOCKSCALE}/SKILL.md")
                return tools, bad, good, card

    tools, bad, good, card = anyio.run(run)
    assert {"list_skills", "match_skill", "get_recipe"} <= tools
    assert "run_verifier" not in tools  # exec tools are off over HTTP unless enabled
    assert bad.is_error and "hotspot.op_name" in text(bad)
    assert not good.is_error and good.structured_content["matches"][0]["card_id"] == BLOCKSCALE
    assert card.contents[0].mime_type == "text/markdown"


def test_raw_request_with_token_is_accepted(http_server):
    url, _ = http_server
    status, _, _ = post(url, {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200


def serve(*args: str, token: str | None = None) -> subprocess.CompletedProcess:
    env = subprocess_env(**({"SKILL_SERVER_TOKEN": token} if token else {}))
    return subprocess.run([*cli_command(), "serve", *args], capture_output=True, text=True, timeout=60, env=env)


def test_non_loopback_host_is_refused_without_allow_remote():
    proc = serve("--transport", "http", "--host", "0.0.0.0", token=TOKEN)
    assert proc.returncode == 2 and "--allow-remote" in proc.stderr and proc.stdout == ""


def test_allow_remote_is_refused_without_a_token():
    proc = serve("--transport", "http", "--host", "0.0.0.0", "--allow-remote")
    assert proc.returncode == 2 and "SKILL_SERVER_TOKEN" in proc.stderr


def test_print_connect_gives_claude_code_and_json_configs_without_the_token():
    proc = serve("--transport", "http", "--print-connect", token=TOKEN)
    assert proc.returncode == 0
    out = proc.stdout
    assert "claude mcp add --transport http skill-server http://127.0.0.1:8765/mcp" in out
    assert '--header "Authorization: Bearer $SKILL_SERVER_TOKEN"' in out
    assert "claude mcp add skill-server -- /" in out
    assert TOKEN not in out
    configs = [json.loads(line.split("JSON config:", 1)[1]) for line in out.splitlines() if "JSON config:" in line]
    stdio = next(c for c in configs if "command" in c["mcpServers"]["skill-server"])
    http = next(c for c in configs if "url" in c["mcpServers"]["skill-server"])
    assert stdio["mcpServers"]["skill-server"]["command"].startswith("/")
    assert "serve" in stdio["mcpServers"]["skill-server"]["args"]
    assert http["mcpServers"]["skill-server"]["headers"] == {"Authorization": "Bearer ${SKILL_SERVER_TOKEN}"}

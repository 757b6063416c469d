"""`skill-server serve --transport http`: bearer token enforced, MCP served statelessly,
Host and Origin checked on every loopback bind, bodies capped, and the start-up refusals
that keep the server off the network (and code execution off HTTP) by default."""
from __future__ import annotations

import http.client
import json
import subprocess
import urllib.error
import urllib.request

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_support import (BLOCKSCALE, BLOCKSCALE_OP, cli_command, free_port, ipv6_loopback, serve_http, stop,
                         subprocess_env, text, wait_for_port)

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
                                     {"Authorization": f"Basic {TOKEN}"}, {"Authorization": "Bearer"},
                                     {"Authorization": f"Bearer {TOKEN}x"}, {"Authorization": f"Bearerx {TOKEN}"}])
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


@pytest.mark.parametrize("value", [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER {TOKEN}", f"Bearer   {TOKEN} "])
def test_raw_request_with_token_is_accepted_whatever_the_scheme_case(http_server, value):
    url, _ = http_server
    status, _, _ = post(url, {"Authorization": value})
    assert status == 200


def raw(host: str, port: int, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request("POST", "/mcp", body=body, headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def call_msg(name: str, arguments: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments}}).encode()


def test_stateless_json_http_serves_a_call_without_a_session(http_server):
    """Any process behind a load balancer can answer any request: no session, no handshake needed."""
    url, _ = http_server
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    status, headers, body = raw("127.0.0.1", port, call_msg("list_skills", {"limit": 1}),
                                {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and "mcp-session-id" not in headers
    assert headers["content-type"].startswith("application/json")
    assert json.loads(body)["result"]["structuredContent"]["total"] == 3


def test_an_oversized_body_gets_413_and_the_server_keeps_serving(tmp_path):
    proc, port = serve_http("--max-upload-bytes", "1024", token=TOKEN, cwd=tmp_path)
    try:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        big = call_msg("match_profile", {"content": "x" * (600 << 10)})
        status, _, _ = raw("127.0.0.1", port, big, auth)
        assert status == 413
        status, _, body = raw("127.0.0.1", port, call_msg("list_skills", {"limit": 1}), auth)
        assert status == 200 and b'"total":3' in body
    finally:
        stop(proc)


LOOPBACK_BINDS = ["127.0.0.2", pytest.param("::1", marks=pytest.mark.skipif(
    not ipv6_loopback(), reason="no IPv6 loopback on this machine"))]


@pytest.fixture(scope="module", params=LOOPBACK_BINDS)
def loopback_server(request, tmp_path_factory):
    """A server on a loopback address other than 127.0.0.1, without a token (the default `make serve`)."""
    proc, port = serve_http(host=request.param, cwd=tmp_path_factory.mktemp("loop"))
    yield request.param, port
    stop(proc)


def _host(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def test_a_foreign_host_header_is_refused_on_any_loopback_bind(loopback_server):
    """DNS rebinding: a page on evil.example resolves its name to the loopback address; the
    browser then sends Host: evil.example. Refused with 421 before MCP sees it."""
    address, port = loopback_server
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}", _host(address, port + 1)):
        status, _, _ = raw(address, port, INIT_BODY, {"Host": host})
        assert status == 421, host


def test_a_foreign_origin_is_refused_on_any_loopback_bind(loopback_server):
    address, port = loopback_server
    for origin in ("http://evil.example", f"http://evil.example:{port}", "http://localhost:3000", "null"):
        status, _, _ = raw(address, port, INIT_BODY, {"Host": _host(address, port), "Origin": origin})
        assert status == 403, origin


def test_the_servers_own_host_and_origin_are_served(loopback_server):
    address, port = loopback_server
    for headers in ({"Host": _host(address, port)}, {"Host": f"localhost:{port}"},
                    {"Host": _host(address, port), "Origin": f"http://{_host(address, port)}"}):
        status, _, body = raw(address, port, INIT_BODY, headers)
        assert status == 200 and b"serverInfo" in body, headers


INIT_BODY = json.dumps(INIT).encode()


@pytest.mark.parametrize("flag", ["--enable-exec-tools", "--enable-write-tools"])
def test_exec_and_write_tools_over_http_refuse_to_start_without_a_token(flag):
    proc = serve_cmd("--transport", "http", flag)
    assert proc.returncode == 2 and "needs a bearer token" in proc.stderr and "SKILL_SERVER_TOKEN" in proc.stderr


def test_a_wildcard_bind_needs_the_names_clients_use():
    proc = serve_cmd("--transport", "http", "--host", "0.0.0.0", "--allow-remote", token=TOKEN)
    assert proc.returncode == 2 and "--allowed-host" in proc.stderr


def test_a_root_that_exposes_the_system_is_refused():
    for root in ("/", "/proc", "/dev"):
        proc = serve_cmd("--root", root)
        assert proc.returncode == 2 and ("refused" in proc.stderr or "never /" in proc.stderr), proc.stderr


def serve_cmd(*args: str, token: str | None = None) -> subprocess.CompletedProcess:
    env = subprocess_env(**({"SKILL_SERVER_TOKEN": token} if token else {}))
    return subprocess.run([*cli_command(), "serve", *args], capture_output=True, text=True, timeout=60, env=env,
                          stdin=subprocess.DEVNULL)


def test_non_loopback_host_is_refused_without_allow_remote():
    proc = serve_cmd("--transport", "http", "--host", "0.0.0.0", token=TOKEN)
    assert proc.returncode == 2 and "--allow-remote" in proc.stderr and proc.stdout == ""


def test_allow_remote_is_refused_without_a_token():
    proc = serve_cmd("--transport", "http", "--host", "0.0.0.0", "--allow-remote")
    assert proc.returncode == 2 and "SKILL_SERVER_TOKEN" in proc.stderr


def test_print_connect_gives_claude_code_and_json_configs_without_the_token():
    proc = serve_cmd("--transport", "http", "--print-connect", token=TOKEN)
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


def test_two_server_processes_answer_one_client_alternately(tmp_path):
    """Stateless HTTP: processes behind one load balancer share only the cards folder and the
    ledger; a client that initialized on one is answered by the other."""
    a, port_a = serve_http(token=TOKEN, cwd=tmp_path)
    b, port_b = serve_http(token=TOKEN, cwd=tmp_path)
    try:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        status, headers, _ = raw("127.0.0.1", port_a, INIT_BODY, auth)
        assert status == 200 and "mcp-session-id" not in headers
        for port in (port_b, port_a, port_b):
            status, _, body = raw("127.0.0.1", port, call_msg("match_skill", {"hotspot": {"op_name": BLOCKSCALE_OP}}),
                                  auth)
            assert status == 200 and BLOCKSCALE.encode() in body
    finally:
        stop(a)
        stop(b)


def test_workers_share_one_port(tmp_path):
    proc, port = serve_http("--workers", "2", token=TOKEN, cwd=tmp_path)
    try:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        for _ in range(30):  # the workers may still be starting: retry until one answers
            try:
                status, _, _ = raw("127.0.0.1", port, call_msg("list_skills", {"limit": 1}), auth)
                break
            except (ConnectionError, http.client.HTTPException):
                import time

                time.sleep(0.5)
        answers = [raw("127.0.0.1", port, call_msg("list_skills", {"limit": 1}), auth) for _ in range(20)]
        assert all(s == 200 and b'"total":3' in body for s, _, body in answers)
        assert raw("127.0.0.1", port, call_msg("list_skills", {}), {})[0] == 401  # each worker checks the token
    finally:
        stop(proc)


def test_workers_need_http():
    proc = serve_cmd("--workers", "2")
    assert proc.returncode == 2 and "--workers" in proc.stderr

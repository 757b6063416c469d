"""The agent's whole loop through the real MCP client, over stdio and over HTTP, on CPU:
match -> recipe -> run_verifier with a candidate file (progress during the run, per shape
and stage) -> the record is `verified` in the history; the same report edited by hand and
sent to record_result is stored as `reported`; a report whose digest no longer matches is
refused. Re-verification reports progress over both transports too. Both are ``alone``
(tests/box_share.py): the run must reach a timing verdict."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_support import BLOCKSCALE, REPO, cli_command, free_port, subprocess_env, text, wait_for_port

pytestmark = pytest.mark.slow

CANDIDATE = f"{REPO / 'tests' / 'fixtures' / 'candidates' / 'blockscale_dequant.py'}:build"
SHAPES = ["128x256x512", "256x128x256"]
QUICK = {"rounds": 5, "block_ms": 5, "bootstrap_samples": 200, "seeds": [0]}
# what only the operator may set (a client sets effort knobs only), and where candidates may live
OPERATOR = ["--verify-options", '{"hidden_shapes": false, "flush_bytes": 1048576}', "--root", str(REPO / "tests" / "fixtures" / "candidates")]
HOTSPOT = {"op_name": "gemm_a8w8_blockscale_bpreshuffle", "gen": "MI355X", "scale_format": "fp32_block",
           "shape": {"M": 4096, "N": 2048, "K": 7168}}
# what the verifier's progress says in each stage it runs (load, parity, signature+segment, timing)
STAGE_WORDS = {"load": ("loading", "starting the candidate"), "parity": ("parity",), "profile": ("profiling",), "timing": ("A/B",)}
TOKEN = "loop-token-0123456789"


async def agent_loop(client) -> dict:
    out: dict = {}
    matched = await client.call_tool("match_skill", {"hotspot": HOTSPOT})
    out["match"] = matched
    card = matched.structured_content["matches"][0]["card_id"]
    out["recipe"] = await client.call_tool("get_recipe", {"card_id": card, "shape": "4096x2048x7168"})
    events: list[tuple[float, str]] = []

    async def on_progress(progress, total, message):
        events.append((time.monotonic(), message or ""))

    verified = await client.call_tool("run_verifier", {
        "card_id": card, "candidate": CANDIDATE, "baseline": "torch_dequant", "shapes": SHAPES, "options": QUICK},
        progress_callback=on_progress)
    out["verify"], out["verify_done"], out["events"] = verified, time.monotonic(), events
    out["history"] = await client.call_tool("get_validation_history", {"card_id": card})
    report_uri = verified.structured_content["report"]
    envelope = json.loads((await client.read_resource(report_uri)).contents[0].text)
    out["envelope"] = envelope
    edited = json.loads(json.dumps(envelope))
    ab = edited["report"]["shape_reports"][0]["timing"]["ab"]
    ab["speedup"] = ab["ci_high"]  # a nicer figure, still inside its own interval
    ab["median_a_ms"] = ab["median_b_ms"] * ab["speedup"]
    out["tampered"] = await client.call_tool("record_result", {"report": edited})  # digest kept: refused
    edited.pop("digest")
    out["edited"] = await client.call_tool("record_result", {"report": edited, "recorded_by": "agent"})
    out["history_after"] = await client.call_tool("get_validation_history", {"card_id": card})
    rv_events: list[str] = []

    async def on_rv(progress, total, message):
        rv_events.append(message or "")

    out["reverify"] = await client.call_tool("reverify", {"card_id": card, "gates": False}, progress_callback=on_rv)
    out["reverify_events"] = rv_events
    return out


def check(out: dict) -> None:
    assert not out["match"].is_error and "get_recipe" in text(out["match"])
    assert not out["recipe"].is_error and "## Procedure" in text(out["recipe"])
    v = out["verify"]
    assert not v.is_error, text(v)
    data = v.structured_content
    assert data["verdict"] in ("FASTER", "SLOWER", "NO_DIFFERENCE") and data["recorded"]["level"] == "verified"
    assert len(data["recorded"]["ids"]) == len(SHAPES) and len(json.dumps(data)) + len(text(v)) < 4000
    # progress: during the run, for every shape and every stage it ran
    events = out["events"]
    assert events, "no progress notifications"
    assert out["verify_done"] - events[0][0] > 2.0, "progress arrived only at the end"
    assert events[-1][0] - events[0][0] > 2.0, "progress arrived in one burst"
    for shape in SHAPES:
        mine = [m for _, m in events if m.startswith(f"{shape}:")]
        for stage, words in STAGE_WORDS.items():
            assert any(any(w in m for w in words) for m in mine), (shape, stage, mine)
    history = out["history"].structured_content["results"]
    assert [r["level"] for r in history] == ["verified"] * len(SHAPES)
    assert {r["shape"] for r in history} == set(SHAPES) and all(r["platform"].startswith("cpu/") for r in history)
    envelope = out["envelope"]
    assert envelope["digest"] and envelope["signature"]["value"] and envelope["report"]["card_id"] == BLOCKSCALE
    assert out["tampered"].is_error and "does not match its content" in text(out["tampered"])
    edited = out["edited"]
    assert not edited.is_error, text(edited)
    assert edited.structured_content["level"] == "reported" and "signature does not check" in text(edited)
    after = out["history_after"].structured_content["results"]
    assert sorted(r["level"] for r in after) == ["reported"] * len(SHAPES) + ["verified"] * len(SHAPES)
    assert {r["by"] for r in after if r["level"] == "reported"} == {"agent"}
    rv = out["reverify"]
    assert not rv.is_error and rv.structured_content["recorded"] is True
    assert len(out["reverify_events"]) >= 4 and any("prerequisites" in m for m in out["reverify_events"])
    assert any("done" in m for m in out["reverify_events"])


@pytest.mark.alone
def test_the_agent_loop_over_stdio(tmp_path):
    ledger = tmp_path / "var" / "ledger.sqlite"
    cmd = cli_command()
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "--ledger", str(ledger), "serve", "--quiet",
                                                         "--enable-exec-tools", "--enable-write-tools", *OPERATOR],
                                   env=subprocess_env(), cwd=str(tmp_path))

    async def run():
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                return await agent_loop(client)

    check(anyio.run(run))
    assert (tmp_path / "var" / "signing.key").stat().st_mode & 0o777 == 0o600


@pytest.mark.alone
def test_the_agent_loop_over_http(tmp_path):
    port = free_port()
    ledger = tmp_path / "var" / "ledger.sqlite"
    proc = subprocess.Popen([*cli_command(), "--ledger", str(ledger), "serve", "--transport", "http", "--port",
                             str(port), "--quiet", "--enable-exec-tools", "--enable-write-tools", *OPERATOR],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(tmp_path),
                            env=subprocess_env(SKILL_SERVER_TOKEN=TOKEN))
    try:
        wait_for_port(port, proc)

        async def run():
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=300) as http:
                async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as c:
                    return await agent_loop(c)

        check(anyio.run(run))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert Path(ledger).is_file()

"""--target-gen through the adapters: the MCP tools (real in-memory MCP client) and the CLI."""
from __future__ import annotations

import json

from mcp_support import BLOCKSCALE, PROFILES, build, text, with_client
from test_cli_catalog import run  # noqa: E402 - main(argv) with captured output

CK = "kernel_gemm_xdl_cshuffle_v3_blockscale_b_preshuffle"


def test_mcp_match_skill_and_match_profile_take_target_gen():
    server = build()

    async def calls(client):
        one = await client.call_tool("match_skill", {"hotspot": {"op_name": CK, "gen": "H200",
                                                                 "scale_format": "fp32_block"},
                                                     "target_gen": "MI355X"})
        bad = await client.call_tool("match_skill", {"hotspot": {"op_name": CK}, "target_gen": "gfx9999"})
        # (a CSV: the SDK decodes a JSON-looking string argument into an object before validation)
        prof = await client.call_tool("match_profile", {"content": (PROFILES / "rocprofv3_kernel_trace.csv").read_text(),
                                                        "target_gen": "gfx942", "top": 3})
        return one, bad, prof

    one, bad, prof = with_client(server, calls)
    data = one.structured_content
    assert [m["card_id"] for m in data["matches"]] == [BLOCKSCALE]
    assert any("matched as if for gfx950 (target generation)" in n and "sm_90" in n for n in data["notes"])
    assert (data["target_gen"], data["source_gen"]) == ("gfx950", "sm_90")
    assert bad.is_error and "target generation: unknown GPU generation 'gfx9999'" in text(bad)
    p = prof.structured_content
    assert p["hotspots"]
    assert any("target generation 'gfx942'" in n for n in p["notes"])
    assert p["target_gen"] == "gfx942" and p.get("device_gen") is None  # a CSV names no device


def test_mcp_profile_view_shows_the_device_generation_and_one_row_per_variant():
    """A torch trace names its device; a kernel that ran at several shapes is one row per variant."""
    server = build()
    prof = with_client(server, lambda c: c.call_tool("match_profile", {"path": str(PROFILES / "torch_rocm_trace.json")}))
    p = prof.structured_content
    assert p["device_gen"] == "gfx950" and "target_gen" not in p
    rows = [h for h in p["hotspots"] if h.get("variant")]
    assert rows and all(h["shape"] for h in rows)
    by_rank: dict = {}
    for h in rows:
        by_rank.setdefault(h["rank"], []).append(h["shape"])
    assert any(len(set(shapes)) > 1 for shapes in by_rank.values())


def test_cli_target_gen_and_the_override_note(capsys):
    rc, out, _ = run(capsys, "match", "--op", CK, "--gen", "H200", "--scale-format", "fp32_block",
                     "--target-gen", "gfx950", "--json")
    assert rc == 0 and json.loads(out)["matches"][0]["card_id"] == BLOCKSCALE
    rc, out, _ = run(capsys, "match-profile", str(PROFILES / "torch_rocm_trace.json"), "--gen", "H200", "--top", "2")
    assert rc == 0 and "overrides gen='H200'" in out and "--target-gen" in out


def test_list_filters_refuse_what_no_card_or_vocabulary_knows(capsys):
    rc, _, err = run(capsys, "list", "--operator", "no_such_operator")
    assert rc == 2 and "unknown operator class 'no_such_operator'" in err and "dense_gemm" in err
    rc, out, _ = run(capsys, "list", "--operator", "DENSE_GEMM", "--json")
    assert rc == 0 and json.loads(out)["total"] >= 2
    rc, _, err = run(capsys, "list", "--gen", "gfx9999")
    assert rc == 2 and "unknown GPU generation" in err

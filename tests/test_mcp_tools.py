"""Catalog tools through the SDK's in-memory client: lean answers, argument errors."""
from __future__ import annotations

import json

import pytest
from mcp_support import BLOCKSCALE, BLOCKSCALE_OP, PROFILES, build, text, with_client

SHAPE = {"M": 4096, "N": 2048, "K": 7168}
FULL_HOTSPOT = {"op_name": BLOCKSCALE_OP, "gen": "MI355X", "dtype": "fp8_e4m3", "scale_format": "fp32_block",
                "regime": "prefill", "shape": SHAPE}


@pytest.fixture(scope="module")
def server():
    return build()


def test_tools_are_lean_annotated_and_have_short_trigger_descriptions(server):
    tools = with_client(server, lambda c: c.list_tools()).tools
    by_name = {t.name: t for t in tools}
    assert {"list_skills", "match_skill", "match_profile", "get_recipe", "reload_skills"} <= set(by_name)
    for name in ("list_skills", "match_skill", "match_profile", "get_recipe", "reload_skills"):
        tool = by_name[name]
        assert tool.output_schema is None, name  # the answers' shapes are documented, not sent every session
        assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False, name
        assert len(tool.description.encode()) < 600, name
        assert tool.description.startswith("Call this"), name


def _nulls(value, path=""):
    if value is None or value == [] or value == {}:
        return [path or "."]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _nulls(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _nulls(v, f"{path}[{i}]")]
    return []


def test_every_answer_is_a_short_summary_plus_compact_data_not_the_same_json_twice(server):
    async def run(c):
        return [await c.call_tool("match_skill", {"hotspot": FULL_HOTSPOT}),
                await c.call_tool("list_skills", {}),
                await c.call_tool("get_recipe", {"card_id": BLOCKSCALE, "shape": "4096x2048x7168"}),
                await c.call_tool("match_profile", {"path": str(PROFILES / "rocprofv3_kernel_trace.csv")}),
                await c.call_tool("reload_skills", {})]

    for result in with_client(server, run):
        assert not result.is_error, text(result)
        body = text(result)
        assert not body.lstrip().startswith("{"), body[:200]  # prose for the model, not the JSON again
        assert json.dumps(result.structured_content) not in body
        assert _nulls(result.structured_content) == [], _nulls(result.structured_content)[:5]
        assert "hotspot" not in result.structured_content  # no echo of the input


def test_gated_tools_are_absent_by_default(server):
    names = {t.name for t in with_client(server, lambda c: c.list_tools()).tools}
    assert "run_verifier" not in names and "record_result" not in names


def test_match_skill_returns_the_matchers_full_answer_as_structured_content(server):
    result = with_client(server, lambda c: c.call_tool("match_skill", {"hotspot": FULL_HOTSPOT}))
    assert not result.is_error, text(result)
    data = result.structured_content
    assert [m["card_id"] for m in data["matches"]] == [BLOCKSCALE]
    match = data["matches"][0]
    assert match["shape_class"]["id"] == "narrow_n_deep_k" and match["recipe"]["core"]
    assert set(match["matched"]) >= {"op_name", "gen", "scale_format", "shape"}
    assert any("normalised to gfx950" in n for n in data["notes"])  # MI355X -> gfx950, said once
    assert [n["card_id"] for n in data["not_applicable"]] == ["flydsl_mxfp8_8wave_gemm"]
    assert "scale_format" in data["not_applicable"][0]["why"][0]
    # each figure says its evidence level, platform and date; the card's own are transcribed
    figures = match["evidence"]["figures"]
    assert figures and all({"level", "platform", "source"} <= set(f) for f in figures)
    assert figures[0]["shape"] == "4096x2048x7168" and figures[0]["level"] == "transcribed" and figures[0]["date"]
    body = text(result)
    assert f"1. {BLOCKSCALE}" in body and "transcribed" in body and "no verified record" in body
    assert f'get_recipe(card_id="{BLOCKSCALE}", shape="4096x2048x7168")' in body


def test_match_skill_abstains_and_says_what_to_supply(server):
    hotspot = {"op_name": BLOCKSCALE_OP, "gen": "gfx950"}
    result = with_client(server, lambda c: c.call_tool("match_skill", {"hotspot": hotspot}))
    data = result.structured_content
    assert "matches" not in data and "Abstained" in text(result)
    abstained = {a["card_id"]: a for a in data["abstained"]}
    assert BLOCKSCALE in abstained
    assert any("scale" in m for m in abstained[BLOCKSCALE]["missing"])


def test_list_skills_pages_and_filters_metadata_only(server):
    async def run(c):
        first = await c.call_tool("list_skills", {"limit": 2})
        second = await c.call_tool("list_skills", {"limit": 2, "cursor": first.structured_content["next_cursor"]})
        nvidia = await c.call_tool("list_skills", {"gen": "H200"})
        moe = await c.call_tool("list_skills", {"operator": "grouped_gemm_moe"})
        return first, second, nvidia, moe

    first, second, nvidia, moe = with_client(server, run)
    page1, page2 = first.structured_content, second.structured_content
    assert page1["total"] == 3 and len(page1["skills"]) == 2 and page1["next_cursor"]
    assert len(page2["skills"]) == 1 and "next_cursor" not in page2
    ids = [s["id"] for s in page1["skills"] + page2["skills"]]
    assert len(set(ids)) == 3
    assert "text" not in page1["skills"][0] and "summary" not in page1["skills"][0]  # metadata only
    assert nvidia.structured_content["total"] == 0
    assert [s["id"] for s in moe.structured_content["skills"]] == ["flydsl_prefill_moe_stage2_fp8partial"]


def test_get_recipe_discloses_progressively_and_never_substitutes(server):
    async def run(c):
        summary = await c.call_tool("get_recipe", {"card_id": BLOCKSCALE, "shape": "4096x2048x7168"})
        as_object = await c.call_tool("get_recipe", {"card_id": BLOCKSCALE, "shape": SHAPE})
        section = await c.call_tool("get_recipe", {"card_id": BLOCKSCALE, "section": "pitfalls"})
        full = await c.call_tool("get_recipe", {"card_id": BLOCKSCALE, "full": True})
        near_miss = await c.call_tool("get_recipe", {"card_id": "flydsl_fp8_blockscale"})
        return summary, as_object, section, full, near_miss

    summary, as_object, section, full, near_miss = with_client(server, run)
    s = summary.structured_content
    assert s["mode"] == "summary" and s["card_id"] == BLOCKSCALE and "text" not in s
    assert s["recipe"]["core"] and s["shape"] == "4096x2048x7168" and s["sections_shown"]
    assert "## Procedure" in text(summary) and s["recipe"]["core"] in text(summary)  # the prose, once, as text
    assert as_object.structured_content["recipe"] == s["recipe"]
    assert section.structured_content["mode"] == "section"
    assert section.structured_content["section"].startswith("Knobs") and "## Knobs" in text(section)
    assert full.structured_content["mode"] == "full" and text(full).lstrip().startswith("---")
    assert len(text(full)) > len(text(summary)) / 2
    assert near_miss.is_error  # a near-miss id is an error naming the known ids, not another card
    assert BLOCKSCALE in text(near_miss) and "unknown card" in text(near_miss)


def test_match_profile_reads_a_path_or_inline_content(server):
    trace = PROFILES / "rocprofv3_kernel_trace.csv"

    async def run(c):
        by_path = await c.call_tool("match_profile", {"path": str(trace), "gen": "MI355X", "top": 3})
        by_content = await c.call_tool("match_profile", {"content": trace.read_text(), "gen": "MI355X", "top": 3})
        both = await c.call_tool("match_profile", {"path": str(trace), "content": "x"})
        return by_path, by_content, both

    by_path, by_content, both = with_client(server, run)
    assert not by_path.is_error, text(by_path)
    hotspots = by_path.structured_content["hotspots"]
    assert 1 <= len(hotspots) <= 3 and hotspots[0]["rank"] == 1
    assert all({"op_name", "rank"} <= set(h) for h in hotspots)
    assert hotspots[0]["abstained"][0]["missing"]  # the CK block-scale kernel: scale format unknown
    assert by_content.structured_content["hotspots"] == hotspots
    assert "#1 " in text(by_path) and "abstained" in text(by_path)
    assert both.is_error and "exactly one of path" in text(both)


def test_match_profile_path_is_refused_outside_the_operators_roots(tmp_path):
    confined = build(file_roots=(tmp_path,))
    result = with_client(confined, lambda c: c.call_tool(
        "match_profile", {"path": str(PROFILES / "rocprofv3_kernel_trace.csv")}))
    assert result.is_error and "outside the folders" in text(result) and "content" in text(result)
    no_paths = build(file_roots=())
    result = with_client(no_paths, lambda c: c.call_tool("match_profile", {"path": "/etc/passwd"}))
    assert result.is_error and "pass the file's text as content" in text(result)


@pytest.mark.parametrize("name,args,expect", [
    ("match_skill", {"hotspot": {"op_name": "x", "shape": "4096x2048"}}, "hotspot.shape"),
    ("match_skill", {"hotspot": {"gen": "gfx950"}}, "hotspot.op_name: required"),
    ("match_skill", {"hotspot": {"op_name": "x", "gpu": "gfx950"}}, "hotspot.gpu: unknown field"),
    ("match_skill", {"hotspot": {"op_name": "x", "gen": "MI999"}}, "unknown GPU generation 'MI999'"),
    ("match_skill", {"op_name": "x"}, "unknown argument(s) ['op_name']"),
    ("list_skills", {"limt": 5}, "list_skills takes ['cursor', 'dtype', 'gen', 'limit', 'operator']"),
    ("list_skills", {"limit": 0}, "limit: Input should be greater than or equal to 1"),
    ("list_skills", {"cursor": "abc"}, "invalid cursor 'abc'"),
    ("get_recipe", {"card_id": BLOCKSCALE, "shape": "4096x2048"}, "expected MxNxK"),
    ("get_recipe", {"card_id": BLOCKSCALE, "section": "Nope"}, "has no section 'Nope'; sections:"),
    ("match_profile", {"content": "not,a,profile\n1,2,3\n"}, "unrecognised profile"),
    ("match_profile", {"path": "/nonexistent/trace.csv"}, "/nonexistent/trace.csv"),
    ("no_such_tool", {}, "unknown tool 'no_such_tool'; tools:"),
])
def test_invalid_arguments_give_an_actionable_error_and_the_server_keeps_serving(server, name, args, expect):
    async def run(c):
        bad = await c.call_tool(name, args)
        good = await c.call_tool("match_skill", {"hotspot": FULL_HOTSPOT})
        return bad, good

    bad, good = with_client(server, run)
    assert bad.is_error
    assert expect in text(bad)
    assert not good.is_error and good.structured_content["matches"]


def test_reload_skills_reports_cards_and_problems(server):
    result = with_client(server, lambda c: c.call_tool("reload_skills", {}))
    assert not result.is_error
    assert result.structured_content == {"cards": 3} and text(result) == "3 card(s) loaded."


def test_the_context_an_agent_pays_stays_within_budget():
    """The issue's goals (bench/mcp_context.py measures them over stdio): tools/list with every
    tool enabled <= 16 k characters, match_skill for a seed hotspot <= 4 k, match_profile
    with its defaults <= 8 k."""
    everything = build(allow_exec_tools=True, allow_write_tools=True)

    def size(result):
        return len(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True)))

    async def run(c):
        return (await c.list_tools(), await c.call_tool("match_skill", {"hotspot": FULL_HOTSPOT}),
                await c.call_tool("match_profile", {"path": str(PROFILES / "torch_rocm_trace.json")}))

    tools, match, profile = with_client(everything, run)
    assert size(tools) <= 16_000 and size(match) <= 4_000 and size(profile) <= 8_000, (
        size(tools), size(match), size(profile))


def test_match_profile_takes_a_json_trace_inline_as_text_or_as_the_parsed_object(server):
    """The SDK parses a JSON-looking string argument before validation: a torch trace sent as
    content (text) or as the object itself is read like the file, under the same size cap."""
    trace_text = (PROFILES / "torch_rocm_trace.json").read_text()

    async def run(c):
        by_path = await c.call_tool("match_profile", {"path": str(PROFILES / "torch_rocm_trace.json"), "top": 3})
        as_text = await c.call_tool("match_profile", {"content": trace_text, "top": 3})
        as_object = await c.call_tool("match_profile", {"content": json.loads(trace_text), "top": 3})
        as_events = await c.call_tool("match_profile", {"content": json.loads(trace_text)["traceEvents"], "top": 3})
        return by_path, as_text, as_object, as_events

    by_path, as_text, as_object, as_events = with_client(server, run)
    for got in (by_path, as_text, as_object, as_events):
        assert not got.is_error, text(got)
    want = by_path.structured_content["hotspots"]
    assert want and as_text.structured_content["hotspots"] == want == as_object.structured_content["hotspots"]
    assert [h["op_name"] for h in as_events.structured_content["hotspots"]] == [h["op_name"] for h in want]
    capped = build(max_upload_bytes=len(trace_text) // 2)
    big = with_client(capped, lambda c: c.call_tool("match_profile", {"content": json.loads(trace_text)}))
    assert big.is_error and "upload limit" in text(big)

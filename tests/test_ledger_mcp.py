"""Ledger tools over MCP (the SDK's in-memory client): gating, record, history, overlap,
re-verification with progress."""
from __future__ import annotations

import pytest
from ledger_support import BLOCKSCALE, MOE, MXFP8, SKILLS, record
from mcp_support import text, with_client

from skill_server.mcp.app import ServerSettings, build_server
from skill_server.service.facade import SkillService

LEDGER_TOOLS = {"get_validation_history", "check_overlap", "record_result", "draft_card", "reverify"}


def server(tmp_path, **settings):
    return build_server(SkillService(SKILLS, ledger_path=tmp_path / "l.sqlite"), ServerSettings(**settings))


def tool_names(srv):
    return {t.name for t in with_client(srv, lambda c: c.list_tools()).tools}


def test_write_and_exec_tools_appear_only_when_the_operator_allows_them(tmp_path):
    assert tool_names(server(tmp_path)) & LEDGER_TOOLS == {"get_validation_history", "check_overlap"}
    assert tool_names(server(tmp_path, allow_write_tools=True)) & LEDGER_TOOLS == LEDGER_TOOLS - {"reverify"}
    assert tool_names(server(tmp_path, allow_exec_tools=True)) & LEDGER_TOOLS == {
        "get_validation_history", "check_overlap", "reverify"}
    tools = {t.name: t for t in with_client(server(tmp_path, allow_write_tools=True, allow_exec_tools=True),
                                            lambda c: c.list_tools()).tools}
    for name in LEDGER_TOOLS:
        assert tools[name].description.startswith("Call this") and len(tools[name].description.encode()) < 600
        assert tools[name].output_schema is None  # lean: the structured content's shape is documented instead
    assert tools["check_overlap"].annotations.read_only_hint is True
    assert tools["record_result"].annotations.read_only_hint is False


def test_record_then_read_the_history(tmp_path):
    srv = server(tmp_path, allow_write_tools=True)
    res = with_client(srv, lambda c: c.call_tool("record_result", {"records": [record()]}))
    assert not res.is_error, text(res)
    assert res.structured_content["card_ids"] == [BLOCKSCALE] and res.structured_content["level"] == "reported"
    assert "as reported" in text(res)
    hist = with_client(srv, lambda c: c.call_tool("get_validation_history", {"card_id": BLOCKSCALE, "platform": "MI355X"}))
    data = hist.structured_content
    assert [(r["speedup"], r["level"]) for r in data["results"]] == [(1.0526, "reported")]
    assert "claims_current" not in data["evidence"]  # unknown: never re-verified
    assert "1 result(s) (1 reported)" in text(hist)


@pytest.mark.parametrize(("over", "message"), [
    ({"card_id": "no_such_card"}, "unknown card 'no_such_card'"),
    ({"baseline": {"name": "ck", "time_ms": -1}}, "baseline.time_ms"),
    ({"verdict": "SLOWER"}, "SLOWER with speedup"),
    ({"report_path": "/etc/passwd"}, "outside the project"),
])
def test_bad_records_are_refused_with_the_reason_and_nothing_is_stored(tmp_path, over, message):
    srv = server(tmp_path, allow_write_tools=True)
    res = with_client(srv, lambda c: c.call_tool("record_result", {"records": [record(), record(**over)]}))
    assert res.is_error and message in text(res), text(res)
    hist = with_client(srv, lambda c: c.call_tool("get_validation_history", {"card_id": BLOCKSCALE}))
    assert "results" not in hist.structured_content and "0 result(s)" in text(hist)


def test_check_overlap_over_mcp(tmp_path):
    res = with_client(server(tmp_path), lambda c: c.call_tool("check_overlap", {"card_id": MXFP8}))
    data = res.structured_content
    assert data["findings"][0]["card_id"] == BLOCKSCALE and data["findings"][0]["kind"] == "distinct"
    assert data["reviews"][0]["verdict"] == "duplicate_functionality"
    res = with_client(server(tmp_path), lambda c: c.call_tool("check_overlap", {}))
    assert res.is_error and "exactly one" in text(res)


def test_reverify_over_mcp_reports_progress_and_records_only_with_write_tools(tmp_path):
    progress = []

    async def call(c):
        async def on_progress(p, total, message):
            progress.append((p, total, message))

        return await c.call_tool("reverify", {"card_id": MOE, "gates": False, "verifier": False},
                                 progress_callback=on_progress)

    srv = server(tmp_path, allow_exec_tools=True)
    res = with_client(srv, call)
    assert not res.is_error, text(res)
    data = res.structured_content
    assert data["cards"][0]["card_id"] == MOE and data["recorded"] is False
    assert data["cards"][0]["status"] in ("PREREQUISITE_MISSING", "NOT_APPLICABLE_HERE")
    assert progress and progress[-1][0] == progress[-1][1] == 1.0 and "done" in progress[-1][2]
    srv = server(tmp_path, allow_exec_tools=True, allow_write_tools=True)
    data = with_client(srv, lambda c: c.call_tool("reverify", {"card_id": MOE, "gates": False})).structured_content
    assert data["recorded"] is True

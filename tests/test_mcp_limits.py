"""Inputs no profiler produces get a clear error, not a crash or an echo: huge dimensions,
names over the cap, unknown filters, and megabyte-long values in every argument."""
from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError
from mcp_support import BLOCKSCALE, BLOCKSCALE_OP, build, text, with_client

MB = "Z" * (1 << 20)


@pytest.fixture(scope="module")
def server():
    return build(allow_write_tools=True)


def call(server, name, args):
    return with_client(server, lambda c: c.call_tool(name, args))


@pytest.mark.parametrize("name,args,expect", [
    ("match_skill", {"hotspot": {"op_name": BLOCKSCALE_OP, "shape": {"M": 10**400, "N": 1, "K": 1}}}, "hotspot.shape.M"),
    ("match_skill", {"hotspot": {"op_name": BLOCKSCALE_OP, "shape": {"M": 1, "N": 2**31, "K": 1}}}, "2147483647"),
    ("get_recipe", {"card_id": BLOCKSCALE, "shape": "1" + "0" * 150 + "x1x1"}, "2147483647"),
    ("get_recipe", {"card_id": BLOCKSCALE, "shape": {"M": 1, "N": 1, "K": 10**40}}, "2147483647"),
    ("match_skill", {"hotspot": {"op_name": "g" * 4097}}, "at most 4096"),
    ("match_skill", {"hotspot": {"op_name": "gemm", "segment_kernels": ["k"] * 65}}, "at most 64"),
    ("match_skill", {"hotspot": {"op_name": "gemm", "segment_kernels": ["k" * 5000]}}, "segment_kernels.0"),
    ("match_skill", {"hotspot": {"op_name": "gemm", "label": "l" * 5000}}, "hotspot.label"),
    ("match_skill", {"hotspot": {"op_name": "gemm", "gen": "g" * 300}}, "hotspot.gen"),
    ("list_skills", {"gen": "MI999"}, "unknown GPU generation 'MI999'"),
    ("list_skills", {"dtype": "fp99"}, "unknown dtype 'fp99'"),
    ("list_skills", {"operator": "no_such_operator"}, "unknown operator class 'no_such_operator'; known:"),
])
def test_out_of_range_inputs_get_a_clear_error(server, name, args, expect):
    result = call(server, name, args)
    assert result.is_error and expect in text(result), text(result)
    assert "Error executing tool" not in text(result).replace(f"Error executing tool {name}:", "")


def test_known_filters_still_filter(server):
    dense = call(server, "list_skills", {"operator": "Dense_GEMM"})
    assert not dense.is_error and dense.structured_content["total"] == 2


@pytest.mark.parametrize("name,args", [
    ("match_skill", {"hotspot": {"op_name": "gemm", "gen": MB}}),
    ("match_skill", {"hotspot": {"op_name": MB}}),
    ("match_skill", {"hotspot": {"op_name": "gemm", "regime": MB}}),
    ("get_recipe", {"card_id": MB}),
    ("get_recipe", {"card_id": BLOCKSCALE, "section": MB}),
    ("get_recipe", {"card_id": BLOCKSCALE, "shape": MB}),
    ("list_skills", {"cursor": MB}),
    ("list_skills", {"operator": MB}),
    ("match_profile", {"content": "a,b\n1,2\n", "format": MB}),
    ("match_profile", {"path": MB}),
    ("match_profile", {"content": MB + "\n1,2\n"}),
    ("get_validation_history", {"card_id": MB}),
    ("check_overlap", {"card_id": MB}),
    ("record_result", {"records": [{"card_id": MB}]}),
    ("draft_card", {"new_id": MB}),
    (MB, {}),
    ("list_skills", {MB: 1}),
])
def test_errors_never_echo_a_megabyte_input(server, name, args):
    result = call(server, name, args)
    assert result.is_error
    assert len(text(result)) < 4000, len(text(result))


def test_resource_and_prompt_errors_never_echo_a_megabyte_input(server):
    async def run(c):
        errors = []
        for attempt in (lambda: c.read_resource(f"skill://{MB}/SKILL.md"),
                        lambda: c.read_resource(f"skill://{BLOCKSCALE}/{'y' * 1900}.yaml"),
                        lambda: c.get_prompt(MB, {}),
                        lambda: c.get_prompt("optimize_hotspot", {"op_name": "x", "shape": MB})):
            try:
                await attempt()
                errors.append(None)
            except MCPError as exc:
                errors.append(exc)
        return errors

    errors = with_client(server, run)
    for exc in errors[:3]:
        assert exc is not None and len(exc.error.message) < 1000 and len(str(exc.error.data)) < 400, exc
    if errors[3] is not None:  # a prompt may accept any text for shape; if it refuses, it does so briefly
        assert len(errors[3].error.message) < 4000

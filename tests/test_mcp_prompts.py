"""The workflow prompt: match -> recipe -> implement -> verify -> record, with the rules."""
from __future__ import annotations

from mcp_support import BLOCKSCALE_OP, build, with_client


def render(server, **args):
    result = with_client(server, lambda c: c.get_prompt("optimize_hotspot", {"op_name": BLOCKSCALE_OP, **args}))
    return result.messages[0].content.text


def test_prompt_is_listed_with_its_arguments():
    prompts = with_client(build(), lambda c: c.list_prompts()).prompts
    prompt = next(p for p in prompts if p.name == "optimize_hotspot")
    args = {a.name: a.required for a in prompt.arguments}
    assert args == {"op_name": True, "gen": False, "shape": False, "pct_gpu": False}


def test_prompt_walks_the_workflow_and_states_the_contract_and_rules():
    body = render(build(), gen="MI355X", shape="4096x2048x7168")
    steps = ["1. Match", "2. Recipe", "3. Implement", "4. Verify", "5. Record"]
    positions = [body.index(s) for s in steps]
    assert positions == sorted(positions)
    for tool in ("match_skill", "match_profile", "get_recipe", "run_verifier", "record_result"):
        assert f"`{tool}`" in body
    assert "def build(inputs: dict[str, Tensor], outputs: dict[str, Tensor]) -> launch" in body
    assert "Parity gates everything" in body and "A fast wrong kernel scores 0" in body
    assert "Score whole segments" in body
    assert BLOCKSCALE_OP in body and '"gen": "MI355X"' in body
    assert '"shape": "4096x2048x7168"' in body  # the shape as given: match_skill takes the text


def test_prompt_says_how_to_enable_gated_tools_when_they_are_off():
    body = render(build())
    assert "--enable-exec-tools" in body and "--enable-write-tools" in body
    assert "not enabled on this server" in body


def test_prompt_tells_the_agent_to_call_gated_tools_when_a_module_registered_them():
    server = build(allow_exec_tools=True, allow_write_tools=True)
    present = {t.name for t in with_client(server, lambda c: c.list_tools()).tools}

    # Stand-ins for the gated tools whose modules are not in this tree yet.
    if "run_verifier" not in present:
        @server.tool(name="run_verifier", description="Call this to verify a candidate.")
        def run_verifier(card_id: str) -> str:
            return "stub"

    if "record_result" not in present:
        @server.tool(name="record_result", description="Call this to record a verifier report.")
        def record_result(report: str) -> str:
            return "stub"

    body = render(server)
    assert "Call `run_verifier`" in body and "`run_verifier` records its own result" in body
    assert "call `record_result` with its report_id" in body and "stored as `reported`" in body
    assert "not enabled on this server" not in body


def test_server_instructions_name_the_disabled_groups():
    async def instructions(c):
        return c.instructions

    off = with_client(build(), instructions)
    on = with_client(build(allow_exec_tools=True, allow_write_tools=True), instructions)
    assert "match_skill" in off and "optimize_hotspot" in off
    assert "--enable-exec-tools" in off and "--enable-write-tools" in off
    assert "Off on this server" not in on

"""Every front end reads a shape through the one parser (``verifiers.shape_text``): the CLI
(match, show, verify), the MCP tools through the real client (match_skill, get_recipe,
run_verifier) and the verifier API accept the same spellings, and refuse the same bad ones
with one line naming the expected form."""
from __future__ import annotations

import subprocess

import pytest
from mcp_support import BLOCKSCALE, BLOCKSCALE_OP, build, cli_command, subprocess_env, text, with_client

from skill_server.cli.entry import main
from verifiers.api import resolve_shapes
from verifiers.problem import load_problem
from verifiers.shape_text import ShapeTextError, parse_shape_text

GOOD = ["4096x2048x7168", "4096X2048X7168", "4096×2048×7168", "4096*2048*7168", "4096 x 2048 x 7168",
        "4096,2048,7168", "4096 2048 7168", " 4096x2048x7168 ", "M=4096,N=2048,K=7168", "M=4096 N=2048 K=7168",
        "K=7168;M=4096;N=2048", "M = 4096, N = 2048, K = 7168", "(4096, 2048, 7168)", "[4096,2048,7168]"]
BAD = ["4096x2048x7168x", "x4096x2048x7168", "4096xx2048x7168", "4096x2048", "4096x2048x7168x1",
       "4096x2048x7168.0", "4096x2048x-7168", "4096x2048x+7168", "4096x2048x7_168", "4096x2048x7168k",
       "4096x2048x²", "0x2048x7168", "M=4096,N=2048", "M=4096,N=2048,K=7168,", "M=4096,N=2048,K=7168,Q=1", "",
       "(4096x2048x7168", "()", "M==4096,N=2048,K=7168"]
DIMS = {"M": 4096, "N": 2048, "K": 7168}


@pytest.mark.parametrize("spelling", GOOD)
def test_the_parser_reads_every_documented_spelling(spelling):
    assert parse_shape_text(spelling, ("M", "N", "K")) == DIMS


@pytest.mark.parametrize("spelling", BAD)
def test_the_parser_refuses_with_one_line_naming_the_form(spelling):
    with pytest.raises(ShapeTextError) as err:
        parse_shape_text(spelling, ("M", "N", "K"))
    message = str(err.value)
    assert "\n" not in message and ("expected MxNxK" in message or "out of range" in message), message


def test_a_problem_with_more_dimensions_reads_them_positionally_and_by_name():
    names = ("M", "N", "K", "E", "top_k")
    want = {"M": 24, "N": 96, "K": 64, "E": 8, "top_k": 2}
    assert parse_shape_text("24x96x64x8x2", names) == want == parse_shape_text("M=24,N=96,K=64,E=8,top_k=2", names)
    with pytest.raises(ShapeTextError, match=r"stray separator; expected MxNxKxExtop_k"):
        parse_shape_text("24x96x64x8x2x", names)


def _cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("spelling", GOOD[::2] + GOOD[-3:])
def test_cli_match_and_show_accept_each_spelling(capsys, spelling):
    rc, out, err = _cli(capsys, "match", "--op", BLOCKSCALE_OP, "--gen", "gfx950", "--scale-format", "fp32_block",
                        "--shape", spelling)
    assert rc == 0 and "class=narrow_n_deep_k (tuned)" in out, err
    rc, out, err = _cli(capsys, "show", BLOCKSCALE, "--shape", spelling)
    assert rc == 0 and "shape 4096x2048x7168 -> narrow_n_deep_k" in out, err


@pytest.mark.parametrize("front", ["match", "show", "verify"])
@pytest.mark.parametrize("spelling", ["4096x2048x7168x", "4096x2048", "M=4096,N=2048"])
def test_cli_front_ends_refuse_a_bad_shape_in_one_line(capsys, front, spelling):
    argv = {"match": ["match", "--op", BLOCKSCALE_OP, "--shape", spelling],
            "show": ["show", BLOCKSCALE, "--shape", spelling],
            "verify": ["verify", BLOCKSCALE, "--candidate", "arm:triton_twin", "--shape", spelling, "--no-record"]}[front]
    if front == "verify":  # the verify CLI owns its process (signals, the judge): run it as a user does
        proc = subprocess.run([*cli_command(), *argv], capture_output=True, text=True, timeout=120,
                              env=subprocess_env())
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    else:
        rc, out, err = _cli(capsys, *argv)
    assert rc == 2 and not out, out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "expected MxNxK" in lines[0] and "Traceback" not in err, err


@pytest.mark.parametrize("spelling", GOOD)
def test_the_verifier_takes_each_spelling_and_writes_it_one_way(spelling):
    problem = load_problem("flydsl_fp8_blockscale_gemm")
    assert resolve_shapes(problem, [spelling]) == ["4096x2048x7168"]


@pytest.fixture(scope="module")
def server():
    return build(allow_exec_tools=True)


def test_mcp_match_skill_and_get_recipe_accept_what_the_cli_accepts(server):
    spellings = ["4096x2048x7168", "4096 x 2048 x 7168", "M=4096,N=2048,K=7168", DIMS, [4096, 2048, 7168]]

    async def run(c):
        out = []
        for s in spellings:
            hotspot = {"op_name": BLOCKSCALE_OP, "gen": "gfx950", "scale_format": "fp32_block", "shape": s}
            out.append((await c.call_tool("match_skill", {"hotspot": hotspot}),
                        await c.call_tool("get_recipe", {"card_id": BLOCKSCALE, "shape": s})))
        return out

    for (match, recipe), s in zip(with_client(server, run), spellings):
        assert not match.is_error and not recipe.is_error, (s, text(match), text(recipe))
        top = match.structured_content["matches"][0]
        assert top["card_id"] == BLOCKSCALE and top["shape_class"]["id"] == "narrow_n_deep_k", s
        assert "4096x2048x7168 -> class narrow_n_deep_k" in text(recipe), s


def test_mcp_front_ends_refuse_a_trailing_character_with_one_line(server):
    bad = "4096x2048x7168x"

    async def run(c):
        return [await c.call_tool("match_skill", {"hotspot": {"op_name": BLOCKSCALE_OP, "shape": bad}}),
                await c.call_tool("get_recipe", {"card_id": BLOCKSCALE, "shape": bad}),
                await c.call_tool("run_verifier", {"card_id": BLOCKSCALE, "candidate": "arm:triton_twin",
                                                   "shapes": [bad]})]

    for result in with_client(server, run):
        body = text(result)
        assert result.is_error and "\n" not in body.strip(), body
        assert "stray separator; expected MxNxK, e.g. 4096x2048x7168" in body, body


def test_match_skill_schema_says_shape_text_is_welcome(server):
    tools = {t.name: t for t in with_client(server, lambda c: c.list_tools()).tools}
    shape = tools["match_skill"].input_schema["$defs"]["Hotspot"]["properties"]["shape"]
    assert {"type": "string"} in shape["anyOf"] and "MxNxK" in shape["description"]

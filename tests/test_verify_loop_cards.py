"""The agent's loop closes for every card on CPU (issue 24, item 4): `verify` at the card's
smallest smoke shape, then `history` shows one `verified` record carrying the report id;
the same through the real MCP client over stdio (`run_verifier` -> `get_validation_history`),
with at least 3 progress notifications reaching the client and an answer under 4 k characters.

Each card runs from a copy of the skills whose CPU binding is swapped: the card's CPU
reference arm is bound as the baseline and the card's CPU baseline arm is the candidate.
So a front end that ignores the binding runs another baseline (the problem's own default,
the candidate itself) or none at all, and the test fails on the report's baseline; a record
the ledger refuses fails it on the history. Quick settings as in test_mcp_agent_loop: the
operator turns hidden shapes and the profiler off (the profiled stages are
test_mcp_agent_loop's; a verified record needs the timing, not the profile) and flushes
1 MiB; the client asks for 5 rounds, one seed, one call per block.
"""
from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_support import SKILLS, cli_command, copy_skills, subprocess_env, text

from verifiers.problem import load_problem

# alone: the verified record needs a timing verdict, and a box the other worker loads may rightly
# give INCONCLUSIVE (seen in CI: 0.98 of 2 cores busy outside the verifier), which is never recorded
pytestmark = [pytest.mark.slow, pytest.mark.alone]

CARDS = ("flydsl_fp8_blockscale_gemm", "flydsl_mxfp8_8wave_gemm", "flydsl_prefill_moe_stage2_fp8partial")
OPERATOR = {"hidden_shapes": False, "flush_bytes": 1 << 20, "secret_seed": False, "profile": False}
CLIENT = {"rounds": 5, "seeds": [0], "bootstrap_samples": 200, "block_ms": 1.0, "min_calls_per_block": 1}


def _binding(card: str) -> tuple[dict, dict, str]:
    """The card's verifier block as written: (baseline map, reference map, problem)."""
    head = (SKILLS / card / "SKILL.md").read_text().split("\n---", 2)[0]
    block = head[head.index("\nverifier:"):]

    def flow_map(key: str) -> dict:
        m = re.search(rf"^  {key}: \{{([^}}]*)\}}", block, re.M)
        return dict(part.split(": ") for part in m.group(1).split(", "))

    return flow_map("baseline"), flow_map("reference"), re.search(r"^  problem: (\S+)", block, re.M).group(1)


def swapped_skills(tmp: Path, card: str) -> tuple[Path, str, str, str]:
    """A skills copy binding the card's CPU reference arm as its CPU baseline; returns
    (skills dir, bound baseline, candidate arm, smallest smoke shape)."""
    baseline, reference, problem_name = _binding(card)
    skills = copy_skills(tmp / "skills")
    path = skills / card / "SKILL.md"
    source = path.read_text()
    swapped = re.sub(r"^(  baseline: \{.*?cpu: )(\w+)", lambda m: m.group(1) + reference["cpu"], source, count=1,
                     flags=re.M)
    assert swapped != source
    path.write_text(swapped)
    problem = load_problem(problem_name)
    small = min(problem.smoke_shapes, key=lambda d: math.prod(d[n] for n in problem.dim_names))
    assert baseline["cpu"] != reference["cpu"]
    return skills, reference["cpu"], baseline["cpu"], ",".join(f"{n}={small[n]}" for n in problem.dim_names)


def _cli(*args: str, skills: Path, ledger: Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*cli_command(), "--skills-dir", str(skills), "--ledger", str(ledger), *args],
                          capture_output=True, text=True, timeout=900, env=subprocess_env(), cwd=str(cwd))


def _check_cli_history(history: dict, report_id: str, baseline: str, candidate: str) -> None:
    [row] = history["results"]
    assert row["evidence"]["level"] == "verified" and row["evidence"]["report_digest"].startswith(report_id), row
    assert row["baseline"]["name"] == baseline and row["candidate"]["name"] == candidate
    assert row["platform"]["runtime"] == "cpu"


def _check_mcp_history(history: dict, report_id: str, baseline: str, candidate: str) -> None:
    [row] = history["results"]
    assert row["level"] == "verified" and row["report_id"] == report_id, row
    assert row["baseline"] == baseline and row["candidate"] == candidate and row["platform"].startswith("cpu/")


@pytest.mark.parametrize("card", CARDS)
def test_cli_verify_then_history_shows_the_verified_record(tmp_path, card):
    skills, baseline, candidate, shape = swapped_skills(tmp_path, card)
    ledger = tmp_path / "ledger.sqlite"
    report = tmp_path / "report.json"
    options = json.dumps({**OPERATOR, **{k: v for k, v in CLIENT.items() if k != "seeds"}})
    run = _cli("verify", card, "--candidate", f"arm:{candidate}", "--shape", shape, "--seed", "0", "--options", options,
               "--report", str(report), "--quiet", skills=skills, ledger=ledger, cwd=tmp_path)
    assert run.returncode in (0, 1), run.stdout[-3000:] + run.stderr[-3000:]
    envelope = json.loads(report.read_text())
    assert envelope["report"]["baseline"] == baseline, "the card's binding did not decide the baseline"
    report_id = envelope["digest"][:16]
    assert f"report {report_id}" in run.stdout and "recorded 1 result(s) as verified" in run.stdout, run.stdout
    history = _cli("history", card, "--json", skills=skills, ledger=ledger, cwd=tmp_path)
    assert history.returncode == 0, history.stderr
    _check_cli_history(json.loads(history.stdout), report_id, baseline, candidate)


@pytest.mark.parametrize("card", CARDS)
def test_mcp_run_verifier_then_history_shows_the_verified_record(tmp_path, card):
    skills, baseline, candidate, shape = swapped_skills(tmp_path, card)
    cmd = cli_command()
    params = StdioServerParameters(
        command=cmd[0], args=[*cmd[1:], "--skills-dir", str(skills), "--ledger", str(tmp_path / "ledger.sqlite"),
                              "serve", "--quiet", "--enable-exec-tools", "--enable-write-tools",
                              "--verify-options", json.dumps(OPERATOR)],
        env=subprocess_env(), cwd=str(tmp_path))
    events: list[str] = []

    async def run():
        async def on_progress(progress, total, message):
            events.append(message or "")

        with (tmp_path / "stderr.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                verified = await client.call_tool("run_verifier", {
                    "card_id": card, "candidate": f"arm:{candidate}", "shapes": [shape], "options": CLIENT},
                    progress_callback=on_progress)
                history = await client.call_tool("get_validation_history", {"card_id": card})
                return verified, history

    verified, history = anyio.run(run)
    assert not verified.is_error, text(verified)
    data = verified.structured_content
    assert data["baseline"] == baseline, "the card's binding did not decide the baseline"
    assert data["recorded"] and data["recorded"]["level"] == "verified" and len(data["recorded"]["ids"]) == 1, data
    assert len(json.dumps(data)) + len(text(verified)) < 4000
    assert len(events) >= 3, events
    report_id = data["report"].removeprefix("report://")
    _check_mcp_history(history.structured_content, report_id, baseline, candidate)

"""The verifier's two front ends, `skill-server verify` and the MCP tool `run_verifier`,
reach the same verifier through the service (CPU, small shape, parity only), and record
through the same seam."""
from __future__ import annotations

import json
import subprocess
import sys

from mcp_support import build, with_client

QUICK = ["--shape", "128x256x512", "--no-profile", "--no-timing", "--seed", "0", "--no-secret-seed",
         "--options", '{"hidden_shapes": false}', "--quiet"]
# over MCP the operator sets the rules (server settings); a client may only set effort knobs
OPERATOR_OPTIONS = {"hidden_shapes": False, "profile": False, "secret_seed": False}
OPTIONS = {"timing": False, "seeds": [0]}


def _cli(*args, ledger=None, record=True):
    where = (["--ledger", str(ledger)] if ledger else []) + ([] if ledger and record else ["--no-record"])
    return subprocess.run([sys.executable, "-m", "skill_server.cli.entry", "verify", "flydsl_fp8_blockscale_gemm", *args,
                           *where], capture_output=True, text=True, timeout=300)


def test_cli_verify_passes_an_exact_arm_and_fails_the_e8m0_trap(tmp_path):
    from skill_server.ledger.results import Ledger

    ledger = tmp_path / "l.sqlite"
    ok = _cli("--candidate", "arm:torch_dequant", "--baseline", "torch_dequant", "--json", "--report",
              str(tmp_path / "ok.json"), *QUICK, ledger=ledger, record=False)
    assert ok.returncode == 0, ok.stderr[-2000:]
    report = json.loads(ok.stdout)
    assert report["card_id"] == "flydsl_fp8_blockscale_gemm" and report["stages"]["parity"]["status"] == "PASS"
    assert not ledger.exists()  # --no-record: nothing stored (the signed report is in ok.json)
    # timing was off, so nothing timed: this server's own signed report is stored, with no result row
    # (an INCONCLUSIVE run is evidence neither for nor against the card)
    rec = subprocess.run([sys.executable, "-m", "skill_server.cli.entry", "record", "--from-report", str(tmp_path / "ok.json"),
                          "--ledger", str(ledger)], capture_output=True, text=True, timeout=120)
    assert rec.returncode == 0 and "recorded 0 result(s) as verified" in rec.stdout, rec.stderr
    assert "INCONCLUSIVE" in rec.stderr and "not evidence" in rec.stderr
    assert Ledger(ledger).history() == []
    bad = _cli("--candidate", "arm:e8m0_scaled", "--baseline", "torch_dequant", "--report",
               str(tmp_path / "r.json"), *QUICK, ledger=ledger)
    assert bad.returncode == 1 and "FAIL" in bad.stdout and "recorded 1 result(s) as verified" in bad.stdout
    [r] = Ledger(ledger).history()  # the FAIL blames the candidate on evidence: a result row
    assert r.verdict == "FAIL" and r.evidence.level == "verified" and r.candidate.name == "e8m0_scaled"
    envelope = json.loads((tmp_path / "r.json").read_text())
    assert envelope["digest"] == r.evidence.report_digest and envelope["signature"]["value"]
    again = subprocess.run([sys.executable, "-m", "skill_server.cli.entry", "record", "--from-report", str(tmp_path / "r.json"),
                            "--ledger", str(ledger)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "already recorded" in again.stderr


def test_cli_verify_refuses_a_card_without_binding_or_an_unknown_arm():
    proc = _cli("--candidate", "arm:no_such_arm", *QUICK)
    assert proc.returncode == 2 and "no_such_arm" in proc.stderr and "Traceback" not in proc.stderr


def test_run_verifier_is_off_unless_exec_tools_are_enabled():
    async def names(client):
        return {t.name for t in (await client.list_tools()).tools}

    assert "run_verifier" not in with_client(build(), names)
    assert "run_verifier" in with_client(build(allow_exec_tools=True), names)


def test_run_verifier_over_mcp_returns_the_report_with_progress():
    seen = []

    async def call(client):
        async def on_progress(progress, total, message):
            seen.append(message)

        return await client.call_tool("run_verifier", {
            "card_id": "flydsl_fp8_blockscale_gemm", "candidate": "arm:e8m0_scaled", "baseline": "torch_dequant",
            "shapes": ["128x256x512"], "options": OPTIONS}, progress_callback=on_progress)

    result = with_client(build(allow_exec_tools=True, verify_options=OPERATOR_OPTIONS), call)
    assert not result.is_error
    answer = result.structured_content
    assert answer["verdict"] == "FAIL" and answer["stages"]["parity"] == "FAIL"
    assert answer["shapes"][0]["reasons"]["parity"] and "recorded" not in answer  # write tools are off
    assert answer["report"].startswith("report://") and "FAIL" in result.content[0].text
    assert seen, "no progress notifications"


def test_run_verifier_bad_card_is_an_error_result():
    async def call(client):
        return await client.call_tool("run_verifier", {"card_id": "nope", "candidate": "arm:x"})

    result = with_client(build(allow_exec_tools=True), call)
    assert result.is_error and "unknown card 'nope'" in result.content[0].text


def test_run_verifier_error_verdict_is_an_error_answer_that_says_why_it_was_not_recorded(tmp_path):
    """A baseline that cannot run on this platform: the judge ends ERROR before it opens a device.
    The answer is an error (isError) carrying the report, and it says why nothing was recorded."""
    from skill_server.mcp.app import ServerSettings, build_server
    from skill_server.service.facade import SkillService

    from mcp_support import SKILLS

    server = build_server(SkillService(SKILLS, check_interval=1.0, ledger_path=tmp_path / "l.sqlite"),
                          ServerSettings(allow_exec_tools=True, allow_write_tools=True, verify_options=OPERATOR_OPTIONS))

    async def call(client):
        return await client.call_tool("run_verifier", {
            "card_id": "flydsl_fp8_blockscale_gemm", "candidate": "arm:torch_dequant", "baseline": "ck_blockscale",
            "shapes": ["128x256x512"], "options": OPTIONS})

    result = with_client(server, call)
    answer = result.structured_content
    assert result.is_error and answer["verdict"] == "ERROR", result.content[0].text
    assert "not on cpu" in result.content[0].text
    assert "before the verifier opened a device" in answer["not_recorded"]
    assert "provenance names no platform" not in result.content[0].text


def test_cli_verify_says_the_true_reason_a_run_was_not_recorded(tmp_path):
    proc = _cli("--candidate", "arm:torch_dequant", "--baseline", "ck_blockscale", *QUICK, ledger=tmp_path / "l.sqlite")
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]  # ERROR: the harness could not decide
    assert "not recorded: the run ended ERROR before the verifier opened a device" in proc.stdout, proc.stdout
    assert "--no-record" not in proc.stdout

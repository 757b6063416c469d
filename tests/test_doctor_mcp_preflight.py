"""The doctor over MCP (the real in-memory client) returns the CLI's model; a verification on a
box that cannot run it refuses with the doctor's line, through the CLI and through MCP."""
from __future__ import annotations

import os
import subprocess
import sys

from doctor_support import REPO, blocker_dir, doctor_json
from mcp_support import build, with_client

from skill_server.doctor.model import DoctorFindings

SUBSET = ["install", "linker", "rocm", "rocprofv3"]
VERIFY = [sys.executable, "-m", "skill_server.cli.entry", "verify", "flydsl_fp8_blockscale_gemm", "--candidate",
          "arm:torch_dequant", "--baseline", "torch_dequant", "--shape", "128x256x512", "--no-timing", "--no-profile",
          "--seed", "0", "--no-secret-seed", "--options", '{"hidden_shapes": false}', "--quiet"]


def test_mcp_doctor_tool_returns_the_same_model_as_the_cli():
    async def call(client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["doctor"].annotations.read_only_hint is True
        assert tools["doctor"].output_schema is None  # lean tools/list (mcp_answers)
        return await client.call_tool("doctor", {"checks": SUBSET})

    res = with_client(build(), call)  # registered on a default server: read-only, runs only the project's checks
    assert not res.is_error, res.content
    over_mcp = DoctorFindings.model_validate(res.structured_content)
    cli, _ = doctor_json(*[a for c in SUBSET for a in ("--check", c)])
    assert [(c.id, c.status) for c in over_mcp.checks] == [(c["id"], c["status"]) for c in cli["checks"]]
    assert [c.id for c in over_mcp.checks] == SUBSET[:1] + ["rocm", "linker", "rocprofv3"]
    assert over_mcp.check("linker").details == DoctorFindings.model_validate(cli).check("linker").details


def test_mcp_doctor_refuses_unknown_checks_by_name():
    async def call(client):
        return await client.call_tool("doctor", {"checks": ["linker", "rm -rf /"]})

    res = with_client(build(), call)
    assert res.is_error and "unknown doctor check(s) ['rm -rf /']" in res.content[0].text


def _verify(*extra: str, pythonpath_first=None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(([str(pythonpath_first)] if pythonpath_first else []) + [str(REPO)])
    return subprocess.run([*VERIFY, *extra], capture_output=True, text=True, timeout=300, env=env, cwd=REPO)


def test_verify_refuses_with_the_doctors_line_when_torch_is_missing(tmp_path):
    proc = _verify(pythonpath_first=blocker_dir(tmp_path, torch="missing"))
    assert proc.returncode == 3, proc.stderr[-1500:]
    assert "refused on this box" in proc.stderr and "doctor torch: missing: torch is not installed" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_verify_on_a_box_without_gpu_refuses_a_gpu_device():
    # (auto on a CPU build verifies on the CPU, as CI does: tests/test_verify_frontends.py runs that)
    proc = _verify("--device", "cuda")
    assert proc.returncode == 3 and "doctor device: not_applicable: no GPU" in proc.stderr, proc.stderr[-1500:]
    assert "--device cuda needs a GPU" in proc.stderr


def test_mcp_run_verifier_refuses_with_the_doctors_line():
    async def call(client):
        return await client.call_tool("run_verifier", {
            "card_id": "flydsl_fp8_blockscale_gemm", "candidate": "arm:torch_dequant", "baseline": "torch_dequant",
            "shapes": ["128x256x512"], "options": {"device": "cuda", "timing": False}})

    res = with_client(build(allow_exec_tools=True), call)
    assert res.is_error
    text = res.content[0].text
    assert "verification refused on this box" in text and "doctor device: not_applicable: no GPU" in text



def test_a_passed_preflight_is_remembered_a_refusal_is_not(monkeypatch):
    from skill_server.doctor import runner as doctor
    from skill_server.doctor import preflight as doctor_preflight
    calls = []
    real = doctor.run_doctor
    monkeypatch.setattr(doctor, "run_doctor", lambda checks, **kw: calls.append(list(checks)) or real(checks, **kw))
    monkeypatch.setattr(doctor_preflight, "_passed", {})
    # as on a GPU build asked for the CPU: the torch check runs in the doctor's process and passes
    monkeypatch.setattr(doctor_preflight, "peek_torch_build", lambda: "cuda")
    assert doctor_preflight.verify_refusal("cpu") is None
    assert doctor_preflight.verify_refusal("cpu") is None
    assert calls == [["torch"]]
    # a GPU asked of this CPU build is refused every time, each time asked of the doctor again
    monkeypatch.setattr(doctor_preflight, "peek_torch_build", lambda: "cpu")
    for _ in range(2):
        assert "no GPU" in (doctor_preflight.verify_refusal("cuda") or "")
    assert calls[1:] == [["torch", "device"], ["torch", "device"]]

"""Fleet re-verification on a real local Ray cluster (one per module, loopback only): a
head and two worker nodes advertising different generations run CPU problems; every
(card, platform) lands in the shared PostgreSQL ledger, signed; a worker killed mid-task
ends as a recorded "not re-verified", never a silent gap.

Lean by design (the suite's budget): one cluster for the module, one CPU verifier run (the
kill test's), the other runs without the verifier."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from fleet_support import RAY_ENV

# before Ray is first imported: it reads these at import time (loopback node addresses, no usage stats)
os.environ.update(RAY_ENV)
pytest.importorskip("ray", reason="Ray is not installed: pip install 'gpu-skill-server[fleet]' (scripts/setup.sh)")

from fleet_support import env_for_driver, start_cluster, task_process_on  # noqa: E402
from ledger_support import MXFP8, SKILLS  # noqa: E402
from mcp_support import cli_command, text, with_client  # noqa: E402

from skill_server.service.facade import SkillService  # noqa: E402

pytestmark = pytest.mark.slow
CARDS = 3


@pytest.fixture(scope="module")
def cluster():
    c, amd, nvidia = start_cluster()
    try:
        yield c, amd, nvidia
    finally:
        c.shutdown()


def _reverify(address: str, ledger: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*cli_command(), "--ledger", ledger, "reverify", "--ray", address, "--no-gates", *args],
                          capture_output=True, text=True, timeout=timeout, env=env_for_driver())


def _rows(backend) -> list[dict]:
    rows = backend.raw("SELECT card_id, platform_key, status, evidence_level, detail_json FROM reverifications ORDER BY id")
    return [{"card": c, "platform": p, "status": s, "level": lv, "fleet": json.loads(d).get("fleet", {})}
            for c, p, s, lv, d in rows]


def test_every_card_runs_once_on_each_advertised_platform_and_lands_in_the_shared_ledger(cluster, pg_backend):
    c, amd, nvidia = cluster
    proc = _reverify(c.address, pg_backend.location, "--no-verifier")
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = proc.stdout
    assert "cuda/sm_90" in table and "rocm/gfx950" in table and "recorded in postgresql://skill:***@" in table
    assert proc.stderr.count(": done:") == 2 * CARDS  # one progress line per finished task (stderr is no tty)
    rows = _rows(pg_backend)
    assert len(rows) == 2 * CARDS and {r["level"] for r in rows} == {"verified"}
    nodes = {r["fleet"]["requested"]: set() for r in rows}
    for r in rows:
        nodes[r["fleet"]["requested"]].add(r["fleet"]["node"].split("(")[1][:8])
    # each platform's tasks ran on the one node advertising it
    assert nodes == {"rocm/gfx950": {amd.node_id[:8]}, "cuda/sm_90": {nvidia.node_id[:8]}}
    statuses = SkillService(SKILLS, ledger_path=pg_backend.location).ledger.latest_statuses()
    assert set(statuses) == {"flydsl_fp8_blockscale_gemm", MXFP8, "flydsl_prefill_moe_stage2_fp8partial"}


def test_the_mcp_reverify_tool_runs_on_the_servers_fleet_only(cluster, pg_backend):
    from skill_server.mcp.app import ServerSettings, build_server

    c, *_ = cluster
    svc = SkillService(SKILLS, ledger_path=pg_backend.location)
    progress = []

    async def call(client):
        async def on_progress(p, total, message):
            progress.append((p, total, message))

        return await client.call_tool("reverify", {"card_id": MXFP8, "gates": False, "verifier": False, "fleet": True},
                                      progress_callback=on_progress)

    plain = build_server(svc, ServerSettings(allow_exec_tools=True, allow_write_tools=True))
    refused = with_client(plain, call)
    assert refused.is_error and "serve --ray-address" in text(refused)
    fleet = build_server(svc, ServerSettings(allow_exec_tools=True, allow_write_tools=True, ray_address=c.address))
    res = with_client(fleet, call)
    assert not res.is_error, text(res)
    assert sorted(o["platform"] for o in res.structured_content["outcomes"]) == ["cuda/sm_90", "rocm/gfx950"]
    assert progress and progress[-1][0] == progress[-1][1] == 2.0
    assert len(_rows(pg_backend)) == 2


def test_a_worker_killed_mid_task_ends_as_a_recorded_gap_and_the_other_platform_finishes(cluster, pg_backend):
    """The CPU verifier runs on both nodes; the gfx950 node is killed mid-task: the sm_90
    task's report is recorded signed with its results, the gfx950 one as a recorded gap.
    (One verifier run serves both checks: it is the slowest thing in the module.) Run last
    in the module: the gfx950 node does not come back."""
    c, amd, _ = cluster
    proc = subprocess.Popen([*cli_command(), "--ledger", pg_backend.location, "reverify", "--ray", c.address,
                             "--no-gates", "--card", MXFP8, "--cpu-smoke", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_for_driver())
    try:
        task_process_on(amd)  # the gfx950 task is running on its node
        time.sleep(1.0)
        c.remove_node(amd, allow_graceful=False)  # SIGKILL: raylet, its workers, the task
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, err[-3000:]  # a finding: a platform was not re-verified
    report = json.loads(out)
    by = {o["target"]["generation"]: o for o in report["outcomes"]}
    assert by["sm_90"]["outcome"] == "done" and by["gfx950"]["outcome"] == "lost"
    assert "not re-verified on rocm/gfx950" in by["gfx950"]["reason"]
    assert by["sm_90"]["measured_on"] == "cpu/x86_64" and by["sm_90"]["report_id"]
    results = pg_backend.raw("SELECT evidence_level, source, report_digest FROM results")
    reports = pg_backend.raw("SELECT report_id, digest, evidence_level FROM reports")
    assert [(r[0], r[2]) for r in reports] == [(by["sm_90"]["report_id"], "verified")]
    # the figures derived from it (none when the verifier's verdict is an ERROR, as on a box too loaded to
    # time: its clocks disagree) are signed and point at that report
    assert set(results) <= {("verified", "reverify", reports[0][1])}
    rows = _rows(pg_backend)
    assert [(r["platform"], r["status"], r["level"]) for r in rows if r["fleet"]["requested"] == "rocm/gfx950"] == [
        ("rocm/gfx950", "NOT_APPLICABLE_HERE", "verified")]
    assert [r["fleet"].get("outcome") for r in rows if r["fleet"]["requested"] == "rocm/gfx950"] == ["lost"]
    assert len(rows) == 2  # both platforms accounted for

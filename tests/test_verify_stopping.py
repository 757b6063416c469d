"""Stopping a verification stops every process of it (real processes, no stand-ins).

SIGINT, SIGTERM or SIGKILL of `skill-server verify`, SIGTERM or SIGKILL of the MCP server
while `run_verifier` runs, and the client cancelling that request: within 5 s no judge,
zygote or arm process is left (nor, when the server or the CLI is gone, the warm judge
template). They are found as the hooks find them: the `verifier-pycache` marker every
verifier process carries in its command line (forked ones share their template's),
narrowed to this checkout, to this test session (tests/process_owner.py: another pytest
worker's verifications are not this test's) and to processes that did not exist before the test.

What holds them: the judge dies with its parent (PR_SET_PDEATHSIG) and watches its stdin,
whose write end only the caller holds, for end of file; the zygote and every arm die with
their parent; the template ends when its caller's socket closes.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_support import BLOCKSCALE, REPO, cli_command, subprocess_env
from process_owner import started_by_this_session

pytestmark = pytest.mark.slow

MARKER = "verifier-pycache"
SHAPE = "128x256x512"
# the candidate's first call sleeps: the run is stopped while nothing is written on any pipe (a judge
# that only noticed its caller when a progress line failed to go out would live on for minutes)
SLOW = """
import time

def build(inputs, outputs):
    def launch():
        time.sleep(300)
    return launch
"""
OPTIONS = '{"flush_bytes": 1048576, "hidden_shapes": false}'
GRACE_S = 5.0


def slow_candidate(folder: Path) -> str:
    (folder / "slow.py").write_text(SLOW)
    return f"{folder / 'slow.py'}:build"


def verifier_pids() -> dict[int, int]:
    """pid -> parent pid of every verifier process of this checkout and this test session."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if (MARKER in cmd and str(REPO) in cmd and stat.rpartition(")")[2].split()[0] != "Z"
                and started_by_this_session(int(entry.name))):
            out[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    return out


def wait_until_gone(before: set[int], keep: set[int] = frozenset()) -> list[int]:
    """The new verifier processes still alive after GRACE_S (``keep``: allowed to stay)."""
    deadline = time.monotonic() + GRACE_S
    while True:
        left = sorted(set(verifier_pids()) - before - set(keep))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def kill_leftovers(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _interruptible() -> None:
    """Ctrl-C as in a terminal: a suite started in the background of a non-interactive shell
    (``bash .ci/run &``) hands its children SIGINT ignored, which Python then keeps, by design."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_a_signal_to_the_cli_leaves_no_verifier_process(tmp_path, sig):
    before = set(verifier_pids())
    args = ["--candidate", slow_candidate(tmp_path), "--shape", SHAPE, "--no-timing", "--seed", "0", "--options", OPTIONS]
    proc = subprocess.Popen([*cli_command(), "verify", BLOCKSCALE, *args, "--no-record"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=subprocess_env(), cwd=str(tmp_path),
                            preexec_fn=_interruptible)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # progress lines: stop it once the candidate's first call runs
            if "parity case 1/" in line:
                time.sleep(1.0)
                break
        else:
            pytest.fail(f"the run ended before it was stopped: {proc.wait()} {proc.stdout.read()[-2000:]}")
        alive = set(verifier_pids()) - before
        assert len(alive) >= 4, alive  # template, judge, zygote, baseline arm, candidate arm
        proc.send_signal(sig)
        proc.wait(timeout=30)
        left = wait_until_gone(before)
        kill_leftovers(left)
        assert not left, f"{sig.name}: verifier processes left: {left}"
        if sig != signal.SIGKILL:
            assert proc.returncode in (130, 128 + sig), proc.returncode
            assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def _server(tmp_path: Path) -> StdioServerParameters:
    cmd = cli_command()
    return StdioServerParameters(
        command=cmd[0], args=[*cmd[1:], "--ledger", str(tmp_path / "ledger.sqlite"), "serve", "--quiet",
                              "--enable-exec-tools", "--verify-options", OPTIONS],
        env=subprocess_env(), cwd=str(tmp_path))


def _server_pid(tmp_path: Path) -> int:
    token = str(tmp_path / "ledger.sqlite")
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if token in cmd and "serve" in cmd:
            return int(entry.name)
    raise AssertionError("the MCP server process was not found")


# over MCP the run is stopped while it reports progress (the server's own end is what is tested)
CALL = {"card_id": BLOCKSCALE, "candidate": "arm:torch_dequant", "shapes": [SHAPE], "options": {"rounds": 5, "seeds": [0]}}


def _run_and_stop(tmp_path: Path, stop, seen: dict | None = None) -> dict:
    """Start run_verifier through the real client over stdio; once the candidate runs call
    ``stop(server_pid, cancel_scope)``; return what was seen (``seen["cancelled"]``: the
    server lives on, so what is left is looked for while the session is still open)."""
    seen = seen if seen is not None else {}
    seen["events"] = []

    async def main() -> None:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with Client(stdio_client(_server(tmp_path), errlog=errlog)) as client:
                started = anyio.Event()

                async def on_progress(progress, total, message):
                    seen["events"].append(message or "")
                    if "A/A control" in (message or "") or "parity case" in (message or ""):
                        started.set()

                async def call(scope: anyio.CancelScope) -> None:
                    with scope:
                        try:
                            seen["result"] = await client.call_tool("run_verifier", CALL, progress_callback=on_progress)
                        except Exception as exc:  # noqa: BLE001 - the server went away under the call
                            seen["error"] = repr(exc)

                scope = anyio.CancelScope()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(call, scope)
                    with anyio.fail_after(600):
                        await started.wait()
                    seen["server"] = _server_pid(tmp_path)
                    seen["alive"] = set(verifier_pids())
                    stop(seen["server"], scope)
                if seen.get("cancelled"):  # the server lives on: its template may stay, nothing under it
                    seen["left"] = wait_until_gone(seen["before"], keep=_children(seen["server"]))
                    seen["after_cancel"] = await client.call_tool("list_skills", {})

    try:
        anyio.run(main)
    except BaseException as exc:  # noqa: BLE001 - a killed server may end the session with an error
        seen.setdefault("error", repr(exc))
    return seen


def _children(pid: int) -> set[int]:
    return {p for p, parent in verifier_pids().items() if parent == pid}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_a_signal_to_the_mcp_server_leaves_no_verifier_process(tmp_path, sig):
    before = set(verifier_pids())
    seen = _run_and_stop(tmp_path, lambda pid, scope: os.kill(pid, sig))
    assert len(seen["alive"] - before) >= 4, seen
    left = wait_until_gone(before)
    kill_leftovers(left)
    assert not left, f"{sig.name} to the server: verifier processes left: {left}"


def test_cancelling_run_verifier_stops_its_processes(tmp_path):
    before = set(verifier_pids())
    out = _run_and_stop(tmp_path, lambda _pid, scope: scope.cancel(), {"before": before, "cancelled": True})
    assert len(out["alive"] - before) >= 4, out
    kill_leftovers(out.get("left", []))
    assert out.get("left") == [], f"cancel: verifier processes left under the server: {out.get('left')}"
    assert "result" not in out  # the call was abandoned, not answered
    assert not out["after_cancel"].is_error  # the server still serves

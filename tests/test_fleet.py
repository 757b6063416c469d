"""Fleet commands without a cluster: what a node advertises, and a Ray address that does not
answer (one clear line, exit non-zero, nothing written). The cluster runs: test_fleet_ray.py."""
from __future__ import annotations

import json
import shlex
import socket
import subprocess
import threading

from ledger_support import make_project
from mcp_support import cli_command, free_port, subprocess_env


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([*cli_command(), *args], capture_output=True, text=True, timeout=120,
                          env=subprocess_env(RAY_USAGE_STATS_ENABLED="0", **env))


def test_a_node_advertises_the_platform_the_detector_finds():
    from verifiers.provenance import detect_platform

    out = _cli("fleet-node", "--address", "127.0.0.1:6379", "--num-cpus", "1", "--print")
    assert out.returncode == 0, out.stderr
    argv = shlex.split(out.stdout)
    assert argv[argv.index("start") + 1:][:2] == ["--address=127.0.0.1:6379", "--num-cpus=1"]
    resources = json.loads(next(a for a in argv if a.startswith("--resources="))[len("--resources="):])
    gen = detect_platform().generation
    assert resources == {f"gpu_gen:{gen}": 1.0, "gpu_vendor:cpu": 1.0}
    given = _cli("fleet-node", "--head", "--port", "6400", "--generation", "gfx950", "--vendor", "amd", "--print")
    assert '"gpu_gen:gfx950":1.0' in given.stdout and "--head" in given.stdout and "--port=6400" in given.stdout
    assert _cli("fleet-node", "--head", "--generation", "gfx950", "--print").returncode == 2


def _bad_address_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_a_ray_address_that_does_not_answer_is_one_clear_line_and_nothing_is_written(tmp_path):
    skills = make_project(tmp_path)
    ledger = tmp_path / "var" / "ledger.sqlite"
    base = ("--skills-dir", str(skills), "--ledger", str(ledger), "reverify", "--no-gates")
    port = free_port()
    line = _bad_address_line(_cli(*base, "--ray", f"127.0.0.1:{port}"))
    assert f"Ray at 127.0.0.1:{port} does not answer" in line and "fleet-node --head" in line
    assert "nothing was run or written" in line
    for bad in ("nonsense", "127.0.0.1:99999", "http://127.0.0.1:80/x"):
        assert "expected HOST:PORT of the Ray head" in _bad_address_line(_cli(*base, "--ray", bad))
    assert "add --ray HOST:PORT" in _bad_address_line(_cli(*base, "--cpu-smoke"))
    assert not ledger.exists() and not ledger.parent.exists()


def test_a_port_that_answers_but_is_not_ray_is_refused(tmp_path):
    """Something listens (not a Ray head): the driver gives up with one line."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        held = []
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue
        for c in held:
            c.close()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        skills = make_project(tmp_path)
        ledger = tmp_path / "var" / "ledger.sqlite"
        proc = subprocess.run([*cli_command(), "--skills-dir", str(skills), "--ledger", str(ledger), "reverify",
                               "--ray", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=60,
                              env=subprocess_env(RAY_USAGE_STATS_ENABLED="0", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0"))
    finally:
        stop.set()
        t.join(timeout=5)
        server.close()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"the server at 127.0.0.1:{port} is not a Ray head" in proc.stderr.strip().splitlines()[-1]
    assert not ledger.exists()

"""The README's MCP client example (examples/mcp_client.py, shown verbatim in the README) runs
against a real server over stdio and over HTTP with the pinned mcp 2.x SDK."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mcp_support import cli_command, serve_http, stop, subprocess_env

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mcp_client.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=120,
                          env=subprocess_env())


def _answered(out: subprocess.CompletedProcess) -> None:
    assert out.returncode == 0, out.stderr[-2000:]
    assert "flydsl_fp8_blockscale_gemm" in out.stdout
    assert "invalid arguments" not in out.stdout, out.stdout
    assert "narrow_n_deep_k" in out.stdout  # the recipe row of the shape


def test_the_readme_shows_the_example_verbatim():
    readme = (ROOT / "README.md").read_text()
    body = EXAMPLE.read_text().split('"""', 2)[2].strip()
    assert body in readme


def test_the_example_over_stdio():
    _answered(_run("--server", *cli_command()))


def test_the_example_over_http():
    proc, port = serve_http()
    try:
        _answered(_run("--http", f"http://127.0.0.1:{port}/mcp"))
    finally:
        stop(proc)

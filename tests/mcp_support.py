"""Shared helpers for the MCP tests: real clients, no direct function calls."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parent.parent
SKILLS = REPO / "skills"
PROFILES = REPO / "tests" / "fixtures" / "profiles"
BLOCKSCALE = "flydsl_fp8_blockscale_gemm"
BLOCKSCALE_OP = "gemm_a8w8_blockscale_kernel"
HEAVY = ("torch", "triton", "flydsl")


def build(skills_dir: Path | None = None, check_interval: float = 1.0, **settings: Any):
    from skill_server.mcp.app import ServerSettings, build_server
    from skill_server.service.facade import SkillService

    return build_server(SkillService(skills_dir or SKILLS, check_interval=check_interval), ServerSettings(**settings))


def with_client(server: Any, fn: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run ``fn(client)`` against ``server`` through the SDK's in-memory client."""
    from mcp import Client

    async def main() -> Any:
        async with Client(server) as client:
            return await fn(client)

    return anyio.run(main)


def text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def copy_skills(dest: Path) -> Path:
    shutil.copytree(SKILLS, dest, dirs_exist_ok=True)
    return dest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli_command() -> list[str]:
    return [sys.executable, "-m", "skill_server.cli.entry"]


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SKILL_SERVER_TOKEN", "SKILL_SERVER_LEDGER")}
    env.update(extra)
    return env


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 30.0, host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


def ipv6_loopback() -> bool:
    """Whether this machine can bind [::1] (IPv6 loopback); checked, not assumed."""
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def serve_http(*args: str, token: str | None = None, host: str = "127.0.0.1", cwd: Path | None = None,
               skills_dir: Path | None = None, ledger: Path | None = None):
    """Start ``skill-server serve --transport http`` on a free port; returns (proc, port).
    The caller stops it with ``stop``. A server given write tools should get its own
    ``skills_dir`` and ``ledger``."""
    port = free_port() if ":" not in host else free_port_v6()
    env = subprocess_env(**({"SKILL_SERVER_TOKEN": token} if token else {}),
                         **({"SKILL_SERVER_LEDGER": str(ledger)} if ledger else {}))
    where = ["--skills-dir", str(skills_dir)] if skills_dir else []
    errors = tempfile.TemporaryFile("w+")  # not a pipe: a server that logs a lot must never block on it
    proc = subprocess.Popen([*cli_command(), *where, "serve", "--transport", "http", "--host", host, "--port", str(port),
                             "--quiet", *args], stdout=subprocess.DEVNULL, stderr=errors, text=True,
                            env=env, cwd=str(cwd) if cwd else None)
    try:
        wait_for_port(port, proc, host=host.strip("[]"))
    except BaseException as exc:
        stop(proc)
        errors.seek(0)
        raise RuntimeError(f"server did not start: {errors.read()[-3000:]}") from exc
    return proc, port


def free_port_v6() -> int:
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)

"""Shared helpers for the MCP tests: real clients, no direct function calls."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
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
    from skill_server.mcp_app import ServerSettings, build_server
    from skill_server.service import SkillService

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
    return [sys.executable, "-m", "skill_server.cli"]


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SKILL_SERVER_TOKEN"}
    env.update(extra)
    return env


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")

"""Which processes this test session started: the "no process is left behind" checks count
only those, so a verification another pytest worker (or another session on the box) runs at
the same time is never taken for a leftover of this one.

The session marks itself with ``VERIFIER_TEST_SESSION=<its pid>`` before any test runs.
Every process it starts inherits that variable: the CLI and server processes through
``subprocess_env()``, the verifier's judge, zygote and arm processes through the arm
allow-list (``SKILL_SERVER_ARM_ENV=VERIFIER_TEST_*``, tests/conftest.py). A process's
initial environment block (``/proc/PID/environ``) keeps it for the process's life, forks
included, whatever the process does to ``os.environ`` later.
"""
from __future__ import annotations

import os
from pathlib import Path

SESSION_ENV = "VERIFIER_TEST_SESSION"


def mark_this_session() -> None:
    os.environ[SESSION_ENV] = str(os.getpid())


def started_by_this_session(pid: int) -> bool:
    """Whether ``pid``'s initial environment carries this session's marker (False once it is gone)."""
    try:
        block = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{SESSION_ENV}={os.environ[SESSION_ENV]}".encode() in block.split(b"\0")

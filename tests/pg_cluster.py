"""A throw-away PostgreSQL cluster for tests and benchmarks: initdb in a temp folder,
a server on 127.0.0.1 at a free port (and its unix socket in that folder), password
authentication, stopped and deleted at the end.

    python tests/pg_cluster.py check        # exit 0 when the server binaries and psycopg are here
    python tests/pg_cluster.py start DIR    # prints the superuser DSN on stdout
    python tests/pg_cluster.py stop DIR

``.ci/run`` starts one and exports its DSN as ``SKILL_SERVER_TEST_PG_DSN``; without that
variable the tests start their own (``ThrowawayCluster``) when the PostgreSQL server
binaries are installed. initdb refuses to run as root, so as root the cluster runs as the
``postgres`` user from the system packages (or a ``skilltest`` user created for it).
"""
from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

DSN_ENV = "SKILL_SERVER_TEST_PG_DSN"
REQUIRE_ENV = "SKILL_SERVER_TEST_REQUIRE_PG"  # set by .ci/run: a missing server fails, never skips
SUPERUSER = "skill"


def find_bin(name: str) -> str | None:
    """A PostgreSQL server binary: PATH first, then Debian's versioned folders (newest)."""
    found = shutil.which(name)
    if found:
        return found
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True):
        candidate = Path(folder) / name
        if candidate.is_file():
            return str(candidate)
    return None


def missing_reason() -> str | None:
    """Why no cluster can be started here, or None."""
    for name in ("initdb", "pg_ctl", "postgres"):
        if find_bin(name) is None:
            return (f"PostgreSQL server binary {name!r} not found: install the system package "
                    "(apt-get install postgresql) or set " + DSN_ENV)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed: pip install 'psycopg[binary]' (scripts/setup.sh installs it)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_as() -> str | None:
    """The OS user to run the server as (None: the current user)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "skilltest"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "skilltest"],
                   check=True, capture_output=True)
    return "skilltest"


class ThrowawayCluster:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.user = _run_as()
        self.port: int | None = None
        self.password = secrets.token_hex(12)

    @property
    def dsn(self) -> str:
        return f"postgresql://{SUPERUSER}:{self.password}@127.0.0.1:{self.port}/postgres"

    def _cmd(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", self.user, "--", *argv] if self.user else argv

    def start(self, fsync: bool = True) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        self.sock.mkdir(exist_ok=True)
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        if self.user:
            info = pwd.getpwnam(self.user)
            for p in (self.root, self.sock, pwfile):
                os.chown(p, info.pw_uid, info.pw_gid)
        proc = subprocess.run(self._cmd([find_bin("initdb"), "-D", str(self.data), "-U", SUPERUSER,
                                         "--auth=scram-sha-256", f"--pwfile={pwfile}", "--encoding=UTF8", "--no-sync",
                                         "--locale=C"]), capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"initdb failed in {self.root}: {proc.stderr.strip()[-1500:]}")
        pwfile.unlink()
        options = [f"-c listen_addresses=127.0.0.1", f"-c unix_socket_directories={self.sock}", "-c max_connections=200",
                   "-c shared_buffers=64MB"]
        if not fsync:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        for attempt in range(5):  # a port taken between choosing and binding: choose again
            self.port = _free_port()
            proc = subprocess.run(self._cmd([find_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"),
                                             "-w", "-t", "60", "-o", " ".join([f"-p {self.port}", *options]), "start"]),
                                  capture_output=True, text=True)
            if proc.returncode == 0:
                break
            if attempt == 4:
                log = (self.root / "log").read_text(errors="replace")[-2000:] if (self.root / "log").exists() else ""
                raise RuntimeError(f"pg_ctl start failed: {proc.stderr.strip()} {log}")
        (self.root / "dsn").write_text(self.dsn)
        return self.dsn

    def stop(self) -> None:
        if self.data.is_dir():
            subprocess.run(self._cmd([find_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"]),
                           capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def wait_ready(dsn: str, timeout: float = 30.0) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(dsn, connect_timeout=3).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def main(argv: list[str]) -> int:
    if argv == ["check"]:  # exit 0 when a cluster can be started here
        why = missing_reason()
        print(why or "ok", file=sys.stderr)
        return 0 if why is None else 3
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: pg_cluster.py check | start DIR | stop DIR", file=sys.stderr)
        return 2
    cluster = ThrowawayCluster(Path(argv[1]))
    if argv[0] == "start":
        if (why := missing_reason()) is not None:
            print(f"pg_cluster: {why}", file=sys.stderr)
            return 3
        print(cluster.start())
    else:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

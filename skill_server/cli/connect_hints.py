"""How to connect an agent: the lines ``skill-server serve`` prints on start.

Claude Code (``claude mcp add``) and a generic ``mcpServers`` JSON entry, for stdio (the
client launches the server) and for HTTP (the client connects to a running server).
The token itself is never printed: the HTTP variants reference ``$SKILL_SERVER_TOKEN``.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

from pydantic import BaseModel

from skill_server.mcp.http_transport import MCP_PATH

TOKEN_ENV = "SKILL_SERVER_TOKEN"
NAME = "skill-server"


class ServeOptions(BaseModel):
    transport: str = "stdio"
    host: str = "127.0.0.1"
    port: int = 8765
    skills_dir: str | None = None
    token_set: bool = False
    enable_exec_tools: bool = False
    enable_write_tools: bool = False


def executable() -> list[str]:
    """The absolute command that starts this CLI: the installed script, else the module."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == NAME and argv0.exists():
        return [str(argv0.resolve())]
    found = shutil.which(NAME)
    if found:
        return [os.path.abspath(found)]
    return [sys.executable, "-m", "skill_server.cli.entry"]


def _serve_args(opts: ServeOptions, transport: str) -> list[str]:
    args = ["--skills-dir", str(Path(opts.skills_dir).resolve())] if opts.skills_dir else []
    args.append("serve")
    if transport == "http":
        args += ["--transport", "http", "--host", opts.host, "--port", str(opts.port)]
    if opts.enable_exec_tools:
        args.append("--enable-exec-tools")
    if opts.enable_write_tools:
        args.append("--enable-write-tools")
    return args


def http_url(opts: ServeOptions) -> str:
    host = f"[{opts.host}]" if ":" in opts.host else opts.host
    return f"http://{host}:{opts.port}{MCP_PATH}"


def stdio_config(opts: ServeOptions) -> dict:
    exe = executable()
    return {"mcpServers": {NAME: {"command": exe[0], "args": exe[1:] + _serve_args(opts, "stdio")}}}


def http_config(opts: ServeOptions) -> dict:
    entry: dict = {"type": "http", "url": http_url(opts)}
    if opts.token_set:
        entry["headers"] = {"Authorization": f"Bearer ${{{TOKEN_ENV}}}"}
    return {"mcpServers": {NAME: entry}}


def claude_stdio(opts: ServeOptions) -> str:
    return f"claude mcp add {NAME} -- {shlex.join(executable() + _serve_args(opts, 'stdio'))}"


def claude_http(opts: ServeOptions) -> str:
    line = f"claude mcp add --transport http {NAME} {http_url(opts)}"
    if opts.token_set:
        line += f' --header "Authorization: Bearer ${TOKEN_ENV}"'
    return line


def connect_text(opts: ServeOptions) -> str:
    serving_http = opts.transport == "http"
    stdio = ["stdio (the agent client starts the server itself):",
             f"  Claude Code:  {claude_stdio(opts)}",
             f"  JSON config:  {json.dumps(stdio_config(opts))}"]
    http_note = "" if serving_http else f"; start it with: {shlex.join(executable() + _serve_args(opts, 'http'))}"
    http = [f"HTTP (the agent client connects to a running server{http_note}):",
            f"  Claude Code:  {claude_http(opts)}",
            f"  JSON config:  {json.dumps(http_config(opts))}"]
    if opts.token_set:
        http.append(f"  export {TOKEN_ENV}=<the token> in the client's environment first")
    blocks = [http, stdio] if serving_http else [stdio, http]
    return "\n".join(["How to connect an agent to this skill server:", *blocks[0], *blocks[1]])

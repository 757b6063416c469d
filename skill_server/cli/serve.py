"""``skill-server serve``: serve the cards to agents over MCP (stdio or streamable HTTP).

Security defaults: HTTP binds to loopback; a non-loopback host needs ``--allow-remote``
and a token; with a token set every HTTP request needs it (401 otherwise); Host and
Origin headers are checked on every bind. Tools that execute code or write records are
off on every transport until the operator passes ``--enable-exec-tools`` /
``--enable-write-tools`` (over stdio that flag goes in the client's launch command,
which the operator writes); over HTTP they also need a token. Files a client names are
read only under ``--root`` folders (default: the working folder and the profiles folder;
on a remote bind, none). Over stdio nothing is ever written to stdout except the
protocol: notes go to stderr. docs/mcp.md has the threat model.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from skill_server.cli.common import EXIT_BAD_INPUT, EXIT_OK, CommandArgs, from_setting
from skill_server.cli.connect_hints import TOKEN_ENV, ServeOptions, connect_text, http_url
from skill_server.json_input import json_object

# lazy: the MCP SDK loads for serve only; the CLI's other commands run without it (GPU images)
from skill_server.mcp.http_transport import HttpOptions

# lazy: the MCP SDK loads for serve only; the CLI's other commands run without it (GPU images)
from skill_server.mcp.settings import ServerSettings
from skill_server.policy.client_policy import DEFAULT_MAX_UPLOAD_BYTES, default_file_roots, roots_text
from skill_server.policy.confinement import ConfinementError, check_roots
from skill_server.service.facade import SkillService
from skill_server.settings import settings as environment
from verifiers.arms.sandbox import REQUIRE_ENV
from verifiers.options import VerifyOptions

DEFAULT_PORT = 8765


class ServeArgs(CommandArgs):
    """``serve``: the cards over MCP. The form of each value is checked here; what a bind
    needs (a token for a remote host, for exec or write tools over HTTP) in :func:`cmd_serve`."""

    transport: Literal["stdio", "http"] = "stdio"
    host: str = Field("127.0.0.1", description="HTTP bind address")
    port: int = Field(DEFAULT_PORT, description="HTTP port")
    token: str | None = from_setting("token", "HTTP bearer token clients must send")
    token_on_command_line: bool = Field(False, description="the token came from --token (shows in process listings)")
    allow_remote: bool = Field(False, description="allow a non-loopback host")
    enable_exec_tools: bool = Field(False, description="register tools that execute code")
    enable_write_tools: bool = Field(False, description="register tools that write records")
    roots: list[Path] | None = Field(None, description="folders whose files clients may name")
    max_upload_bytes: int = Field(DEFAULT_MAX_UPLOAD_BYTES, description="largest inline profile a client may send")
    workers: int = Field(1, description="HTTP server processes on the one port")
    verify_options: dict[str, Any] = Field(default_factory=dict, description="the operator's VerifyOptions for "
                                           "run_verifier (given as a JSON object)")
    allowed_host: list[str] = Field(default_factory=list, description="extra Host header values to accept")
    allowed_origin: list[str] = Field(default_factory=list, description="extra browser Origins to accept")
    ray_address: str | None = from_setting("ray_address", "Ray head the reverify tool may run on")
    require_sandbox: bool = Field(False, description="run_verifier refuses candidates that cannot be confined")
    quiet: bool = Field(False, description="do not print connection instructions on start")
    print_connect: bool = Field(False, description="print the connection instructions to stdout and exit")

    @classmethod
    def prepare(cls, ns: argparse.Namespace, data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "token_on_command_line": bool(ns.token)}

    @field_validator("port")
    @classmethod
    def _port(cls, value: int) -> int:
        if not 0 < value < 65536:
            raise ValueError(f"--port {value}: expected 1-65535")
        return value

    @field_validator("max_upload_bytes")
    @classmethod
    def _upload(cls, value: int) -> int:
        if value <= 0:
            raise ValueError(f"--max-upload-bytes {value}: expected a positive byte count")
        return value

    @field_validator("verify_options", mode="before")
    @classmethod
    def _options_json(cls, value: object) -> object:
        return verify_options_json(value) if value is None or isinstance(value, str) else value

    @model_validator(mode="after")
    def _workers(self) -> ServeArgs:
        if self.workers < 1 or (self.workers > 1 and self.transport != "http"):
            raise ValueError(f"--workers {self.workers}: expected 1 or more, and more than 1 only with "
                             "--transport http")
        return self


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the skills to agents over MCP (stdio or HTTP)",
                       description="Serve the skill cards to agents over MCP. Default: stdio, which is what agent "
                       "clients launch. Connection instructions are printed to stderr on start.")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                   help="stdio (default; the client launches the server) or http (streamable HTTP at /mcp)")
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1, loopback only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT})")
    p.add_argument("--token", default=None,
                   help="HTTP bearer token clients must send (default: env SKILL_SERVER_TOKEN; prefer the env var, "
                   "a command-line token shows in process listings)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --host (requires a token; file paths from clients are then refused "
                   "unless --root is given)")
    p.add_argument("--enable-exec-tools", action="store_true",
                   help="register tools that execute code (run_verifier, reverify); over HTTP a token is required")
    p.add_argument("--enable-write-tools", action="store_true",
                   help="register tools that write records (ledger); over HTTP a token is required")
    p.add_argument("--root", "--profile-root", dest="roots", action="append", type=Path, default=None, metavar="DIR",
                   help="folder whose files clients may name: profiles for match_profile, candidate files for "
                   "run_verifier (repeatable; default: the working folder and the profiles folder "
                   "<project>/var/profiles or $SKILL_SERVER_PROFILES_DIR; on a remote bind: none)")
    p.add_argument("--max-upload-bytes", type=int, default=DEFAULT_MAX_UPLOAD_BYTES, metavar="N",
                   help=f"largest inline profile a client may send, decoded (default {DEFAULT_MAX_UPLOAD_BYTES}); "
                   "the HTTP body limit follows from it")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="HTTP server processes on the one port (default 1); stateless, they share only the cards "
                   "folder and the ledger, as processes behind a load balancer do")
    p.add_argument("--verify-options", default=None, metavar="JSON",
                   help="VerifyOptions for run_verifier as a JSON object, chosen by the operator (e.g. "
                   "'{\"hidden_shapes\": false}' on a CPU box); clients may change only the effort knobs")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME[:PORT]",
                   help="an extra Host header value to accept over HTTP, e.g. the load balancer's name (repeatable; "
                   "required for a wildcard --host such as 0.0.0.0)")
    p.add_argument("--allowed-origin", action="append", default=[], metavar="ORIGIN",
                   help="an extra browser Origin to accept over HTTP, e.g. http://localhost:6274 (repeatable)")
    p.add_argument("--ray-address", default=None, metavar="HOST:PORT",
                   help="Ray head the reverify tool may run on (with --enable-exec-tools; default: env "
                   "SKILL_SERVER_RAY_ADDRESS; docs/fleet.md)")
    p.add_argument("--require-sandbox", action="store_true",
                   help="run_verifier refuses to run candidates that cannot be confined (no Landlock on this "
                        "kernel); the same as SKILL_SERVER_REQUIRE_SANDBOX=1")
    p.add_argument("--quiet", action="store_true", help="do not print connection instructions on start")
    p.add_argument("--print-connect", action="store_true",
                   help="print the connection instructions to stdout and exit")


def _fail(msg: str) -> int:
    print(f"skill-server serve: error: {msg}", file=sys.stderr)
    return EXIT_BAD_INPUT


def cmd_serve(args: ServeArgs) -> int:
    # lazy: the MCP SDK loads for serve only; the CLI's other commands run without it (GPU images)
    from skill_server.mcp.http_transport import is_loopback, is_wildcard

    token = args.token or None
    if args.require_sandbox:  # read by every judge this server starts (verifiers.arms.sandbox.required)
        os.environ[REQUIRE_ENV] = "1"
    http = args.transport == "http"
    remote = http and not is_loopback(args.host)
    if remote:
        if not args.allow_remote:
            return _fail(f"--host {args.host} is not a loopback address: pass --allow-remote (and set a token) "
                         "to serve other machines, or use --host 127.0.0.1")
        if not token:
            return _fail(f"--allow-remote needs a bearer token: set {TOKEN_ENV} (or --token)")
        if is_wildcard(args.host) and not args.allowed_host:
            return _fail(f"--host {args.host} accepts any address, so the Host header clients send cannot be "
                         "checked against it: name what clients connect to with --allowed-host NAME[:PORT] "
                         "(repeatable), e.g. the machine's or the load balancer's name")
    if http and not token and (args.enable_exec_tools or args.enable_write_tools):
        gated = " and ".join(f for f, on in (("--enable-exec-tools", args.enable_exec_tools),
                                             ("--enable-write-tools", args.enable_write_tools)) if on)
        return _fail(f"{gated} over HTTP needs a bearer token, or any local process (and any web page that reaches "
                     f"this port) could run code or write records: set {TOKEN_ENV} (or --token), or serve over stdio")
    opts = ServeOptions(transport=args.transport, host=args.host, port=args.port,
                        skills_dir=str(args.skills_dir) if args.skills_dir else None,
                        token_set=bool(token), enable_exec_tools=args.enable_exec_tools,
                        enable_write_tools=args.enable_write_tools)
    if args.print_connect:
        print(connect_text(opts))
        return EXIT_OK

    # Start-up builds some hundred thousand objects (SDK import, pydantic schemas, the
    # catalog) and frees none of them: collecting meanwhile only costs time. Once built,
    # they are frozen, so later collections never walk them again.
    gc.disable()
    try:
        return _serve(args, token, http, remote, opts)
    finally:
        gc.enable()


def _serve(args: ServeArgs, token: str | None, http: bool, remote: bool, opts) -> int:
    # lazy: the MCP SDK loads for serve only; the CLI's other commands run without it (GPU images)
    from skill_server.mcp.app import build_server

    service = SkillService(args.skills_dir, ledger_path=args.ledger)
    try:
        if args.roots:
            roots = check_roots(args.roots)
            missing = [str(p) for p in roots if not p.is_dir()]
            if missing:
                return _fail(f"--root: not a folder: {', '.join(missing)}")
        else:
            roots = () if remote else default_file_roots(service.project_root)
        settings = ServerSettings(allow_exec_tools=args.enable_exec_tools, allow_write_tools=args.enable_write_tools,
                                  file_roots=roots, max_upload_bytes=args.max_upload_bytes,
                                  verify_options=args.verify_options, ray_address=args.ray_address or None)
    except (ConfinementError, ValidationError) as exc:
        return _fail(f"--root: {exc}")
    http_opts = None
    if http:
        try:
            http_opts = HttpOptions(host=args.host, port=args.port, token=token, allowed_hosts=tuple(args.allowed_host),
                                    allowed_origins=tuple(args.allowed_origin),
                                    max_request_bytes=request_body_limit(args.max_upload_bytes),
                                    # progress notifications need an SSE stream; only exec tools send them
                                    json_response=not settings.allow_exec_tools)
        except ValidationError as exc:
            return _fail(str(exc.errors()[0]["msg"]))

    notes = []
    if token and not http:
        notes.append("the token applies to HTTP only; over stdio the client that launches the server is trusted")
    if http and not token:
        notes.append(f"no token set: any local process can connect; set {TOKEN_ENV} to require one")
    if args.token_on_command_line:
        notes.append(f"a token on the command line shows in process listings; prefer the {TOKEN_ENV} env var")
    catalog = service.catalog
    where = f"HTTP at {http_url(opts)}" if http else "stdio"
    status = (f"skill-server: {len(catalog.cards)} cards from {catalog.skills_dir}; MCP over {where}; "
              f"exec tools {'ON' if settings.allow_exec_tools else 'off'}, "
              f"write tools {'ON' if settings.allow_write_tools else 'off'}"
              + ("; HTTP bearer token required" if http and token else "")
              + f"; client files from: {roots_text(settings.file_roots)}")
    if catalog.problems:
        notes.append(f"{len(catalog.problems)} card problem(s) left cards out: run `skill-server lint`")
    lines = [status, *(f"skill-server: note: {n}" for n in notes)]
    if not args.quiet:
        lines.append(connect_text(opts))
    print("\n".join(lines), file=sys.stderr, flush=True)

    if http_opts is not None:
        # lazy: the MCP SDK loads for serve only; the CLI's other commands run without it (GPU images)
        from skill_server.mcp.http_transport import serve_http, serve_http_workers

        if args.workers > 1:
            spec = WorkerSpec(skills_dir=str(args.skills_dir) if args.skills_dir else None, ledger=args.ledger,
                              settings=settings,
                              http=http_opts)
            os.environ[WORKER_ENV] = spec.model_dump_json()
            _started()
            serve_http_workers(f"{__name__}:worker_app", http_opts, args.workers)
        else:
            server = build_server(service, settings)
            _started()
            serve_http(server, http_opts)
    else:
        server = build_server(service, settings)
        _started()
        server.run("stdio")
    return EXIT_OK


def _started() -> None:
    gc.enable()
    gc.freeze()


WORKER_ENV = "SKILL_SERVER_HTTP_WORKER"


class WorkerSpec(BaseModel):
    """What each HTTP worker process needs to build the same server (``serve --workers``);
    it travels in the environment (with the token, which only shows to the same user)."""

    skills_dir: str | None
    ledger: str | None
    settings: ServerSettings
    http: HttpOptions


def worker_app():
    """The ASGI app of one HTTP worker process (uvicorn calls this in each worker)."""
    # lazy: the MCP SDK loads for serve only; the CLI's other commands run without it (GPU images)
    from skill_server.mcp.app import build_server

    # lazy: the MCP SDK loads for serve only; the CLI's other commands run without it (GPU images)
    from skill_server.mcp.http_transport import http_app

    spec = WorkerSpec.model_validate_json(environment().http_worker or "")
    service = SkillService(spec.skills_dir, ledger_path=spec.ledger)
    app = http_app(build_server(service, spec.settings), spec.http)
    gc.freeze()
    return app


def verify_options_json(text: str | None) -> dict[str, Any]:
    """The operator's --verify-options, validated as VerifyOptions; ValueError says what is wrong."""
    if text is None:
        return {}
    data = json_object("--verify-options", text, 'VerifyOptions fields, e.g. \'{"rounds": 7}\'')
    try:
        VerifyOptions.model_validate(data)
    except ValidationError as exc:
        # lazy: the MCP SDK loads for serve only; the CLI's other commands run without it (GPU images)
        from skill_server.mcp.common import describe_validation_error

        raise ValueError(f"--verify-options: {describe_validation_error(exc)}") from None
    return data


def request_body_limit(max_upload_bytes: int) -> int:
    """An HTTP body that can carry the largest upload as base64, plus the JSON-RPC around it."""
    return (max_upload_bytes + 2) // 3 * 4 + (256 << 10)

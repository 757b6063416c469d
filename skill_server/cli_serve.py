"""``skill-server serve``: serve the cards to agents over MCP (stdio or streamable HTTP).

Security defaults: HTTP binds to loopback; a non-loopback host needs ``--allow-remote``
and a token; with a token set every HTTP request needs it (401 otherwise). Tools that
execute code or write records are off on every transport until the operator passes
``--enable-exec-tools`` / ``--enable-write-tools`` (over stdio that flag goes in the
client's launch command, which the operator writes). Over stdio nothing is ever
written to stdout except the protocol: notes go to stderr.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .cli_common import EXIT_BAD_INPUT, EXIT_OK

DEFAULT_PORT = 8765


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
                   help="allow a non-loopback --host (requires a token; path arguments to match_profile are then "
                   "refused unless --profile-root is given)")
    p.add_argument("--enable-exec-tools", action="store_true", help="register tools that execute code (run_verifier)")
    p.add_argument("--enable-write-tools", action="store_true", help="register tools that write records (ledger)")
    p.add_argument("--profile-root", action="append", type=Path, default=None, metavar="DIR",
                   help="folder match_profile may read path arguments from (repeatable; default: any path locally)")
    p.add_argument("--ray-address", default=None, metavar="HOST:PORT",
                   help="Ray head the reverify tool may run on (with --enable-exec-tools; default: env "
                   "SKILL_SERVER_RAY_ADDRESS; docs/fleet.md)")
    p.add_argument("--quiet", action="store_true", help="do not print connection instructions on start")
    p.add_argument("--print-connect", action="store_true",
                   help="print the connection instructions to stdout and exit")
    p.set_defaults(handler=cmd_serve)


def _fail(msg: str) -> int:
    print(f"skill-server serve: error: {msg}", file=sys.stderr)
    return EXIT_BAD_INPUT


def cmd_serve(args: argparse.Namespace) -> int:
    from .connect_hints import TOKEN_ENV, ServeOptions, connect_text, http_url
    from .mcp_http import is_loopback

    token = args.token or os.environ.get(TOKEN_ENV) or None
    http = args.transport == "http"
    if http and not is_loopback(args.host):
        if not args.allow_remote:
            return _fail(f"--host {args.host} is not a loopback address: pass --allow-remote (and set a token) "
                         "to serve other machines, or use --host 127.0.0.1")
        if not token:
            return _fail(f"--allow-remote needs a bearer token: set {TOKEN_ENV} (or --token)")
    if not 0 < args.port < 65536:
        return _fail(f"--port {args.port}: expected 1-65535")
    opts = ServeOptions(transport=args.transport, host=args.host, port=args.port, skills_dir=args.skills_dir,
                        token_set=bool(token), enable_exec_tools=args.enable_exec_tools,
                        enable_write_tools=args.enable_write_tools)
    if args.print_connect:
        print(connect_text(opts))
        return EXIT_OK

    roots: tuple[Path, ...] | None = None
    if args.profile_root:
        roots = tuple(p.expanduser().resolve() for p in args.profile_root)
        missing = [str(p) for p in roots if not p.is_dir()]
        if missing:
            return _fail(f"--profile-root: not a folder: {', '.join(missing)}")
    elif http and not is_loopback(args.host):
        roots = ()

    notes = []
    if token and not http:
        notes.append("the token applies to HTTP only; over stdio the client that launches the server is trusted")
    if http and not token:
        notes.append(f"no token set: any local process can connect; set {TOKEN_ENV} to require one")
    if args.token:
        notes.append(f"a token on the command line shows in process listings; prefer the {TOKEN_ENV} env var")

    from .mcp_app import ServerSettings, build_server
    from .service import SkillService

    settings = ServerSettings(allow_exec_tools=args.enable_exec_tools, allow_write_tools=args.enable_write_tools,
                              profile_roots=roots,
                              ray_address=args.ray_address or os.environ.get("SKILL_SERVER_RAY_ADDRESS") or None)
    service = SkillService(args.skills_dir, ledger_path=getattr(args, "ledger", None))
    catalog = service.catalog
    where = f"HTTP at {http_url(opts)}" if http else "stdio"
    status = (f"skill-server: {len(catalog.cards)} cards from {catalog.skills_dir}; MCP over {where}; "
              f"exec tools {'ON' if settings.allow_exec_tools else 'off'}, "
              f"write tools {'ON' if settings.allow_write_tools else 'off'}"
              + ("; HTTP bearer token required" if http and token else ""))
    if catalog.problems:
        notes.append(f"{len(catalog.problems)} card problem(s) left cards out: run `skill-server lint`")
    lines = [status, *(f"skill-server: note: {n}" for n in notes)]
    if not args.quiet:
        lines.append(connect_text(opts))
    print("\n".join(lines), file=sys.stderr, flush=True)

    server = build_server(service, settings)
    if http:
        from .mcp_http import serve_http

        serve_http(server, args.host, args.port, token)
    else:
        server.run("stdio")
    return EXIT_OK

"""Streamable HTTP transport: the SDK's app behind an optional bearer token, with the
transport settings spelled out instead of left to the SDK's defaults.

- Token: with one set, every HTTP request must carry ``Authorization: Bearer <token>``
  (the scheme is case-insensitive, RFC 7235); a missing or wrong one gets 401 before it
  reaches MCP. The comparison is constant-time.
- Host and Origin (DNS rebinding, cross-site pages): checked on every bind. Allowed Host
  values are the bind address and, on loopback, the loopback names, each with the served
  port only; plus what the operator lists (``--allowed-host``, e.g. the load balancer's
  name). Origins: the same hosts over http/https, plus ``--allowed-origin``. A request
  without Origin (a non-browser client) passes the Origin check; a browser always sends it.
- Body size: the SDK refuses bodies over ``max_request_bytes`` with 413 before parsing.
- Stateless (SDK ``stateless_http``): no session lives in the process, so any number of
  server processes behind one load balancer serve any request; they share only the cards
  folder and the ledger. ``json_response`` answers each POST with one JSON body instead
  of an SSE stream (cheaper), for servers without tools that report progress.
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:  # the SDK is only needed once a server is built
    from mcp.server import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings

MCP_PATH = "/mcp"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_HOST_ENTRY = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(:(\d{1,5}|\*))?")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def host_header_name(host: str) -> str:
    """How a client writes this address in a Host header: IPv6 in brackets."""
    bare = host.strip("[]")
    return f"[{bare}]" if ":" in bare else bare


class HttpOptions(BaseModel):
    """How the operator serves MCP over HTTP (``skill-server serve --transport http``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    token: str | None = Field(None, repr=False)
    allowed_hosts: tuple[str, ...] = Field((), description="extra Host values: NAME, NAME:PORT or NAME:*")
    allowed_origins: tuple[str, ...] = Field((), description="extra Origin values, e.g. https://app.example:*")
    max_request_bytes: int = Field(4 << 20, gt=0, description="largest request body (413 beyond)")
    max_connections: int = Field(512, gt=0, description="concurrent connections and requests (503 beyond)")
    stateless: bool = True
    json_response: bool = True

    @field_validator("allowed_hosts")
    @classmethod
    def _host_entries(cls, entries: tuple[str, ...]) -> tuple[str, ...]:
        for entry in entries:
            if not _HOST_ENTRY.fullmatch(entry):
                raise ValueError(f"--allowed-host {entry[:80]!r}: expected NAME, NAME:PORT or NAME:* "
                                 "(IPv6 in brackets, e.g. [fd00::5]:8765)")
        return entries


def transport_security(opts: HttpOptions) -> TransportSecuritySettings:
    """The SDK's Host/Origin guard, on for every bind (the SDK turns it on by itself only
    for the exact hosts 127.0.0.1, localhost and ::1)."""
    from mcp.server.transport_security import TransportSecuritySettings

    names = [] if is_wildcard(opts.host) else [host_header_name(opts.host)]
    if is_loopback(opts.host):
        names += [n for n in LOOPBACK_NAMES if n not in names]
    hosts = [f"{n}:{opts.port}" for n in names]
    for entry in opts.allowed_hosts:
        hosts += [entry] if _HOST_ENTRY.fullmatch(entry).group(2) else [entry, f"{entry}:*"]  # type: ignore[union-attr]
    origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")] + list(opts.allowed_origins)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=origins)


def bearer_credentials(headers: Any) -> bytes | None:
    """The token of the first ``Authorization: Bearer ...`` header; None for any other."""
    raw = next((v for k, v in headers if k == b"authorization"), b"")
    scheme, _, credentials = raw.strip().partition(b" ")
    return credentials.strip() if scheme.lower() == b"bearer" and credentials.strip() else None


class BearerTokenMiddleware:
    """ASGI middleware: refuse HTTP requests without the right bearer token (401)."""

    def __init__(self, app: Any, token: str):
        if not token:
            raise ValueError("an empty token would accept anyone")
        self.app = app
        self._expected = token.encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = bearer_credentials(scope.get("headers") or ())
            if not hmac.compare_digest(given or b"", self._expected):
                reason = "missing" if given is None else "wrong"
                body = json.dumps({"error": "invalid_token",
                                   "error_description": f"{reason} bearer token: send 'Authorization: Bearer <token>' "
                                   "with the token the server was started with (SKILL_SERVER_TOKEN)"}).encode()
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b'Bearer realm="skill-server", error="invalid_token"'),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(server: MCPServer, opts: HttpOptions) -> Any:
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=opts.host,
                                     transport_security=transport_security(opts),
                                     max_request_body_size=opts.max_request_bytes,
                                     stateless_http=opts.stateless, json_response=opts.json_response)
    return BearerTokenMiddleware(app, opts.token) if opts.token else app


def _uvicorn_options(opts: HttpOptions) -> dict[str, Any]:
    # http="auto" takes httptools (C parser) when installed, else h11 (pure Python)
    return dict(host=opts.host.strip("[]"), port=opts.port, log_level="warning", lifespan="on", access_log=False,
                limit_concurrency=opts.max_connections, server_header=False, date_header=False)


def serve_http(server: MCPServer, opts: HttpOptions) -> None:
    import uvicorn

    uvicorn.Server(uvicorn.Config(http_app(server, opts), **_uvicorn_options(opts))).run()


def serve_http_workers(app_factory: str, opts: HttpOptions, workers: int) -> None:
    """``workers`` server processes on one listening socket (uvicorn's supervisor restarts
    any that dies). ``app_factory`` ("module:function") builds each worker's app; being
    stateless, any worker answers any request."""
    import socket

    from uvicorn.config import Config
    from uvicorn.supervisors import Multiprocess

    config = Config(app_factory, factory=True, workers=workers, **_uvicorn_options(opts))
    sock = config.bind_socket()
    # Workers get the listening socket second-hand and asyncio then leaves Nagle on for the
    # connections they accept: every response waited ~40 ms for the client's delayed ACK.
    # Set on the listening socket, TCP_NODELAY is inherited by each accepted connection.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    Multiprocess(config, sockets=[sock]).run()

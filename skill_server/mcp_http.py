"""Streamable HTTP transport: the SDK's app behind an optional bearer token.

With a token set, every HTTP request must carry ``Authorization: Bearer <token>``;
a missing or wrong one gets 401 before it reaches MCP. The comparison is constant-time.
On a loopback host the SDK also validates Host/Origin headers (DNS-rebinding guard).
"""
from __future__ import annotations

import hmac
import ipaddress
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the SDK is only needed once a server is built
    from mcp.server import MCPServer

MCP_PATH = "/mcp"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BearerTokenMiddleware:
    """ASGI middleware: refuse HTTP requests without the right bearer token (401)."""

    def __init__(self, app: Any, token: str):
        if not token:
            raise ValueError("an empty token would accept anyone")
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                reason = "missing" if not given else "wrong"
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


def http_app(server: MCPServer, host: str, token: str | None) -> Any:
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    return BearerTokenMiddleware(app, token) if token else app


def serve_http(server: MCPServer, host: str, port: int, token: str | None) -> None:
    import uvicorn

    config = uvicorn.Config(http_app(server, host, token), host=host, port=port, log_level="warning",
                            lifespan="on", access_log=False)
    uvicorn.Server(config).run()

"""Talk to skill-server from Python with the official MCP SDK 2.x (``pip install "mcp>=2.3,<3"``).

    python examples/mcp_client.py                                  # stdio: starts `skill-server serve` itself
    python examples/mcp_client.py --http http://127.0.0.1:8765/mcp  # a running `skill-server serve --transport http`

Over HTTP, a server started with SKILL_SERVER_TOKEN set wants that token as a bearer header.
(1.x examples import ``mcp.client.streamable_http.streamablehttp_client`` and ``ClientSession``:
in 2.x the client is ``mcp.Client`` around ``stdio_client`` or ``streamable_http_client``.)
"""
import argparse
import os
import shutil
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

HOTSPOT = {"op_name": "gemm_a8w8_blockscale_bpreshuffle", "gen": "MI355X", "scale_format": "fp32_block",
           "shape": "4096x2048x7168"}


async def ask(client: Client) -> None:
    matched = await client.call_tool("match_skill", {"hotspot": HOTSPOT})
    print(matched.content[0].text)
    recipe = await client.call_tool("get_recipe", {"card_id": "flydsl_fp8_blockscale_gemm", "shape": "4096x2048x7168"})
    print(recipe.content[0].text[:400])


async def over_stdio(command: list[str]) -> None:
    params = StdioServerParameters(command=command[0], args=[*command[1:], "serve"])
    async with Client(stdio_client(params)) as client:
        await ask(client)


async def over_http(url: str) -> None:
    token = os.environ.get("SKILL_SERVER_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=300) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            await ask(client)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", metavar="URL", help="a running server's MCP endpoint")
    parser.add_argument("--server", nargs=argparse.REMAINDER, default=[shutil.which("skill-server") or "skill-server"],
                        help="the command that starts the server over stdio")
    args = parser.parse_args()
    anyio.run(over_http, args.http) if args.http else anyio.run(over_stdio, args.server)
    sys.exit(0)

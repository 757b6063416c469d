"""The ``doctor`` tool: what a first run on this box needs, checked (read-only).

One call into ``SkillService.doctor``. It runs only the project's own checks (never anything a
client names: ``checks`` picks from the fixed list), writes nothing, and shares one run between
concurrent callers; it runs on a worker thread, so other requests are served meanwhile.

Like every tool it publishes no output schema (``mcp_answers``): the text block is the
doctor's own table, the structured content the whole ``DoctorFindings`` as JSON (the CLI's
``--json``), so a client can validate it with the same model.
"""
from typing import Annotated

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from skill_server.mcp.common import READ_ONLY
from skill_server.mcp.settings import ServerSettings
from skill_server.service.facade import ServiceError, SkillService

DOCTOR = """\
Call before the first verification on a box, or when one errors or refuses: checks torch and the \
GPU, runtimes, toolchain, timer floor, cache flush, profiler names and card prerequisites; one \
line found and one to fix per check. Read-only."""


def register(server: MCPServer, service: SkillService, settings: ServerSettings) -> None:
    @server.tool(description=DOCTOR, annotations=READ_ONLY)
    async def doctor(
        checks: Annotated[list[str] | None, Field(description="check ids (an unknown id errors, listing them); default: all")] = None,
    ) -> CallToolResult:
        try:
            report = await anyio.to_thread.run_sync(lambda: service.doctor(checks))
        except ServiceError as exc:
            raise ToolError(str(exc)) from None
        return CallToolResult(content=[TextContent(type="text", text=report.text())],
                              structured_content=report.model_dump(mode="json"))

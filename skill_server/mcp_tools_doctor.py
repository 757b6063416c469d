"""The ``doctor`` tool: what a first run on this box needs, checked (read-only).

One call into ``SkillService.doctor``. It runs only the project's own checks (never anything a
client names: ``checks`` picks from the fixed list), writes nothing, and shares one run between
concurrent callers; it runs on a worker thread, so other requests are served meanwhile.

No ``from __future__ import annotations``: the return type must be a real class when the tool
is defined (the SDK derives the output schema from it).
"""
from typing import Annotated

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from .doctor_model import DoctorReport
from .doctor_plan import CHECKS
from .mcp_common import READ_ONLY
from .mcp_settings import ServerSettings
from .service import ServiceError, SkillService

DOCTOR = f"""\
Call this before the first verification on a box, or when a verification errors or refuses: \
checks torch's build and the GPU (arch, caches incl. MI355X's MALL), one HIP/CUDA runtime per \
process, ld.lld / FlyDSL / Triton / aiter, the timer floor, whether the cache flush evicts, the \
profiler's kernel names, and each card's prerequisites. Each check: ok / warn / missing / failed / \
not_applicable, one line found, one line to fix. Read-only; tens of seconds. checks: a subset of \
{', '.join(c.id for c in CHECKS)} (default all)."""


def register(server: MCPServer, service: SkillService, settings: ServerSettings) -> None:
    @server.tool(description=DOCTOR, annotations=READ_ONLY)
    async def doctor(
        checks: Annotated[list[str] | None, Field(description="check ids to run (their needs run too); default: all")] = None,
    ) -> DoctorReport:
        try:
            return await anyio.to_thread.run_sync(lambda: service.doctor(checks))
        except ServiceError as exc:
            raise ToolError(str(exc)) from None

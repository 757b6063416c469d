"""The verifier tool (exec-gated: it imports the candidate's code and runs it on the GPU).

One call into ``SkillService.verify``; progress lines from the verifier's subprocess are
forwarded as MCP progress notifications.

No ``from __future__ import annotations`` here: the tool's return type is imported inside
``register`` (only when exec tools are enabled, so a default start never pays for the
verifier's modules) and must be a real class when the tool is defined.
"""
from typing import Annotated, Any

import anyio
import anyio.from_thread
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from .mcp_settings import ServerSettings
from .service import ServiceError, SkillService

EXECUTES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)

RUN_VERIFIER = """\
Call this after writing a candidate kernel for a matched card, before claiming it is correct or \
faster: runs the card's verifier on this machine's GPU (CPU if none) in a subprocess per shape. \
Parity first against the immutable oracle (several seeds plus a secret one, perturbed inputs, poisoned \
outputs, inputs checked unchanged); then runtime signatures (the optimised kernels must really run) and \
whole-segment scoring; then same-session A/A + interleaved A/B timing with a bootstrap interval. \
Verdict FASTER / SLOWER / NO_DIFFERENCE, or FAIL whenever parity fails (a fast wrong kernel scores 0). \
candidate: FILE.py:FUNC (build(inputs, outputs) -> zero-arg launch), package.module:FUNC, or \
arm:NAME for one of the problem's arms. Slow (tens of seconds per shape). Record the result with \
record_result."""


def register(server: MCPServer, service: SkillService, settings: ServerSettings) -> None:
    if not settings.allow_exec_tools:
        return
    from verifiers.report import VerificationReport

    @server.tool(description=RUN_VERIFIER, annotations=EXECUTES)
    async def run_verifier(
        ctx: Context,
        card_id: Annotated[str, Field(description="the card whose verifier binding to run")],
        candidate: Annotated[str, Field(description="FILE.py:FUNC, package.module:FUNC, or arm:NAME")],
        baseline: Annotated[str | None, Field(description="baseline arm (default: the problem's for this platform)")] = None,
        shapes: Annotated[list[str] | None, Field(description='shapes, e.g. ["4096x2048x7168"] (default: the card\'s)')] = None,
        options: Annotated[dict[str, Any] | None, Field(description="VerifyOptions fields, e.g. {\"rounds\": 7}")] = None,
    ) -> VerificationReport:
        def progress(done: int, total: int, message: str) -> None:
            try:
                anyio.from_thread.run(ctx.report_progress, float(done), float(total), message)
            except Exception:  # progress is best effort; the run goes on
                pass

        def run() -> VerificationReport:
            return service.verify(card_id, candidate, baseline=baseline, shapes=shapes, options=options,
                                  progress=progress)

        try:
            return await anyio.to_thread.run_sync(run)
        except ServiceError as exc:
            raise ToolError(str(exc)) from None

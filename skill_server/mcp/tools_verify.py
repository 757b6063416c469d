"""The verifier tool (exec-gated: it runs the candidate's code) and the report resource.

``run_verifier`` is one call into ``SkillService.verify``. It records its own result
(``verified``, signed) when write tools are on, unless ``record=false``; it answers with a
compact summary (verdict, speedup with interval, per-stage status and reasons, flags, the
record ids) and leaves the full report at ``report://{id}``. Progress from the verifier's
subprocesses arrives as MCP progress notifications during the run (``mcp_progress``).
"""
from __future__ import annotations

import threading
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from skill_server.mcp import answers
from skill_server.mcp.progress import run_with_progress
from skill_server.mcp.settings import ServerSettings
from skill_server.service.facade import ServiceError, SkillService

EXECUTES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
REPORT_URI = "report://{report_id}"

RUN_VERIFIER = """\
Call this after writing a candidate kernel for a matched card, before claiming it is correct or \
faster: parity against the oracle, runtime signatures, interleaved A/B timing, on this machine. \
Verdict FASTER / SLOWER / NO_DIFFERENCE, or FAIL. candidate: FILE.py:FUNC (build(inputs, outputs) -> \
launch) or arm:NAME. Slow. Records its result as verified; full report at report://{id}."""


def register(server: MCPServer, service: SkillService, settings: ServerSettings) -> None:
    @server.resource(REPORT_URI, name="verifier_report", title="Verifier report", mime_type="application/json",
                     description="A verifier report (run_verifier, reverify): the full report, its digest and, "
                                 "when recorded, the server's signature.")
    def verifier_report(report_id: str) -> str:
        try:
            return service.get_report(report_id).envelope_json
        except ServiceError as exc:
            raise ResourceNotFoundError(str(exc)) from None

    if not settings.allow_exec_tools:
        return
    can_record = settings.allow_write_tools

    @server.tool(description=RUN_VERIFIER + ("" if can_record else " Not recorded here (write tools are off)."),
                 annotations=EXECUTES)
    async def run_verifier(
        ctx: Context,
        card_id: str,
        candidate: Annotated[str, Field(description="FILE.py:FUNC or arm:NAME")],
        baseline: Annotated[str | None, Field(description="default: the platform's")] = None,
        shapes: Annotated[list[str] | None, Field(description='default: the card\'s')] = None,
        options: Annotated[dict[str, Any] | None, Field(description='e.g. {"rounds": 7}')] = None,
        record: Annotated[bool, Field(description="store in the ledger")] = True,
    ) -> CallToolResult:
        cancel = threading.Event()
        why_not = ("not recorded: write tools are off on this server (--enable-write-tools)" if record
                   else "not recorded: record=false")

        def work(report):
            return service.verify(card_id, candidate, baseline=baseline, shapes=shapes, options=options,
                                  progress=report, record=record and can_record, client=settings.client,
                                  not_recorded=why_not, cancel=cancel)

        try:
            outcome = await run_with_progress(ctx, work, cancel)
        except ServiceError as exc:
            raise ToolError(str(exc)) from None
        result = answers.answer(answers.verify_text(outcome), answers.verify_view(outcome))
        # ERROR: the verifier could not decide (the harness, the box): an error answer, not a verdict
        result.is_error = outcome.report.verdict == "ERROR"
        return result

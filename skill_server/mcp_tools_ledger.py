"""Results-ledger tools: history and overlap (read-only), record and draft (write-gated),
re-verification (exec-gated: it compiles kernels and runs the verifier).

Each tool is one call into ``SkillService``. Gated tools are registered only when the
operator allowed them (``ServerSettings``); re-verification records its statuses only
when write tools are allowed too.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio
import anyio.from_thread
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from .drafting import DraftResult
from .ledger import ResultRecord
from .mcp_common import READ_ONLY, describe_validation_error, tool_errors
from .mcp_settings import ServerSettings
from .overlap import OverlapReport
from .reverify import ReverifyProgress, ReverifyReport
from .service import RecordReceipt, ServiceError, SkillService, ValidationHistory

WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
EXECUTES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)

GET_HISTORY = """\
Call this before trusting or quoting a card's figures, or to see what was measured for a card: its \
recorded A/B results (shape, arms, verdict, speedup with interval, parity, platform, git revision, who \
recorded it) and its re-verifications, newest first, plus the latest status per platform \
(CONFIRMED / DRIFTED / FAILED / PREREQUISITE_MISSING / NOT_APPLICABLE_HERE). Filter by shape \
("MxNxK"), platform (rocm/gfx950, cuda, MI355X, ...) or source."""

CHECK_OVERLAP = """\
Call this before writing a new skill card (give draft_text, the SKILL.md text) or to see how a card \
relates to the others (card_id): lists existing cards whose match space intersects it (operators, \
generations, dtypes, scale formats, regimes, op-name signature, shape constraints, evidence), what they \
share and what separates them, flags exact duplicates, and surfaces reviews that reported duplicate \
functionality. Cards sharing a hotspot name but not a scale format are distinct, not duplicates. \
Give exactly one of draft_text, card_id, match_spec."""

RECORD_RESULT = """\
Call this after a verifier run (or a measurement you made) to store the result in the project's \
results ledger, so later matches show it. One record or a list (stored all or none). Each needs \
card_id, shape, baseline and candidate arms (name, time_ms), verdict (FASTER / SLOWER / NO_DIFFERENCE \
/ FAIL), speedup (baseline/candidate) with its interval when known, parity figures, platform (device, \
generation, runtime cuda/rocm/cpu, library versions), recorded_by (your agent name) and source. \
Impossible values (negative times, NaN speedups, a FASTER verdict below 1x), unknown cards and \
paths outside the project are refused with the reason; nothing is half-written."""

REVERIFY = """\
Call this when a card's claims need re-checking on this machine (after a FlyDSL / driver upgrade, or \
when get_validation_history shows no recent status): checks the card's prerequisites (package \
versions, capabilities), runs the static gfx950 gates where FlyDSL is installed, runs the verifier on \
the GPU present for the card's verifier shapes, and compares with the card's claims. Returns a status \
per card (CONFIRMED / DRIFTED / FAILED / PREREQUISITE_MISSING / NOT_APPLICABLE_HERE) with the reason \
of each stage. Slow: compiles kernels and times them (minutes). Omit card_id for every card."""

DRAFT_CARD = """\
Call this when ledger results show a new validated win that no card covers (check_overlap first): \
writes skills/<new_id>/SKILL.md as an experimental card skeleton whose validation block comes from \
the selected ledger records (by from_card with optional shape / platform, or record_ids), with TODO \
prose sections for a person to complete, and the records beside it as a validation artifact. Claims \
only the generations the records were measured on and the lowest FASTER speedup as its floor."""


def register(server: MCPServer, service: SkillService, settings: ServerSettings) -> None:
    @server.tool(description=GET_HISTORY, annotations=READ_ONLY)
    @tool_errors
    def get_validation_history(
        card_id: Annotated[str, Field(description="card id")],
        shape: Annotated[str | None, Field(description='"MxNxK" or "name=value,..."')] = None,
        platform: Annotated[str | None, Field(description="rocm/gfx950, cuda, gfx950, MI355X, H200, a device name")] = None,
        source: Literal["verifier_report", "manual", "reverify"] | None = None,
        limit: Annotated[int, Field(ge=1, le=1000)] = 50,
    ) -> ValidationHistory:
        return service.get_validation_history(card_id, shape=shape, platform=platform, source=source, limit=limit)

    @server.tool(description=CHECK_OVERLAP, annotations=READ_ONLY)
    @tool_errors
    def check_overlap(
        draft_text: Annotated[str | None, Field(description="a draft SKILL.md (front matter and body)", max_length=200_000)] = None,
        card_id: Annotated[str | None, Field(description="an existing card to compare with the others")] = None,
        match_spec: Annotated[dict[str, Any] | None, Field(description="a card's match block as an object")] = None,
    ) -> OverlapReport:
        return service.check_overlap(draft_text=draft_text, card_id=card_id, match_spec=match_spec)

    if settings.allow_write_tools:
        @server.tool(description=RECORD_RESULT, annotations=WRITES)
        @tool_errors
        def record_result(
            records: Annotated[list[ResultRecord], Field(min_length=1, max_length=200,
                                                         description="one or more results; stored all or none")],
        ) -> RecordReceipt:
            return service.record_result(list(records))

        @server.tool(description=DRAFT_CARD, annotations=WRITES)
        @tool_errors
        def draft_card(
            new_id: Annotated[str, Field(description="the new card's id (lower-case, digits, '_'); also its folder")],
            from_card: Annotated[str | None, Field(description="card whose ledger records to draft from")] = None,
            record_ids: Annotated[list[int] | None, Field(description="ledger record ids to draft from")] = None,
            shape: Annotated[str | None, Field(description='only records of this shape, "MxNxK"')] = None,
            platform: Annotated[str | None, Field(description="only records of this platform")] = None,
            gens: Annotated[list[str] | None, Field(description="generations the card claims (default: the records')")] = None,
            title: Annotated[str | None, Field(description="one-line title (default: a TODO)")] = None,
        ) -> DraftResult:
            return service.draft_card(new_id, from_card=from_card, record_ids=record_ids, shape=shape,
                                      platform=platform, gens=gens, title=title)

    if settings.allow_exec_tools:
        record = settings.allow_write_tools

        @server.tool(description=REVERIFY + ("" if record else " Statuses are not recorded on this server "
                                             "(write tools are off)."), annotations=EXECUTES)
        async def reverify(
            ctx: Context,
            card_id: Annotated[str | None, Field(description="one card; omit for every card")] = None,
            gates: Annotated[bool, Field(description="run the static gfx950 gates (compiles)")] = True,
            verifier: Annotated[bool, Field(description="run the verifier where a GPU is present")] = True,
        ) -> ReverifyReport:
            def progress(ev: ReverifyProgress) -> None:
                try:
                    anyio.from_thread.run(ctx.report_progress, ev.index - 1 + (1.0 if ev.stage == "done" else 0.5),
                                          float(ev.total), f"{ev.card_id}: {ev.stage}: {ev.message}")
                except Exception:  # progress is best effort; the run goes on
                    pass

            def run() -> ReverifyReport:
                return service.reverify(card_id=card_id, progress=progress, gates=gates, verifier=verifier,
                                        record=record)

            try:
                return await anyio.to_thread.run_sync(run)
            except ServiceError as exc:
                raise ToolError(str(exc)) from None
            except ValidationError as exc:
                raise ToolError(describe_validation_error(exc)) from None

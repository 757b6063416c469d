"""Results-ledger tools: history and overlap (read-only), record and draft (write-gated),
re-verification (exec-gated: it compiles kernels and runs the verifier).

Each tool is one call into ``SkillService`` and answers with a short summary plus a
compact structured content (``mcp_answers``). Gated tools are registered only when the
operator allowed them (``ServerSettings``); re-verification records its statuses only
when write tools are allowed too.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field, ValidationError

from skill_server.mcp import answers
from skill_server.mcp.common import READ_ONLY, describe_validation_error, tool_errors
from skill_server.mcp.progress import run_with_progress
from skill_server.mcp.settings import ServerSettings
from skill_server.service.facade import ServiceError, SkillService

WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
EXECUTES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)

GET_HISTORY = """\
Call this before trusting or quoting a card's figures: its recorded results (verdict, speedup with \
interval, platform, evidence level: verified = this server's verifier, reported = submitted) and \
re-verifications, newest first. Filter by shape, platform or source."""

CHECK_OVERLAP = """\
Call this before writing a new skill card (draft_text: the SKILL.md) or to see how a card relates to \
the others (card_id): the cards whose match space intersects it, what they share and what separates \
them, duplicates, recorded reviews. Give one of draft_text, card_id, match_spec."""

RECORD_RESULT = """\
Call this to store a result in the ledger (run_verifier already records its own). Give one of: \
report_id (an unrecorded run_verifier run: verified), report (report://{id} JSON: verified only if \
unchanged and signed here), records (your measurements: reported; card_id, shape, baseline/candidate \
{name, time_ms}, verdict, speedup, interval, platform {device, generation, runtime}, source)."""

REVERIFY = """\
Call this when a card's claims need re-checking on this machine (after an upgrade, or no recent \
status): prerequisites, gfx950 gates, the verifier on the GPU, the card's claims. Returns CONFIRMED / \
DRIFTED / FAILED / PREREQUISITE_MISSING / NOT_APPLICABLE_HERE per card. Slow."""

DRAFT_CARD = """\
Call this when ledger results show a validated win no card covers (check_overlap first): writes a \
card skeleton to the drafts area from the records (from_card [+ shape, platform] or record_ids). Not \
served until a person completes and promotes it."""


def register(server: MCPServer, service: SkillService, settings: ServerSettings) -> None:
    @server.tool(description=GET_HISTORY, annotations=READ_ONLY)
    @tool_errors
    def get_validation_history(
        card_id: str,
        shape: Annotated[str | None, Field(description='"MxNxK" or "name=value,..."')] = None,
        platform: Annotated[str | None, Field(description="rocm/gfx950, cuda, MI355X, H200, a device name")] = None,
        source: Literal["verifier_report", "manual", "reverify"] | None = None,
        limit: Annotated[int, Field(ge=1, le=1000)] = 50,
    ) -> CallToolResult:
        h = service.get_validation_history(card_id, shape=shape, platform=platform, source=source, limit=limit)
        return answers.answer(answers.history_text(h), answers.history_view(h))

    @server.tool(description=CHECK_OVERLAP, annotations=READ_ONLY)
    @tool_errors
    def check_overlap(
        draft_text: Annotated[str | None, Field(description="a draft SKILL.md", max_length=200_000)] = None,
        card_id: Annotated[str | None, Field(description="an existing card")] = None,
        match_spec: Annotated[dict[str, Any] | None, Field(description="a card's match block")] = None,
    ) -> CallToolResult:
        report = service.check_overlap(draft_text=draft_text, card_id=card_id, match_spec=match_spec)
        view = report.model_dump(mode="json", exclude={"findings": {"__all__": {"dimensions"}}})
        lines = [f"{report.subject}: compared with {report.compared} card(s); duplicates: "
                 f"{', '.join(report.duplicates) or 'none'}; overlaps: {', '.join(report.overlaps) or 'none'}."]
        lines += [f"- {f.kind} {f.card_id}" + (f": shares {'; '.join(f.overlaps[:3])}" if f.overlaps else "")
                  + (f"; separated by {'; '.join(f.separated_by[:2])}" if f.separated_by else "")
                  for f in report.findings]
        lines += [f"review {r.verdict} on {r.card_id}: {answers.clip(r.says, 200)}" for r in report.reviews]
        return answers.answer("\n".join(lines), view)

    if settings.allow_write_tools:
        @server.tool(description=RECORD_RESULT, annotations=WRITES)
        @tool_errors
        def record_result(
            records: Annotated[list[dict[str, Any]] | None, Field(max_length=200, description="hand-made results")] = None,
            report: Annotated[dict[str, Any] | None, Field(description="a verifier report (report://{id} JSON)")] = None,
            report_id: Annotated[str | None, Field(description="an unrecorded run_verifier run")] = None,
            card_id: Annotated[str | None, Field(description="the card a report verified (checked)")] = None,
            recorded_by: Annotated[str | None, Field(max_length=100, description="your agent name")] = None,
        ) -> CallToolResult:
            receipt = service.record_result(records, report=report, report_id=report_id, card_id=card_id,
                                            recorded_by=recorded_by)
            return answers.answer(answers.receipt_text(receipt), answers.receipt_view(receipt))

        @server.tool(description=DRAFT_CARD, annotations=WRITES)
        @tool_errors
        def draft_card(
            new_id: Annotated[str, Field(description="lower-case, digits, '_'")],
            from_card: str | None = None,
            record_ids: list[int] | None = None,
            shape: str | None = None,
            platform: str | None = None,
            gens: Annotated[list[str] | None, Field(description="default: the records'")] = None,
            title: str | None = None,
        ) -> CallToolResult:
            res = service.draft_card(new_id, from_card=from_card, record_ids=record_ids, shape=shape,
                                     platform=platform, gens=gens, title=title)
            text = (f"Drafted {res.card_id} at {res.path} from record(s) {res.records} (source {res.source_card}; gens "
                    f"{', '.join(res.gens)}; floor {res.speedup_floor}x); {res.todo_count} TODO(s). {res.promote}.")
            if res.problems:
                text += " Lint: " + "; ".join(answers.clip(p, 200) for p in res.problems[:4])
            return answers.answer(text, res.model_dump(mode="json", exclude={"overlap"}) | {
                "duplicates": res.overlap.get("duplicates"), "overlaps": res.overlap.get("overlaps")})

    if settings.allow_exec_tools:
        record = settings.allow_write_tools

        @server.tool(description=REVERIFY + ("" if record else " Statuses are not recorded on this server "
                                             "(write tools are off)."), annotations=EXECUTES)
        async def reverify(
            ctx: Context,
            card_id: Annotated[str | None, Field(description="one card; omit for every card")] = None,
            gates: Annotated[bool, Field(description="run the static gfx950 gates (compiles)")] = True,
            verifier: Annotated[bool, Field(description="run the verifier where a GPU is present")] = True,
            fleet: Annotated[bool, Field(description="run on the server's Ray fleet: one task per card and "
                                                      "platform its nodes advertise")] = False,
        ) -> CallToolResult:
            # the address is the operator's (ServerSettings.ray_address), never the client's: a client-named
            # address would make this server connect, and hand its work and results, wherever it says
            if fleet and not settings.ray_address:
                raise ToolError("this server has no Ray fleet: the operator starts it with `skill-server serve "
                                "--ray-address HOST:PORT` (docs/fleet.md)")

            def work(report):
                if fleet:
                    def fleet_progress(ev) -> None:
                        report(ev.done, ev.total, f"{ev.card_id} @ {ev.target}: {ev.event}: {ev.message}")

                    return service.reverify_on_fleet(settings.ray_address, card_id=card_id, progress=fleet_progress,
                                                     gates=gates, verifier=verifier, record=record)

                def progress(ev) -> None:
                    report(ev.index - 1 + (1.0 if ev.stage == "done" else 0.5), ev.total,
                           f"{ev.card_id}: {ev.stage}: {ev.message}")

                return service.reverify(card_id=card_id, progress=progress, gates=gates, verifier=verifier,
                                        record=record)

            try:
                result = await run_with_progress(ctx, work)
            except ServiceError as exc:
                raise ToolError(str(exc)) from None
            except ValidationError as exc:
                raise ToolError(describe_validation_error(exc)) from None
            if fleet:
                return answers.answer(_fleet_text(result), _fleet_view(result))
            return answers.answer(answers.reverify_text(result), answers.reverify_view(result))


def _fleet_view(report: Any) -> dict[str, Any]:
    return {"recorded": report.ledger is not None, "platforms": [t.key for t in report.targets],
            "outcomes": [{"card_id": o.card_id, "platform": o.target.key, "outcome": o.outcome, "status": o.status,
                          "reason": answers.clip(o.reason, 300), "node": o.node, "measured_on": o.measured_on,
                          "report": f"report://{o.report_id}" if o.report_id else None} for o in report.outcomes]}


def _fleet_text(report: Any) -> str:
    lines = [f"Re-verified on the fleet: {len(report.outcomes)} task(s) on {', '.join(t.key for t in report.targets)} "
             f"({'recorded' if report.ledger else 'not recorded'}):"]
    lines += [f"- {o.card_id} @ {o.target.key}: {o.outcome}, {o.status}: {answers.clip(o.reason, 160)}"
              for o in report.outcomes]
    return "\n".join(lines)

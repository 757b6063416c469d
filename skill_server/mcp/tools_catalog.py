"""Catalog tools: list, match one hotspot, match a profile, read a recipe, reload.

Each tool is one call into ``SkillService``; descriptions are the triggers an agent
reads to decide when to call (keep each well under 1 KB: clients truncate).

list_skills, match_skill and get_recipe are ``async``: they answer from the in-memory
catalog in about a millisecond, less than the SDK's hop to a worker thread costs (measured:
~2 ms of server CPU per call). A match_skill whose names are long enough to cost more runs
on the CPU pool (``run_off_loop``). match_profile and reload_skills stay plain functions, so
their file reads and parsing run on a worker thread and never stall the event loop.
Client-supplied sizes and paths are checked against ``settings.client`` (``client_policy``).
"""
from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from skill_server.mcp import answers
from skill_server.policy.client_policy import ClientInputError
from skill_server.matching.hotspot import Hotspot, ShapeIn
from skill_server.mcp.common import READ_ONLY, run_off_loop, tool_errors
from skill_server.mcp.settings import ServerSettings
from skill_server.service.facade import MAX_PAGE, SkillService

Gen = Annotated[str | None, Field(description="e.g. gfx950, MI355X, H200")]
Dtype = Annotated[str | None, Field(description="e.g. fp8_e4m3, bf16, mxfp8")]
ScaleFormat = Annotated[str | None, Field(description="fp32_block, ue8m0_1x32, per_row, per_tensor")]
TargetGen = Annotated[str | None, Field(description="as if on this gen")]

LIST_SKILLS = """\
Call this to see which expert GPU-kernel skills exist (filter by gen, operator, dtype): metadata and \
headline figures, one page at a time (pass next_cursor as cursor). For a hot kernel use match_skill."""

MATCH_SKILL = """\
Call this when a profiler shows a GPU kernel taking a large share of time, before you write or tune \
it: says whether a validated expert recipe applies. Give op_name as printed plus only what you know \
for certain; never guess a field (a missing one makes the matcher abstain and say what to supply). \
Returns matches, the recipe row for the shape, the floor, and each figure's evidence. Next: get_recipe."""

# Longer names (op name plus segment kernels) are matched on the CPU pool, off the event loop.
INLINE_NAME_CHARS = 512

MATCH_PROFILE = """\
Call this with a profiler file (rocprofv3 CSV, JSON or rocpd database, or torch.profiler trace JSON, \
.gz ok) to rank its GPU hotspots by time and match each against the skills. Give path (a file on the \
server's machine), content (its text) or content_base64. gen, dtype, scale_format, regime fill in \
what the profile does not say."""

GET_RECIPE = """\
Call this after match_skill picks a card, to learn how to implement it: a summary (when to use, \
procedure, pitfalls, do-no-harm), with shape "MxNxK" the recipe row for it. Ask for one section or \
full=true only when needed. Never answers for another card than card_id."""

RELOAD_SKILLS = """\
Call this after cards were added or edited and the change does not show yet (edits are picked up \
within a second anyway). Returns the card count and problems."""


def inline_text(content: str | dict[str, Any] | list[Any] | None) -> str | None:
    """An inline profile as text. The SDK hands a JSON-looking string argument over already
    parsed, so a JSON trace may arrive as the object: it is written back to compact JSON (and
    then capped like any text)."""
    if content is None or isinstance(content, str):
        return content
    try:
        return json.dumps(content, separators=(",", ":"), allow_nan=False)
    except (ValueError, RecursionError):
        raise ClientInputError("content is JSON this server cannot write back (nested too deeply, or NaN)") from None


def register(server: MCPServer, service: SkillService, settings: ServerSettings) -> None:
    @server.tool(description=LIST_SKILLS, annotations=READ_ONLY)
    @tool_errors
    async def list_skills(
        gen: Gen = None,
        operator: Annotated[str | None, Field(description="e.g. dense_gemm, grouped_gemm_moe")] = None,
        dtype: Dtype = None,
        cursor: Annotated[str | None, Field(description="next_cursor of the previous page")] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 50,
    ) -> CallToolResult:
        page = service.list_skills(gen=gen, operator=operator, dtype=dtype, cursor=cursor, limit=limit)
        return answers.answer(answers.list_text(page), answers.list_view(page))

    @server.tool(description=MATCH_SKILL, annotations=READ_ONLY)
    @tool_errors
    async def match_skill(hotspot: Hotspot, target_gen: TargetGen = None) -> CallToolResult:
        if len(hotspot.op_name) + sum(map(len, hotspot.segment_kernels)) > INLINE_NAME_CHARS:
            result = await run_off_loop(lambda: service.match_skill(hotspot, target_gen=target_gen))
        else:
            result = service.match_skill(hotspot, target_gen=target_gen)
        return answers.answer(answers.match_text(result), answers.match_view(result))

    @server.tool(description=MATCH_PROFILE, annotations=READ_ONLY)
    @tool_errors
    def match_profile(
        path: Annotated[str | None, Field(description="file on the server's machine")] = None,
        content: Annotated[str | dict[str, Any] | list[Any] | None,
                           Field(description="the file's text (instead of path); a JSON trace may be the object")] = None,
        content_base64: Annotated[str | None, Field(description="its bytes, base64")] = None,
        format: Annotated[str | None, Field(description="rocprof_trace, rocprof_stats, rocpd, torch_trace (default: detected)")] = None,
        gen: Gen = None,
        dtype: Dtype = None,
        scale_format: ScaleFormat = None,
        regime: Literal["prefill", "decode"] | None = None,
        top: Annotated[int, Field(ge=1, le=MAX_PAGE, description="hotspots, by time")] = 20,
        min_pct: Annotated[float, Field(ge=0.0, le=100.0, description="minimum share of GPU time, %")] = 0.0,
        target_gen: TargetGen = None,
    ) -> CallToolResult:
        upload = settings.client.upload(inline_text(content), content_base64)
        result = service.match_profile(path=path, content=upload, format=format, gen=gen, dtype=dtype,
                                       scale_format=scale_format, regime=regime, top=top, min_pct=min_pct,
                                       target_gen=target_gen, client=settings.client)
        return answers.answer(answers.profile_text(result), answers.profile_view(result))

    @server.tool(description=GET_RECIPE, annotations=READ_ONLY)
    @tool_errors
    async def get_recipe(
        card_id: str,
        shape: Annotated[ShapeIn, Field(description='"MxNxK": selects the recipe row')] = None,
        section: Annotated[str | None, Field(description='e.g. "Procedure", "pitfalls", "recipes"')] = None,
        full: Annotated[bool, Field(description="the whole SKILL.md")] = False,
    ) -> CallToolResult:
        view = service.get_recipe(card_id, shape=shape, section=section, full=full)
        return answers.answer(answers.recipe_text(view), answers.recipe_view(view), limit=None)

    @server.tool(description=RELOAD_SKILLS, annotations=READ_ONLY)
    @tool_errors
    def reload_skills() -> CallToolResult:
        result = service.reload()
        text = f"{result.cards} card(s) loaded" + (f"; {len(result.problems)} problem(s): " + "; ".join(
            result.problems[:5]) if result.problems else "") + "."
        return answers.answer(text, result)

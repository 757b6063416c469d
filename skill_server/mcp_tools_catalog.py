"""Catalog tools: list, match one hotspot, match a profile, read a recipe, reload.

Each tool is one call into ``SkillService``; descriptions are the triggers an agent
reads to decide when to call (keep each well under 1 KB: clients truncate).

list_skills, match_skill and get_recipe are ``async``: they answer from the in-memory
catalog in about a millisecond, less than the SDK's hop to a worker thread costs (measured:
~2 ms of server CPU per call). match_profile and reload_skills stay plain functions, so
their file reads and parsing run on a worker thread and never stall the event loop.
"""
from __future__ import annotations

from typing import Annotated, Literal

from mcp.server import MCPServer
from pydantic import Field

from .hotspot import GemmShape, Hotspot
from .matching import MatchResult
from .mcp_common import READ_ONLY, check_profile_path, tool_errors
from .mcp_settings import ServerSettings
from .service import MAX_PAGE, ProfileMatchResult, RecipeView, ReloadResult, SkillList, SkillService

Gen = Annotated[str | None, Field(description="GPU generation or product, e.g. gfx950, MI355X, gfx942, H200")]
Dtype = Annotated[str | None, Field(description="operand dtype, e.g. fp8_e4m3, bf16, mxfp8")]
ScaleFormat = Annotated[str | None, Field(description="operand scale format: fp32_block or ue8m0_1x32 (also per_row, per_tensor)")]
TargetGen = Annotated[str | None, Field(description="match as if the kernel ran on this generation (e.g. gfx950 when "
                                         "planning a port); the answer says so")]

LIST_SKILLS = """\
Call this to see which expert GPU-kernel skills exist, e.g. before optimising kernels for a GPU \
generation, operator class (dense_gemm, grouped_gemm_moe, ...) or dtype. Returns metadata only \
(id, title, gens, dtypes, scale formats, validation status and date), one page at a time: pass \
next_cursor back as cursor. For a specific hot kernel call match_skill instead; to read a card call \
get_recipe."""

MATCH_SKILL = """\
Call this when a profiler shows a GPU kernel or op taking a large share of time (a GEMM, MoE, \
attention kernel, ...) to learn whether a validated expert recipe applies before you write or tune \
a kernel. Give op_name exactly as the profiler prints it plus what you know for certain: gen, dtype, \
scale_format, regime, shape {M,N,K}, stage, segment_kernels (other kernels of the same segment), \
pct_gpu. Returns ranked matches (each criterion with its reason, the recipe row for the shape, the \
speedup floor and parity rule), abstentions listing exactly what to supply, and the cards that do not \
apply and why. Never guess a field to make a card match: a missing one makes the matcher abstain, the \
safe answer. Next: get_recipe on the chosen card."""

MATCH_PROFILE = """\
Call this when you have a profiler output file (rocprofv3 kernel_trace.csv or kernel_stats.csv, or a \
torch.profiler trace JSON, .gz ok) and want its top GPU hotspots ranked by time, each matched against \
the expert skills like match_skill. Give path (a file on the machine this server runs on) or content \
(the file's text), not both. gen, dtype, scale_format and regime fill in what the profile does not \
say; top and min_pct trim the list."""

GET_RECIPE = """\
Call this after match_skill picks a card, to learn how to implement it. Default: a short summary \
(when to use, procedure, pitfalls, do-no-harm notes); with shape "MxNxK" it also selects the card's \
recipe row for that shape (core, config, decisive lever, what loses). Ask for one section (e.g. \
"Procedure", "pitfalls", "Per-shape recipes") or full=true for the whole SKILL.md only when you \
need it. Answers for exactly the card_id given, never a substitute; an unknown id is an error that \
lists the known ids."""

RELOAD_SKILLS = """\
Call this after cards under the skills folder were added or edited and the change does not show yet \
(the server also picks up changed files by itself within about a second). Reloads every card and \
returns the card count and any card problems (a card with errors is left out; see \
`skill-server lint`)."""


def register(server: MCPServer, service: SkillService, settings: ServerSettings) -> None:
    @server.tool(description=LIST_SKILLS, annotations=READ_ONLY)
    @tool_errors
    async def list_skills(
        gen: Gen = None,
        operator: Annotated[str | None, Field(description="operator class, e.g. dense_gemm, grouped_gemm_moe")] = None,
        dtype: Dtype = None,
        cursor: Annotated[str | None, Field(description="next_cursor of the previous page")] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_PAGE, description="cards per page")] = 50,
    ) -> SkillList:
        return service.list_skills(gen=gen, operator=operator, dtype=dtype, cursor=cursor, limit=limit)

    @server.tool(description=MATCH_SKILL, annotations=READ_ONLY)
    @tool_errors
    async def match_skill(hotspot: Hotspot, target_gen: TargetGen = None) -> MatchResult:
        return service.match_skill(hotspot, target_gen=target_gen)

    @server.tool(description=MATCH_PROFILE, annotations=READ_ONLY)
    @tool_errors
    def match_profile(
        path: Annotated[str | None, Field(description="profile file on the server's machine")] = None,
        content: Annotated[str | None, Field(description="the profile file's text (instead of path)")] = None,
        format: Annotated[str | None, Field(description="rocprof_trace, rocprof_stats, rocprof_json, rocpd or torch_trace; "
                                            "default: detected")] = None,
        gen: Gen = None,
        dtype: Dtype = None,
        scale_format: ScaleFormat = None,
        regime: Literal["prefill", "decode"] | None = None,
        top: Annotated[int, Field(ge=1, le=MAX_PAGE, description="hotspots to return, by time")] = 20,
        min_pct: Annotated[float, Field(ge=0.0, le=100.0, description="skip hotspots under this share of GPU time, percent")] = 0.0,
        target_gen: TargetGen = None,
    ) -> ProfileMatchResult:
        if path is not None:
            check_profile_path(path, settings.profile_roots)
        return service.match_profile(path=path, content=content, format=format, gen=gen, dtype=dtype,
                                     scale_format=scale_format, regime=regime, top=top, min_pct=min_pct,
                                     target_gen=target_gen)

    @server.tool(description=GET_RECIPE, annotations=READ_ONLY)
    @tool_errors
    async def get_recipe(
        card_id: Annotated[str, Field(description="card id from match_skill or list_skills")],
        shape: Annotated[GemmShape | str | None, Field(description='GEMM shape "MxNxK" (or {M,N,K}): selects the recipe row')] = None,
        section: Annotated[str | None, Field(description='one section by heading or alias, e.g. "Procedure", "pitfalls", "recipes"')] = None,
        full: Annotated[bool, Field(description="the whole SKILL.md text")] = False,
    ) -> RecipeView:
        return service.get_recipe(card_id, shape=shape, section=section, full=full)

    @server.tool(description=RELOAD_SKILLS, annotations=READ_ONLY)
    @tool_errors
    def reload_skills() -> ReloadResult:
        return service.reload()

"""Workflow prompts: the path from a hotspot to a verified, recorded result.

The text names the tools this server actually offers at the moment the prompt is
rendered; a gated tool that is off is named with the flag the operator must set,
so the agent can stop and ask instead of improvising.
"""
from __future__ import annotations

import json
from typing import Annotated

from mcp.server import MCPServer
from pydantic import Field

from skill_server.mcp.app import RECORD_TOOL, VERIFY_TOOL
from skill_server.mcp.settings import ServerSettings
from skill_server.service.facade import SkillService

OPTIMIZE_HOTSPOT = "Walk one GPU hotspot from the profiler to a verified, recorded result: match -> recipe -> implement -> verify -> record."


def register(server: MCPServer, service: SkillService, settings: ServerSettings) -> None:

    @server.prompt(name="optimize_hotspot", title="Optimise a GPU hotspot with an expert skill",
                   description=OPTIMIZE_HOTSPOT)
    async def optimize_hotspot(
        op_name: Annotated[str, Field(description="kernel or op name as the profiler shows it")],
        gen: Annotated[str, Field(description="GPU generation or product, e.g. gfx950 or MI355X")] = "",
        shape: Annotated[str, Field(description="GEMM shape MxNxK, when known")] = "",
        pct_gpu: Annotated[str, Field(description="share of GPU time, percent, when known")] = "",
    ) -> str:
        tools = {t.name for t in await server.list_tools()}
        return workflow_text(op_name, gen, shape, pct_gpu, has_verify=VERIFY_TOOL in tools,
                             has_record=RECORD_TOOL in tools, verify_tool=VERIFY_TOOL, record_tool=RECORD_TOOL)


def workflow_text(op_name: str, gen: str, shape: str, pct_gpu: str, *, has_verify: bool, has_record: bool,
                  verify_tool: str, record_tool: str) -> str:
    known = ", ".join(f"{k}={v}" for k, v in (("gen", gen), ("shape", shape), ("pct_gpu", pct_gpu)) if v)
    # the shape as given: match_skill reads the same spellings as every other front end
    shape_arg = f', "shape": {json.dumps(shape)}' if shape else ""
    if has_verify:
        verify = (f"Call `{verify_tool}` with the card id, your candidate file (FILE.py:build) and the shapes. It "
                  "runs the card's problem: parity against the oracle on several seeds and perturbed inputs, the "
                  "runtime signature, then interleaved A/B timing of the whole scored segment against the "
                  "baseline. Its answer is a summary; the full report is at the report:// resource it names.")
    else:
        verify = (f"`{verify_tool}` is not enabled on this server (it executes code). Ask the operator to "
                  "restart it with `skill-server serve --enable-exec-tools`, or to run the card's verifier on "
                  "the target GPU; do not claim a result you did not verify.")
    if has_record and has_verify:
        record = (f"`{verify_tool}` records its own result, pass or fail, as `verified` (signed by this server); "
                  f"nothing more to do. If you ran it with record=false, call `{record_tool}` with its report_id. "
                  f"Figures you measured yourself go to `{record_tool}` as records and are stored as `reported`, "
                  "never as verified; a skipped stage never counts as a pass.")
    elif has_record:
        record = (f"Only a report of this server's verifier is stored as `verified`: pass one to `{record_tool}` "
                  "unchanged (its digest and signature are checked). Figures you measured yourself are stored as "
                  "`reported`; a skipped stage never counts as a pass.")
    else:
        record = (f"`{record_tool}` is not enabled on this server (it writes records). Ask the operator to "
                  "restart it with `skill-server serve --enable-write-tools`; until then report the verifier's "
                  "output verbatim to the user.")
    return f"""\
Take this GPU hotspot to a verified, recorded result with the skill server's tools.

Hotspot: {op_name}{f" ({known})" if known else ""}

1. Match. Call `match_skill` with hotspot = {{"op_name": "{op_name}"{f', "gen": "{gen}"' if gen else ""}{shape_arg}, \
...}} and everything else you know for certain: dtype, scale_format (fp32_block vs ue8m0_1x32 need opposite \
recipes), regime, stage, segment_kernels, pct_gpu. With a whole profile file, `match_profile` ranks and \
matches every hotspot instead.
   - matches: take the first (highest score, validated before experimental); read its reasons and caveats.
   - abstained: the card needs evidence you did not give; `missing` says what. Find it (profiler, model \
code) and call again. Never guess a value to make a card match.
   - no match: stop here and keep the existing kernel; there is no validated recipe for it.
2. Recipe. Call `get_recipe` with the card_id and shape "MxNxK": read the summary and the recipe row \
(core, config, decisive lever, what loses here). Ask for section="Procedure", "pitfalls" or full=true only \
when you need them. The resources skill://<card_id>/SKILL.md and the validation YAML beside it hold the \
card and its measured evidence.
3. Implement the candidate against the card's problem (kernels/<card folder>/problem.py) with the \
candidate contract:
       def build(inputs: dict[str, Tensor], outputs: dict[str, Tensor]) -> launch
   `build` does all compilation and preparation once (untimed) and returns a zero-argument `launch()` \
(timed) that writes every output in place on the current stream: no new output tensors, no writes to \
the inputs, no work on other streams.
4. Verify. {verify}
5. Record. {record}

Do-no-harm rules:
- Parity gates everything: a candidate that fails the card's parity rule scores 0 however fast it is. \
A fast wrong kernel scores 0.
- Score whole segments: time every kernel of the card's scored segment together (e.g. a GEMM plus its \
separate reduce), never only the kernel you changed.
- Keep the existing path unless the candidate beats the card's speedup floor, beyond the noise floor, \
against the baseline on the same machine.
- Answer for the card you matched: never borrow another card's or another shape's figures."""

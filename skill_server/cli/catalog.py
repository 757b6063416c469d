"""Catalog commands: match, match-profile, list, show, lint."""
from __future__ import annotations

import argparse
import sys
from typing import Literal

from pydantic import Field, field_validator

from skill_server.cards.shapes import parse_gemm_shape
from skill_server.cli.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    CommandArgs,
    emit_json,
    from_setting,
    handles_errors,
    service_from,
)
from skill_server.matching.hotspot import GemmShape, Hotspot
from trace_readers.read import FORMATS
from trace_readers.source import resolve_max_bytes

Regime = Literal["prefill", "decode"]


class MatchArgs(CommandArgs):
    """``match``: one hotspot, as flags."""

    op: str = Field(description="kernel or op name as the profiler shows it")
    operator: str | None = Field(None, description="operator class, e.g. dense_gemm (inferred from op when absent)")
    gen: str | None = Field(None, description="GPU generation or product: gfx950, MI355X, H200, ...")
    target_gen: str | None = Field(None, description="match as if the hotspot ran on this generation")
    dtype: str | None = Field(None, description="operand dtype, e.g. fp8_e4m3")
    scale_format: str | None = Field(None, description="operand scale format, e.g. fp32_block")
    regime: Regime | None = None
    shape: GemmShape | None = Field(None, description="GEMM shape, given as MxNxK")
    stage: Literal["stage1", "stage2"] | None = Field(None, description="MoE stage when known")
    launch_op: str | None = Field(None, description="the CPU op that launched the kernel")
    segment_kernel: list[str] = Field(default_factory=list, description="other kernels of the same segment")
    pct_gpu: float | None = Field(None, description="share of GPU time, percent")
    label: str | None = Field(None, description="model-side layer label (provenance only)")
    as_json: bool = False

    @field_validator("shape", mode="before")
    @classmethod
    def _shape(cls, value: object) -> object:
        return None if value is None else parse_gemm_shape(value)


class MatchProfileArgs(CommandArgs):
    """``match-profile``: a profiler file (or stdin) ranked and matched."""

    file: str = Field(description="the profile's path, or - for standard input")
    format: Literal[FORMATS] | None = Field(None, description="the profile's format (default: detected)")  # type: ignore[valid-type]
    max_bytes: int | None = from_setting("profile_max_bytes", "refuse larger inputs (default 512 MiB)")
    gen: str | None = Field(None, description="generation for hotspots whose trace does not name its device")
    target_gen: str | None = Field(None, description="match every hotspot as if it ran on this generation")
    dtype: str | None = None
    scale_format: str | None = None
    regime: Regime | None = None
    top: int = Field(20, description="at most this many hotspots")
    min_pct: float = Field(0.0, description="drop hotspots under this share of GPU time, percent")
    as_json: bool = False


class ListArgs(CommandArgs):
    """``list``: the cards, filtered and paged."""

    gen: str | None = None
    operator: str | None = None
    dtype: str | None = None
    limit: int = Field(50, description="cards per page")
    cursor: str | None = Field(None, description="the page after this cursor")
    as_json: bool = False


class ShowArgs(CommandArgs):
    """``show``: a card's recipe."""

    card: str = Field(description="card id")
    shape: str | None = Field(None, description="MxNxK: pick the recipe row for this shape")
    section: str | None = Field(None, description="one section of the card")
    full: bool = Field(False, description="the whole SKILL.md")
    as_json: bool = False

    @field_validator("shape")
    @classmethod
    def _shape(cls, value: str | None) -> str | None:
        if value is not None:
            parse_gemm_shape(value)  # the form only: the service picks the row
        return value


class LintArgs(CommandArgs):
    """``lint``: every card and artifact."""

    as_json: bool = False


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("match", help="match one hotspot against the cards")
    p.add_argument("--op", required=True, help="kernel or op name as the profiler shows it")
    p.add_argument("--operator", help="operator class, e.g. dense_gemm (inferred from --op when absent)")
    p.add_argument("--gen", help="GPU generation or product: gfx950, MI355X, H200, ...")
    p.add_argument("--target-gen", metavar="G", help="match as if the hotspot ran on generation G (e.g. plan a port)")
    p.add_argument("--dtype", help="operand dtype, e.g. fp8_e4m3")
    p.add_argument("--scale-format", help="operand scale format: fp32_block or ue8m0_1x32 (others: per_row, per_tensor)")
    p.add_argument("--regime", choices=["prefill", "decode"])
    p.add_argument("--shape", help="GEMM shape MxNxK")
    p.add_argument("--stage", choices=["stage1", "stage2"], help="MoE stage when known")
    p.add_argument("--launch-op", help="the CPU op that launched the kernel, e.g. aiter::gemm_a8w8_blockscale_ck")
    p.add_argument("--segment-kernel", action="append", default=[], metavar="NAME",
                   help="another kernel of the same segment (repeatable)")
    p.add_argument("--pct-gpu", type=float, help="share of GPU time, percent")
    p.add_argument("--label", help="model-side layer label (provenance only, zero weight)")
    p.add_argument("--json", action="store_true", dest="as_json")

    p = sub.add_parser("match-profile", help="rank a profiler file's hotspots and match each")
    p.add_argument("file", help="rocprofv3 kernel_trace.csv / kernel_stats.csv / results.json / results.db (rocpd), "
                   "or a torch.profiler trace JSON (.gz ok); - for stdin")
    p.add_argument("--format", choices=FORMATS, help="override detection")
    p.add_argument("--max-bytes", type=int, help="refuse larger inputs (default 512 MiB or $SKILL_SERVER_PROFILE_MAX_BYTES)")
    p.add_argument("--gen", help="generation for hotspots whose trace does not name its device")
    p.add_argument("--target-gen", metavar="G", help="match every hotspot as if it ran on generation G")
    p.add_argument("--dtype")
    p.add_argument("--scale-format")
    p.add_argument("--regime", choices=["prefill", "decode"])
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--min-pct", type=float, default=0.0)
    p.add_argument("--json", action="store_true", dest="as_json")

    p = sub.add_parser("list", help="list the cards (metadata only)")
    p.add_argument("--gen")
    p.add_argument("--operator")
    p.add_argument("--dtype")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--cursor")
    p.add_argument("--json", action="store_true", dest="as_json")

    p = sub.add_parser("show", help="show a card's recipe (summary, a section, or the whole card)")
    p.add_argument("card")
    p.add_argument("--shape", help="MxNxK: pick the recipe row for this shape")
    p.add_argument("--section", help="one section, e.g. Procedure, pitfalls, 'Do-no-harm notes'")
    p.add_argument("--full", action="store_true", help="the whole SKILL.md")
    p.add_argument("--json", action="store_true", dest="as_json")

    p = sub.add_parser("lint", help="validate every card and artifact; exit 1 on any error")
    p.add_argument("--json", action="store_true", dest="as_json")


def _hotspot_from(args: MatchArgs) -> Hotspot:
    return Hotspot(
        op_name=args.op, launch_op=args.launch_op, operator=args.operator, gen=args.gen, dtype=args.dtype,
        scale_format=args.scale_format, regime=args.regime, shape=args.shape,
        stage=args.stage, segment_kernels=args.segment_kernel, pct_gpu=args.pct_gpu, label=args.label,
    )


@handles_errors
def cmd_match(args: MatchArgs) -> int:
    result = service_from(args).match_skill(_hotspot_from(args), target_gen=args.target_gen)
    if args.as_json:
        emit_json(result)
    else:
        print(render_match(result))
    return EXIT_OK


def render_match(result, indent: str = "") -> str:
    lines = []
    for m in result.matches:
        cls = f"  class={m.shape_class.class_id} ({'tuned' if m.shape_class.tuned else 'untuned'})" if m.shape_class else ""
        lines.append(f"{indent}MATCH {m.card_id}  score={m.score:.2f}{cls}  [{m.validation.status} {m.validation.date or ''}]")
        if m.recipe:
            cfg = ", ".join(f"{k}={v}" for k, v in m.recipe.config.items())
            lines.append(f"{indent}  recipe: {m.recipe.core} ({cfg}); lever: {m.recipe.decisive_lever}")
        lines.append(f"{indent}  expect: speedup >= {m.expectations.speedup_floor}x, parity {m.expectations.parity}")
        for r in m.reasons:
            lines.append(f"{indent}    {r.status:8s} {r.criterion}: {r.detail}")
        if m.reverification is not None and m.reverification.platforms:
            current = {True: "current", False: "NOT current", None: "not confirmed"}[m.reverification.claims_current]
            lines.append(f"{indent}  re-verified: {m.reverification.summary} (claims {current})")
        for c in m.caveats:
            lines.append(f"{indent}  caveat: {c}")
    for a in result.abstained:
        lines.append(f"{indent}ABSTAIN {a.card_id}")
        for r in a.reasons:
            if r.status != "matched":
                lines.append(f"{indent}    {r.status:8s} {r.criterion}: {r.detail}")
        for need in a.missing:
            lines.append(f"{indent}  supply: {need}")
    for n in result.not_applicable:
        lines.append(f"{indent}NOT APPLICABLE {n.card_id}")
        for r in n.reasons:
            if r.status == "failed":
                lines.append(f"{indent}    failed   {r.criterion}: {r.detail}")
    for note in result.notes:
        lines.append(f"{indent}note: {note}")
    if not lines:
        lines.append(f"{indent}no card considered")
    return "\n".join(lines)


@handles_errors
def cmd_match_profile(args: MatchProfileArgs) -> int:
    svc = service_from(args)
    kwargs = dict(format=args.format, gen=args.gen, dtype=args.dtype, scale_format=args.scale_format,
                  regime=args.regime, top=args.top, min_pct=args.min_pct, max_bytes=args.max_bytes,
                  target_gen=args.target_gen)
    if args.file == "-":

        # bytes (gzip'd text and rocpd databases arrive on stdin too), never more than the limit + 1
        content = sys.stdin.buffer.read(resolve_max_bytes(args.max_bytes) + 1)
        result = svc.match_profile(content=content, **kwargs)
    else:
        result = svc.match_profile(path=args.file, **kwargs)
    if args.as_json:
        emit_json(result)
        return EXIT_OK
    device = f"; device {', '.join(result.device_names)} ({result.device_gen or 'unknown generation'})" \
        if result.device_names else ""
    print(f"format: {result.format}; {len(result.hotspots)} hotspots{device}")
    for note in result.notes:
        print(f"note: {note}")
    for h in result.hotspots:
        pct = f"{h.pct_gpu:.1f}%" if h.pct_gpu is not None else "?"
        print(f"#{h.rank} {pct:>6}  {h.op_name}" + (f"  [{h.shape}]" if h.shape else "")
              + (f"  shape {h.result.hotspot.shape}" if h.result.hotspot.shape and not h.shape else ""))
        print(render_match(h.result, indent="    "))
    return EXIT_OK


@handles_errors
def cmd_list(args: ListArgs) -> int:
    result = service_from(args).list_skills(gen=args.gen, operator=args.operator, dtype=args.dtype,
                                            cursor=args.cursor, limit=args.limit)
    if args.as_json:
        emit_json(result)
        return EXIT_OK
    for s in result.skills:
        print(f"{s.id}  [{s.validation_status} {s.validation_date or '-'}]  gens={','.join(s.gens)}  "
              f"ops={','.join(s.operators)}  scale={','.join(s.scale_formats or ['any'])}")
        print(f"    {s.title}")
        if s.reverification.platforms:
            print(f"    re-verified: {s.reverification.summary}"
                  + ("  (claims NOT current)" if s.reverification.claims_current is False else ""))
    if result.next_cursor:
        print(f"... more: --cursor {result.next_cursor}")
    if result.catalog_problems:
        print(f"{result.catalog_problems} card problem(s) left cards out: run `skill-server lint`", file=sys.stderr)
    return EXIT_OK


@handles_errors
def cmd_show(args: ShowArgs) -> int:
    view = service_from(args).get_recipe(args.card, shape=args.shape, section=args.section, full=args.full)
    if args.as_json:
        emit_json(view)
        return EXIT_OK
    if view.text is not None:
        print(view.text)
        return EXIT_OK
    print(f"# {view.card_id} [{view.validation_status}; last verified {view.last_verified}]\n{view.title}\n")
    if view.reverification.platforms:
        print(f"re-verified: {view.reverification.summary}")
        for c in view.reverification.caveats:
            print(f"  caveat: {c}")
        print()
    if view.shape_class:
        sc = view.shape_class
        print(f"shape {view.shape} -> {sc.class_id} ({sc.selection}, {'tuned' if sc.tuned else 'untuned'}): {sc.advice}")
        cfg = ", ".join(f"{k}={v}" for k, v in sc.recipe.config.items())
        print(f"recipe: {sc.recipe.core} ({cfg})\n  lever: {sc.recipe.decisive_lever}\n  measured: {sc.recipe.measured_speedup}")
        for loss in sc.recipe.loses_here:
            print(f"  loses here: {loss}")
        print()
    for name, text in view.summary.items():
        print(f"## {name}\n{text}\n")
    print(f"sections: {', '.join(view.available_sections)}; artifacts: {', '.join(view.artifacts)}")
    return EXIT_OK


@handles_errors
def cmd_lint(args: LintArgs) -> int:
    problems = service_from(args).lint()
    errors = [p for p in problems if p.severity == "error"]
    if args.as_json:
        emit_json({"ok": not errors, "problems": [p.model_dump() for p in problems]})
    else:
        for p in problems:
            print(p)
        print(f"{len(errors)} error(s), {len(problems) - len(errors)} warning(s)")
    return EXIT_FINDINGS if errors else EXIT_OK

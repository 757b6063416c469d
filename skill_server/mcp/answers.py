"""What each MCP tool puts into the agent's context: a short human summary as the text
block and a compact structured content (no nulls, no empty fields, no echo of the input).

Every tool returns ``answer(summary, data)``. Tools publish no ``outputSchema``: the
schemas of the full service models cost more context per session (tens of kilobytes in
``tools/list``) than every answer they describe; the shapes below are documented in
docs/mcp.md and are plain JSON objects. The full models stay available where an agent
needs them (``report://{id}`` for a verifier report, ``get_validation_history`` for
records, the CLI's ``--json``).
"""
from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime
from types import SimpleNamespace
from typing import Any

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from skill_server.reverify.claims import Figure, Reverification

TEXT_LIMIT = 1500


def compact(value: Any) -> Any:
    """Drop None, empty strings, lists and dicts, recursively (False and 0 stay)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, dict):
        out = {k: compact(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v != "" and v != [] and v != {}}
    if isinstance(value, (list, tuple)):
        return [compact(v) for v in value]
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    return value


def answer(summary: str, data: dict[str, Any] | BaseModel, limit: int | None = TEXT_LIMIT * 2) -> CallToolResult:
    """The tool's result: ``summary`` as the text block (clipped to ``limit``; None: the
    text is the content itself, e.g. a recipe), ``data`` compacted as structured content."""
    text = summary.strip() if limit is None else clip(summary, limit)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=compact(data))


def clip(text: str, n: int) -> str:
    text = text.strip()
    return text if len(text) <= n else text[: n - 3].rstrip() + "..."


def fmt_x(value: float | None) -> str:
    return f"{value:.3g}x" if value is not None else "-"


def fmt_interval(interval: Any) -> str:
    return f" [{interval[0]:.3g}, {interval[1]:.3g}]" if interval else ""


# ------------------------------------------------------------------------ evidence
def figure_line(f: Figure) -> str:
    what = f.text if f.text and f.speedup is None else fmt_x(f.speedup) + fmt_interval(f.interval)
    where = ", ".join(x for x in (f.platform, f.date) if x)
    at = f" at {f.shape}" if f.shape else ""
    return f"{f.level} {what}{at} ({where}; {f.source})"


def figure_view(f: Figure) -> dict[str, Any]:
    """One figure: the quoted text only when there is no number; scope only when not isolated."""
    drop = {"text"} if f.speedup is not None else set()
    if f.scope == "isolated":
        drop.add("scope")
    return compact(f.model_dump(mode="json", exclude=drop))


def evidence_view(ev: Reverification | None, figures: int = 4) -> dict[str, Any]:
    """Statuses (verified only), claims_current and the figures, each with level,
    platform and date."""
    if ev is None:
        return {}
    return {
        "claims_current": ev.claims_current,
        "statuses": [f"{p.platform}: {p.status} {p.date[:10]}" for p in ev.platforms],
        "figures": [figure_view(f) for f in ev.figures[:figures]],
    }


def evidence_text(ev: Reverification | None) -> str:
    if ev is None:
        return ""
    parts = []
    verified = [f for f in ev.figures if f.level == "verified"]
    if ev.figures:
        parts.append("; ".join(figure_line(f) for f in ev.figures[:2]))
    if not verified:
        parts.append("no verified record")
    if ev.claims_current is not None:
        parts.append("claims current" if ev.claims_current else "claims NOT current")
    return "Evidence: " + "; ".join(parts) + "."


def recipe_row(recipe: Any, validation: Any) -> dict[str, Any] | None:
    """A recipe row; its measured speedup (prose from the card) labelled as a transcribed
    figure with the card's GPU and validation date."""
    if recipe is None:
        return None
    row = recipe.model_dump(mode="json")
    text = row.pop("measured_speedup", None)
    if text:
        date = getattr(validation, "date", None)
        row["measured"] = {"level": "transcribed", "text": text, "platform": getattr(validation, "gpu", None),
                           "date": date.isoformat() if hasattr(date, "isoformat") else date}
    return row


# ------------------------------------------------------------------------ matching
def _why(reasons: Iterable[Any], keep: tuple[str, ...]) -> list[str]:
    return [f"{r.criterion}: {r.detail}" for r in reasons if r.status in keep]


def match_view(result: Any, figures: int = 3) -> dict[str, Any]:
    out: dict[str, Any] = {"matches": [], "abstained": [], "not_applicable": []}
    for m in result.matches:
        sc = m.shape_class
        out["matches"].append({
            "card_id": m.card_id, "title": m.title, "score": m.score,
            "matched": [r.criterion for r in m.reasons if r.status == "matched"],
            "why": _why(m.reasons, ("unknown", "failed")),
            "shape_class": {"id": sc.class_id, "selection": sc.selection, "tuned": sc.tuned,
                            "validated_shape": sc.validated_shape, "advice": sc.advice} if sc is not None else None,
            "recipe": recipe_row(m.recipe, m.validation),
            "expects": m.expectations.model_dump(mode="json"),
            "validation": {"status": m.validation.status, "date": m.validation.date, "gpu": m.validation.gpu},
            "evidence": evidence_view(m.reverification, figures),
            "caveats": m.caveats,
        })
    for a in result.abstained:
        out["abstained"].append({"card_id": a.card_id, "missing": a.missing, "why": _why(a.reasons, ("unknown",))})
    for n in result.not_applicable:
        out["not_applicable"].append({"card_id": n.card_id, "why": _why(n.reasons, ("failed",))})
    out["notes"] = result.notes
    out["cards_considered"] = result.cards_considered
    if result.target_gen is not None:  # matched as if for another generation: say for which, and from which
        out["target_gen"], out["source_gen"] = result.target_gen, result.source_gen
    return out


def match_text(result: Any) -> str:
    h = result.hotspot
    known = ", ".join(str(x) for x in (h.gen, h.dtype, h.scale_format, h.regime, h.shape) if x)
    lines = [f"{h.op_name}{f' ({known})' if known else ''}: {len(result.matches)} match(es), "
             f"{len(result.abstained)} abstained, {len(result.not_applicable)} not applicable."]
    for i, m in enumerate(result.matches, 1):
        sc = m.shape_class
        row = f"class {sc.class_id} ({sc.selection}{', tuned' if sc.tuned else ''}) -> {m.recipe.core}; " \
            if sc is not None and m.recipe is not None else ""
        lines.append(f"{i}. {m.card_id} (score {m.score:.2f}, {m.validation.status}): {row}floor "
                     f"{m.expectations.speedup_floor}x, {m.expectations.parity} parity. "
                     + evidence_text(m.reverification))
        lines += [f"   caveat: {clip(c, 200)}" for c in m.caveats[:2]]
    for a in result.abstained:
        lines.append(f"Abstained {a.card_id}: supply {', '.join(a.missing)}.")
    for n in result.not_applicable:
        failed = [r.criterion for r in n.reasons if r.status == "failed"]
        lines.append(f"Not applicable {n.card_id} ({', '.join(failed)}).")
    if result.matches:
        m = result.matches[0]
        shape = f', shape="{h.shape}"' if h.shape else ""
        lines.append(f'Next: get_recipe(card_id="{m.card_id}"{shape}).')
    elif not result.abstained:
        lines.append("No validated recipe applies: keep the existing kernel.")
    return "\n".join(lines)


def profile_view(result: Any) -> dict[str, Any]:
    rows = []
    for h in result.hotspots:
        r = h.result
        row: dict[str, Any] = {"rank": h.rank, "op_name": h.op_name, "pct_gpu": h.pct_gpu, "calls": h.calls,
                               "shape": h.shape or (str(r.hotspot.shape) if r.hotspot.shape else None)}
        if h.shape is not None:  # one of several rows for this kernel (per_variant: a shape or MoE stage each)
            row["variant"] = True
        if r.hotspot.stage is not None:
            row["stage"] = r.hotspot.stage
        if r.matches:
            m = r.matches[0]
            row["match"] = {"card_id": m.card_id, "score": m.score,
                            "shape_class": m.shape_class.class_id if m.shape_class else None,
                            "core": m.recipe.core if m.recipe else None,
                            "claims_current": m.reverification.claims_current if m.reverification else None}
            if len(r.matches) > 1:
                row["other_matches"] = [x.card_id for x in r.matches[1:]]
        row["abstained"] = [{"card_id": a.card_id, "missing": a.missing} for a in r.abstained]
        rows.append(row)
    out = {"format": result.format, "total_gpu_time_ns": result.total_gpu_time_ns, "device_gen": result.device_gen,
           "hotspots": rows, "notes": result.notes}
    first = result.hotspots[0].result if result.hotspots else None
    if first is not None and first.target_gen is not None:  # every row was matched as if for it
        out["target_gen"] = first.target_gen
    return out


def profile_text(result: Any) -> str:
    matched = sum(1 for h in result.hotspots if h.result.matches)
    lines = [f"{result.format}: {len(result.hotspots)} hotspot(s), {matched} with a matching skill."]
    for h in result.hotspots[:12]:
        r = h.result
        pct = f"{h.pct_gpu:.1f}%" if h.pct_gpu is not None else "?%"
        if r.matches:
            what = f"MATCH {r.matches[0].card_id}"
        elif r.abstained:
            what = "abstained: " + "; ".join(f"{a.card_id} needs {', '.join(a.missing)}" for a in r.abstained)
        else:
            what = "no skill"
        lines.append(f"#{h.rank} {pct} {clip(h.op_name, 60)}{f' {h.shape}' if h.shape else ''}: {what}")
    if len(result.hotspots) > 12:
        lines.append(f"... {len(result.hotspots) - 12} more in the structured content.")
    lines.append("Next: match_skill on a hotspot with everything you know, or get_recipe on a match.")
    return "\n".join(lines)


# ------------------------------------------------------------------------ catalog
def list_view(page: Any) -> dict[str, Any]:
    return {"skills": [{"id": s.id, "title": s.title, "operators": s.operators, "gens": s.gens, "dtypes": s.dtypes,
                        "scale_formats": s.scale_formats, "validation_status": s.validation_status,
                        "validation_date": s.validation_date, "evidence": evidence_view(s.reverification, 2)}
                       for s in page.skills],
            "total": page.total, "next_cursor": page.next_cursor, "catalog_problems": page.catalog_problems}


def list_text(page: Any) -> str:
    lines = [f"{len(page.skills)} of {page.total} card(s)" + (f"; next page: cursor={page.next_cursor!r}"
                                                               if page.next_cursor else "") + "."]
    for s in page.skills:
        ev = s.reverification
        best = figure_line(ev.figures[0]) if ev and ev.figures else "no figures"
        lines.append(f"- {s.id} [{s.validation_status}, {', '.join(s.gens)}]: {clip(s.title, 90)} ({best})")
    if page.catalog_problems:
        lines.append(f"{page.catalog_problems} card(s) left out for errors (skill-server lint).")
    return "\n".join(lines)


def recipe_view(view: Any) -> dict[str, Any]:
    sc = view.shape_class
    return {"card_id": view.card_id, "title": view.title, "mode": view.mode, "shape": view.shape,
            "section": view.section,
            "shape_class": {"id": sc.class_id, "selection": sc.selection, "tuned": sc.tuned,
                            "validated_shape": sc.validated_shape, "advice": sc.advice,
                            "caveats": sc.caveats} if sc is not None else None,
            "recipe": recipe_row(view.recipe, SimpleNamespace(gpu=None, date=view.last_verified[:10])),
            "sections_shown": list(view.summary) if view.mode == "summary" else None,
            "available_sections": view.available_sections, "artifacts": view.artifacts,
            "validation_status": view.validation_status, "last_verified": view.last_verified,
            "evidence": evidence_view(view.reverification)}


def recipe_text(view: Any) -> str:
    """The recipe prose itself is what the agent reads: it goes in the text block once."""
    head = [f"# {view.card_id}: {view.title}"]
    if view.recipe is not None and view.shape_class is not None:
        r, sc = view.recipe, view.shape_class
        head.append(f"Shape {view.shape} -> class {sc.class_id} ({sc.selection}{', tuned' if sc.tuned else ''}): "
                    f"{r.core}; config {r.config}; lever: {r.decisive_lever}"
                    + (f"; loses here: {'; '.join(r.loses_here)}" if r.loses_here else ""))
        if sc.advice:
            head.append(f"Advice: {sc.advice}")
    ev = evidence_text(view.reverification)
    if ev:
        head.append(ev)
    if view.mode == "summary":
        body = [f"## {name}\n{text}" for name, text in view.summary.items()]
        tail = f"More: section= one of {view.available_sections}, or full=true."
        return "\n".join(head) + "\n\n" + "\n\n".join(body) + "\n\n" + tail
    if view.mode == "section":
        return "\n".join(head) + f"\n\n## {view.section}\n{view.text}"
    return view.text or ""


# ------------------------------------------------------------------------ ledger
def history_view(h: Any, limit: int = 20) -> dict[str, Any]:
    return {
        "card_id": h.card_id,
        "evidence": evidence_view(h.reverification, 6),
        "results": [{"id": r.id, "level": r.evidence.level, "shape": r.shape_text, "verdict": r.verdict,
                     "speedup": r.speedup, "interval": r.interval, "baseline": r.baseline.name,
                     "candidate": r.candidate.name, "parity_passed": r.parity_passed, "platform": r.platform.key,
                     "date": r.recorded_at.isoformat(), "by": r.recorded_by, "source": r.source,
                     "report_id": r.evidence.report_digest[:16] if r.evidence.report_digest else None,
                     "note": r.evidence.note if r.evidence.level != "verified" else None}
                    for r in h.results[:limit]],
        "more_results": max(0, len(h.results) - limit),
        "reverifications": [{"id": v.id, "level": v.evidence.level, "platform": v.platform.key, "status": v.status,
                             "date": v.recorded_at.isoformat(), "reason": clip(v.reason, 300)}
                            for v in h.reverifications[:limit]],
    }


def history_text(h: Any) -> str:
    levels: dict[str, int] = {}
    for r in h.results:
        levels[r.evidence.level] = levels.get(r.evidence.level, 0) + 1
    counted = ", ".join(f"{n} {lvl}" for lvl, n in sorted(levels.items())) or "none"
    lines = [f"{h.card_id}: {len(h.results)} result(s) ({counted}); status {h.reverification.summary}."]
    for r in h.results[:8]:
        lines.append(f"#{r.id} {r.evidence.level} {r.shape_text} {r.verdict} {fmt_x(r.speedup)}{fmt_interval(r.interval)} "
                     f"{r.candidate.name} vs {r.baseline.name} on {r.platform.key}, {r.recorded_at:%Y-%m-%d} "
                     f"by {r.recorded_by}")
    lines += [f"caveat: {clip(c, 200)}" for c in h.reverification.caveats[:3]]
    return "\n".join(lines)


def receipt_text(r: Any) -> str:
    text = f"Recorded {len(r.ids)} result(s) for {', '.join(r.card_ids)} as {r.level} (ids {', '.join(map(str, r.ids))})"
    if r.report_id:
        text += f" from report {r.report_id} (report://{r.report_id})"
    text += "."
    if r.skipped:
        text += " Not recorded: " + "; ".join(r.skipped[:4]) + "."
    if r.note:
        text += f" {r.note}."
    return text


def receipt_view(r: Any) -> dict[str, Any]:
    return {"ids": r.ids, "card_ids": r.card_ids, "level": r.level, "report_id": r.report_id, "skipped": r.skipped,
            "note": r.note, "ledger": r.ledger}


# ------------------------------------------------------------------------ verifier
STAGE_ORDER = ("load", "integrity", "parity", "signature", "segment", "timing")


def verify_view(outcome: Any) -> dict[str, Any]:
    rep = outcome.report
    shapes = []
    for s in rep.shape_reports:
        ab = s.timing.ab if s.timing is not None else None
        shapes.append({
            "shape": s.shape, "hidden": s.hidden or None, "verdict": s.verdict,
            "speedup": ab.speedup if ab else None,
            "interval": [ab.ci_low, ab.ci_high] if ab and ab.ci_low and ab.ci_high else None,
            "noise_floor": s.timing.noise_floor if s.timing is not None else None,
            "stages": {n: st.status for n, st in s.stages.items()},
            "reasons": {n: clip(st.reason, 240) for n, st in s.stages.items() if st.status != "PASS"},
        })
    rec = outcome.recorded
    return {
        "verdict": rep.verdict, "complete": rep.complete, "speedup": rep.speedup,
        "interval": [rep.ci_low, rep.ci_high] if rep.ci_low and rep.ci_high else None,
        "noise_floor": rep.noise_floor, "card_id": rep.card_id, "candidate": rep.candidate, "baseline": rep.baseline,
        "stages": {n: st.status for n, st in rep.stages.items()},
        "shapes": shapes,
        "flags": [f"[{f.severity}] {f.code}: {clip(f.message, 200)}" for f in rep.flags if f.severity != "info"][:10],
        "sandbox": rep.provenance.sandbox,
        "report": f"report://{outcome.report_id}", "level": outcome.level,
        "recorded": {"ids": rec.ids, "level": rec.level, "skipped": rec.skipped} if rec is not None else None,
        "not_recorded": outcome.not_recorded, "seconds": round(rep.seconds, 1),
    }


def verify_text(outcome: Any) -> str:
    rep = outcome.report
    head = f"{rep.card_id or rep.problem}: {rep.candidate} vs {rep.baseline}: {rep.verdict}"
    if rep.speedup is not None:
        head += f", speedup {rep.speedup:.4g}{fmt_interval((rep.ci_low, rep.ci_high) if rep.ci_low else None)}"
        if rep.noise_floor is not None:
            head += f" (noise floor {rep.noise_floor:.3g})"
    lines = [head + "."]
    for s in rep.shape_reports:
        ab = s.timing.ab if s.timing is not None else None
        line = f"  {s.shape}: {s.verdict}"
        if ab is not None and ab.speedup is not None:
            line += f" {ab.speedup:.4g}x{fmt_interval((ab.ci_low, ab.ci_high) if ab.ci_low else None)}"
        bad = [f"{n} {st.status}: {clip(st.reason, 160)}" for n, st in s.stages.items() if st.status != "PASS"]
        lines.append(line + ("; " + "; ".join(bad[:3]) if bad else ""))
    flags = [f"{f.code}: {clip(f.message, 160)}" for f in rep.flags if f.severity == "fail"]
    if flags:
        lines.append("Flags: " + "; ".join(flags[:4]))
    if rep.provenance.sandbox:
        lines.append(f"Sandbox: {rep.provenance.sandbox}.")
    if outcome.recorded is not None:
        lines.append(receipt_text(outcome.recorded))
    else:
        lines.append(f"{outcome.not_recorded}; record it with record_result(report_id=\"{outcome.report_id}\") "
                     "if write tools are on.")
    lines.append(f"Full report: report://{outcome.report_id}")
    return "\n".join(lines)


def reverify_view(report: Any) -> dict[str, Any]:
    return {"platform": report.platform.key, "git_rev": report.git_rev, "recorded": report.ledger is not None,
            "cards": [{"card_id": c.card_id, "status": c.status, "reason": clip(c.reason, 400),
                       "stages": {s.name: s.status for s in c.stages},
                       "missing": [f"{p.name}: {clip(p.detail, 200)}" for p in c.prerequisites if p.met is not True],
                       "shapes": [compact(o.model_dump(mode="json")) for o in c.shapes],
                       "report": f"report://{c.report_id}" if c.report_id else None}
                      for c in report.cards]}


def reverify_text(report: Any) -> str:
    lines = [f"Re-verified {len(report.cards)} card(s) on {report.platform.key} "
             f"({'recorded' if report.ledger else 'not recorded'}):"]
    lines += [f"- {c.card_id}: {c.status}: {clip(c.reason, 200)}" for c in report.cards]
    return "\n".join(lines)

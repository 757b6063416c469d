"""Results-ledger commands: record, history, export, reverify, overlap, draft-card, drafts, promote.

Each is one call into ``SkillService``; ``--ledger PATH`` (else ``$SKILL_SERVER_LEDGER``,
else ``<project>/var/ledger.sqlite``) picks the store. Exit codes: 0 ok, 1 findings
(a drifted or failed re-verification, a duplicate card), 2 bad input.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from skill_server.cards.schema import _DuplicateKey, load_yaml
from skill_server.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    EXIT_OK,
    CommandArgs,
    emit_json,
    handles_errors,
    service_from,
)
from skill_server.cli.fleet import ReverifyArgs, run_reverify_on_fleet
from skill_server.ledger.models import default_recorder

MAX_INPUT_BYTES = 16 * 1024 * 1024
RECORDER = "who records (default: $SKILL_SERVER_USER or the login name, with the command)"


class RecordArgs(CommandArgs):
    """``record``: results (or a verifier report) into the ledger."""

    file: str = Field("-", description="JSON/YAML record(s), or a verifier report with from_report; - for stdin")
    from_report: bool = Field(False, description="file is a verifier report (as `verify --report` writes it)")
    card: str | None = Field(None, description="card id the report verifies (checked against it)")
    by: str | None = Field(None, description=RECORDER)
    as_json: bool = False


class HistoryArgs(CommandArgs):
    """``history``: a card's recorded results and re-verifications."""

    card: str
    shape: str | None = Field(None, description="MxNxK or name=value,...")
    platform: str | None = Field(None, description="rocm/gfx950, cuda, gfx950, MI355X, a device name, ...")
    source: Literal["verifier_report", "manual", "reverify"] | None = None
    limit: int = 50
    as_json: bool = False


class ExportArgs(CommandArgs):
    """``export``: a card's ledger history as a validation artifact."""

    card: str
    out: str | None = Field(None, description="artifact path inside the project")
    force: bool = Field(False, description="replace an earlier ledger export at that path")
    shape: str | None = None
    platform: str | None = None
    as_json: bool = False


class OverlapArgs(CommandArgs):
    """``overlap``: a draft's (or a card's) match space against the others'."""

    draft: str | None = Field(None, description="a draft SKILL.md, - for stdin")
    card: str | None = Field(None, description="an existing card instead")
    as_json: bool = False

    @model_validator(mode="after")
    def _one_subject(self) -> OverlapArgs:
        if (self.draft is None) == (self.card is None):
            raise ValueError("give a draft SKILL.md or --card ID (one of them)")
        return self


class DraftCardArgs(CommandArgs):
    """``draft-card``: ledger records -> a card skeleton."""

    from_ledger: bool = Field(description="draft from ledger records (the only source)")
    new_id: str = Field(description="the new card's id (also its folder name)")
    card: str | None = Field(None, description="source card whose records to use")
    record: list[int] | None = Field(None, description="ledger record ids")
    shape: str | None = None
    platform: str | None = None
    gens: list[str] | None = Field(None, description="generations the card claims (default: the records')")
    title: str | None = None
    as_json: bool = False


class DraftsArgs(CommandArgs):
    """``drafts``: drafted cards and what blocks their promotion."""

    as_json: bool = False


class PromoteArgs(CommandArgs):
    """``promote``: a draft into the skills folder."""

    draft_id: str
    as_json: bool = False


def _ledger_arg(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: absent here, a global --ledger (given before the command) is not overwritten
    p.add_argument("--ledger", metavar="PATH", default=argparse.SUPPRESS,
                   help="ledger file (default: $SKILL_SERVER_LEDGER, else <project>/var/ledger.sqlite)")
    p.add_argument("--json", action="store_true", dest="as_json", help="machine-readable output")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("record", help="store A/B results in the ledger (validated; all or nothing)")
    p.add_argument("file", nargs="?", default="-",
                   help="JSON/YAML record or list of records (- for stdin); with --from-report, a verifier report JSON")
    p.add_argument("--from-report", action="store_true",
                   help="FILE is a verifier report (as `verify --report` writes it): verified when its signature "
                        "checks, else reported")
    p.add_argument("--card", help="card id the report verifies (checked against the report; optional)")
    p.add_argument("--by", help="who records (default: $SKILL_SERVER_USER or the login name) when a record omits recorded_by")
    _ledger_arg(p)

    p = sub.add_parser("history", help="a card's recorded results and re-verifications, newest first")
    p.add_argument("card")
    p.add_argument("--shape", help="MxNxK or name=value,...")
    p.add_argument("--platform", help="rocm/gfx950, cuda, gfx950, MI355X, a device name, ...")
    p.add_argument("--source", choices=["verifier_report", "manual", "reverify"])
    p.add_argument("--limit", type=int, default=50)
    _ledger_arg(p)

    p = sub.add_parser("export", help="write a card's ledger history as a validation artifact (ledger_export)")
    p.add_argument("card")
    p.add_argument("--out", help="artifact path inside the project (default: skills/<card>/validation_ledger.yaml)")
    p.add_argument("--force", action="store_true", help="replace an earlier ledger export at that path")
    p.add_argument("--shape")
    p.add_argument("--platform")
    _ledger_arg(p)

    p = sub.add_parser("reverify", help="re-check cards on this box (prerequisites, gfx950 gates, verifier, claims)")
    p.add_argument("--card", help="one card (default: all)")
    p.add_argument("--no-gates", action="store_true", help="skip the static gfx950 gates and the gfx950-emulated "
                   "parity run (compiles)")
    p.add_argument("--no-verifier", action="store_true", help="skip the verifier even where a GPU is present")
    p.add_argument("--no-record", action="store_true", help="do not write the statuses to the ledger")
    p.add_argument("--by", help="who records (default: $SKILL_SERVER_USER or the login name)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    fleet = p.add_argument_group("fleet (Ray; docs/fleet.md)")
    fleet.add_argument("--ray", metavar="HOST:PORT", help="run one task per (card, platform) on the Ray cluster at "
                       "this head address instead of this box; outcomes are recorded here")
    fleet.add_argument("--platform", action="append", default=None, help="with --ray: only this generation / "
                       "platform key (repeatable; default: every platform the live nodes advertise)")
    fleet.add_argument("--cpu-smoke", action="store_true", help="with --ray: CPU problems (the CPU arms, the smallest "
                       "smoke shape, quick options): checks the fleet's plumbing, not the kernels' speed")
    fleet.add_argument("--task-timeout", type=float, default=None, metavar="S", help="with --ray: a task running "
                       "longer is cancelled and recorded as not re-verified (default 4 h)")
    _ledger_arg(p)

    p = sub.add_parser("overlap", help="cards whose match space intersects a draft's or a card's")
    p.add_argument("draft", nargs="?", help="a draft SKILL.md (- for stdin)")
    p.add_argument("--card", help="check an existing card against the others instead")
    _ledger_arg(p)

    p = sub.add_parser("draft-card", help="turn ledger records into a card skeleton (experimental, TODO prose)")
    p.add_argument("--from-ledger", action="store_true", required=True, help="draft from ledger records (the only source)")
    p.add_argument("--id", required=True, dest="new_id", help="the new card's id (also its folder name)")
    p.add_argument("--card", help="source card whose records to use")
    p.add_argument("--record", type=int, action="append", default=None, metavar="ID", help="ledger record id (repeatable)")
    p.add_argument("--shape")
    p.add_argument("--platform")
    p.add_argument("--gens", action="append", default=None, help="generations the card claims (default: the records')")
    p.add_argument("--title")
    _ledger_arg(p)

    p = sub.add_parser("drafts", help="list drafted cards (not served) with what blocks their promotion")
    p.add_argument("--json", action="store_true", dest="as_json")

    p = sub.add_parser("promote", help="move a draft into the skills folder once it passes lint with no TODO left")
    p.add_argument("draft_id")
    p.add_argument("--json", action="store_true", dest="as_json")


def _service(args: CommandArgs):
    return service_from(args)


def _who(explicit: str | None) -> str:

    return explicit or default_recorder()


def _read_input(name: str) -> str:
    if name == "-":
        text = sys.stdin.read(MAX_INPUT_BYTES + 1)
    else:
        path = Path(name)
        if not path.is_file():
            raise FileNotFoundError(f"{name}: no such file")
        if path.stat().st_size > MAX_INPUT_BYTES:
            raise ValueError(f"{name}: larger than {MAX_INPUT_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    if len(text) > MAX_INPUT_BYTES:
        raise ValueError(f"input larger than {MAX_INPUT_BYTES} bytes")
    return text


def _load_data(name: str):
    import yaml


    try:
        return load_yaml(_read_input(name))
    except _DuplicateKey as exc:
        raise ValueError(f"{name}: line {exc.line + 1}: duplicate key {exc.key!r}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ValueError(f"{name}:{where}: not valid JSON/YAML: {getattr(exc, 'problem', exc)}") from None


@handles_errors
def cmd_record(args: RecordArgs) -> int:
    svc = _service(args)
    who = _who(args.by)
    if args.from_report:
        receipt = svc.record_result(report=_read_input(args.file), card_id=args.card, recorded_by=who)
        for line in receipt.skipped:
            print(f"note: not recorded: {line}", file=sys.stderr)
    else:
        data = _load_data(args.file)
        records = data if isinstance(data, list) else [data]
        for r in records:
            if isinstance(r, dict) and "recorded_by" not in r:
                r["recorded_by"] = who
        receipt = svc.record_result(records)
    if args.as_json:
        emit_json(receipt)
    else:
        print(f"recorded {len(receipt.ids)} result(s) as {receipt.level} (ids {', '.join(map(str, receipt.ids))}) "
              f"in {receipt.ledger}" + (f"; {receipt.note}" if receipt.note else ""))
    return EXIT_OK


@handles_errors
def cmd_history(args: HistoryArgs) -> int:
    h = _service(args).get_validation_history(args.card, shape=args.shape, platform=args.platform,
                                              source=args.source, limit=args.limit)
    if args.as_json:
        emit_json(h)
        return EXIT_OK
    print(f"{h.card_id}: {h.reverification.summary}  (ledger {h.ledger})")
    for c in h.reverification.caveats:
        print(f"  caveat: {c}")
    if h.reverifications:
        print("re-verifications:")
        for r in h.reverifications:
            print(f"  #{r.id} {r.recorded_at:%Y-%m-%d %H:%M} {r.platform.key:<16} {r.status:<21} {r.reason[:100]}")
    if h.results:
        print("results:")
        for r in h.results:
            sp = f"{r.speedup:.4g}x" if r.speedup else "-"
            if r.interval:
                sp += f" [{r.interval[0]:.4g},{r.interval[1]:.4g}]"
            print(f"  #{r.id} {r.recorded_at:%Y-%m-%d} {r.evidence.level:<8} {r.shape_text:<22} {r.verdict:<13} {sp:<24} "
                  f"{r.candidate.name} vs {r.baseline.name}  {r.platform.key}  by {r.recorded_by} ({r.source})")
    if not h.results and not h.reverifications:
        print("no records")
    return EXIT_OK


@handles_errors
def cmd_export(args: ExportArgs) -> int:
    res = _service(args).export_validation(args.card, path=args.out, force=args.force, shape=args.shape,
                                           platform=args.platform)
    if args.as_json:
        emit_json(res)
    else:
        print(f"{'replaced' if res.replaced else 'wrote'} {res.path} ({res.measurements} measurement(s))")
    return EXIT_OK


@handles_errors
def cmd_reverify(args: ReverifyArgs) -> int:
    if args.ray:
        return run_reverify_on_fleet(args)
    svc = _service(args)

    def progress(ev) -> None:
        if not args.quiet:
            print(f"[{ev.index}/{ev.total}] {ev.card_id}: {ev.stage}: {ev.message}", file=sys.stderr, flush=True)

    report = svc.reverify(card_id=args.card, progress=progress, gates=not args.no_gates,
                          verifier=not args.no_verifier, record=not args.no_record, recorded_by=args.by)
    if args.as_json:
        emit_json(report)
    else:
        print(f"platform {report.platform.key} ({report.platform.device}); git {report.git_rev or 'unknown'}")
        print(report.table())
        for c in report.cards:
            for p in c.prerequisites:
                if p.met is not True:
                    print(f"  {c.card_id}: prerequisite {p.name}: {p.detail}")
        if report.ledger:
            print(f"recorded in {report.ledger}")
    bad = [c for c in report.cards if c.status in ("FAILED", "DRIFTED")]
    return EXIT_FINDINGS if bad else EXIT_OK


@handles_errors
def cmd_overlap(args: OverlapArgs) -> int:
    svc = _service(args)
    report = svc.check_overlap(card_id=args.card) if args.card else svc.check_overlap(draft_text=_read_input(args.draft))
    if args.as_json:
        emit_json(report)
    else:
        print(f"{report.subject}: compared with {report.compared} card(s); "
              f"{len(report.duplicates)} duplicate(s), {len(report.overlaps)} overlap(s)")
        for f in report.findings:
            print(f"{f.kind.upper():9} {f.card_id}" + (f"  (supersedes: {f.supersedes})" if f.supersedes else ""))
            if f.shared_hotspot_names:
                print(f"    shared hotspot names: {', '.join(f.shared_hotspot_names[:5])}")
            for line in f.overlaps:
                print(f"    shares   {line}")
            for line in f.separated_by:
                print(f"    separate {line}")
        for rv in report.reviews:
            print(f"REVIEW {rv.verdict} on {rv.card_id} ({rv.source}): {rv.says}")
        for n in report.notes:
            print(f"note: {n}")
    return EXIT_FINDINGS if report.duplicates else EXIT_OK


@handles_errors
def cmd_draft_card(args: DraftCardArgs) -> int:
    res = _service(args).draft_card(args.new_id, from_card=args.card, record_ids=args.record, shape=args.shape,
                                    platform=args.platform, gens=args.gens, title=args.title)
    if args.as_json:
        emit_json(res)
        return EXIT_OK
    print(f"wrote {res.path} and {res.artifact} from record(s) {', '.join(map(str, res.records))} "
          f"(source card {res.source_card}; gens {', '.join(res.gens)}; floor {res.speedup_floor}x)")
    print(f"{res.todo_count} TODO placeholder(s) for a person to fill in; status experimental")
    print(res.promote)
    for p in res.problems:
        print(f"  lint: {p}")
    ov = res.overlap
    if ov.get("duplicates"):
        print(f"  duplicates in match space: {', '.join(ov['duplicates'])} (lint will reject it): narrow the match")
    if ov.get("overlaps"):
        print(f"  overlaps: {', '.join(ov['overlaps'])}")
    return EXIT_FINDINGS if res.problems or ov.get("duplicates") else EXIT_OK


@handles_errors
def cmd_drafts(args: DraftsArgs) -> int:
    drafts = _service(args).list_drafts()
    if args.as_json:
        emit_json(drafts)
        return EXIT_OK
    if not drafts:
        print("no drafts")
    for d in drafts:
        state = "promotable" if d.promotable else f"{len(d.errors)} error(s), {d.todo_count} TODO(s)"
        print(f"{d.card_id}: {state}  ({d.path})")
        for e in d.errors:
            print(f"  error: {e}")
    return EXIT_OK


@handles_errors
def cmd_promote(args: PromoteArgs) -> int:
    res = _service(args).promote_draft(args.draft_id)
    if args.as_json:
        emit_json(res)
    else:
        print(f"promoted {res.card_id}: {res.path} (now served)")
    return EXIT_OK


__all__ = ["register", "EXIT_BAD_INPUT"]

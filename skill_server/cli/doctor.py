"""``skill-server doctor``: check what a first run on this box needs (exit 0 whatever it finds)."""
from __future__ import annotations

import argparse
import sys

from skill_server.cli.common import EXIT_BAD_INPUT, EXIT_OK, emit_json
from skill_server.doctor.plan import CHECKS
from skill_server.doctor.runner import DEFAULT_BUDGET_S, run_doctor


def register(sub: argparse._SubParsersAction) -> None:

    p = sub.add_parser("doctor", help="check torch, the GPU, toolchain, timer floor, cache flush, profiler names and "
                                      "card prerequisites on this box; exit 0 with the summary")
    p.add_argument("--check", action="append", dest="checks", metavar="ID", default=None,
                   help=f"run only this check (repeatable; its needs run too): {', '.join(c.id for c in CHECKS)}")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="SECONDS",
                   help=f"time for the whole run (default {DEFAULT_BUDGET_S:.0f})")
    p.add_argument("--check-timeout", type=float, default=None, metavar="SECONDS",
                   help="cap every check's own time limit")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=cmd_doctor)


def cmd_doctor(args) -> int:

    for name in ("budget", "check_timeout"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            print(f"skill-server doctor: error: --{name.replace('_', '-')} must be a positive number of seconds, "
                  f"got {value}", file=sys.stderr)
            return EXIT_BAD_INPUT
    try:
        report = run_doctor(args.checks, budget_s=args.budget, check_timeout_s=args.check_timeout,
                            skills_dir=args.skills_dir)
    except ValueError as exc:
        print(f"skill-server doctor: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        emit_json(report)
    else:
        print(report.text())
    return EXIT_OK

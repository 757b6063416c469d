"""``skill-server doctor``: check what a first run on this box needs (exit 0 whatever it finds)."""
from __future__ import annotations

import argparse
import sys

from pydantic import Field, field_validator

from skill_server.cli.common import EXIT_BAD_INPUT, EXIT_OK, CommandArgs, emit_json
from skill_server.doctor.plan import CHECKS
from skill_server.doctor.runner import DEFAULT_BUDGET_S, run_doctor


class DoctorArgs(CommandArgs):
    """``doctor``: which checks, and how long they may take."""

    checks: list[str] | None = Field(None, description="run only these checks (and what they need)")
    budget: float = Field(DEFAULT_BUDGET_S, description="seconds for the whole run")
    check_timeout: float | None = Field(None, description="seconds: caps every check's own time limit")
    as_json: bool = Field(False, description="print the report as JSON")

    @field_validator("budget", "check_timeout")
    @classmethod
    def _positive(cls, value: float | None, info) -> float | None:  # noqa: ANN001 - ValidationInfo
        if value is not None and not value > 0:
            raise ValueError(f"--{info.field_name.replace('_', '-')} must be a positive number of seconds, got {value}")
        return value


def register(sub: argparse._SubParsersAction) -> None:

    p = sub.add_parser("doctor", help="check torch, the GPU, toolchain, timer floor, cache flush, profiler names and "
                                      "card prerequisites on this box; exit 0 with the summary")
    p.add_argument("--check", action="append", dest="checks", metavar="ID", default=None,
                   help=f"run only this check (repeatable; its needs run too): {', '.join(c.id for c in CHECKS)}")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="SECONDS",
                   help=f"time for the whole run (default {DEFAULT_BUDGET_S:.0f})")
    p.add_argument("--check-timeout", type=float, default=None, metavar="SECONDS",
                   help="cap every check's own time limit")
    p.add_argument("--json", action="store_true", dest="as_json", help="print the report as JSON")


def cmd_doctor(args: DoctorArgs) -> int:
    try:
        report = run_doctor(args.checks, budget_s=args.budget, check_timeout_s=args.check_timeout,
                            skills_dir=str(args.skills_dir) if args.skills_dir else None)
    except ValueError as exc:
        print(f"skill-server doctor: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.as_json:
        emit_json(report)
    else:
        print(report.text())
    return EXIT_OK

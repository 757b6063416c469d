"""``skill-server`` command line. Each command group lives in its own module of this package
with a ``register(subparsers)`` function and one pydantic model of each command's arguments;
this file assembles the parser, builds the command's typed arguments from what it parsed
(defaults that are settings come from ``skill_server.settings``), calls the command's handler
and turns errors into clear messages and exit codes (0 ok, 1 findings/failure, 2 bad input)."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from skill_server.cli import catalog, doctor, fleet, ledger, ledger_admin, serve, verify
from skill_server.cli.common import EXIT_BAD_INPUT, CommandArgs, describe_argument_error
from skill_server.cli.verify_support import VerifyArgs
from skill_server.settings import SettingsError, settings

REGISTRARS = (catalog, serve, ledger, ledger_admin, fleet, verify, doctor)

# command -> (its arguments' model, its handler); every subparser has one entry (tests check)
COMMANDS: dict[str, tuple[type[CommandArgs], Callable[[Any], int]]] = {
    "match": (catalog.MatchArgs, catalog.cmd_match),
    "match-profile": (catalog.MatchProfileArgs, catalog.cmd_match_profile),
    "list": (catalog.ListArgs, catalog.cmd_list),
    "show": (catalog.ShowArgs, catalog.cmd_show),
    "lint": (catalog.LintArgs, catalog.cmd_lint),
    "serve": (serve.ServeArgs, serve.cmd_serve),
    "record": (ledger.RecordArgs, ledger.cmd_record),
    "history": (ledger.HistoryArgs, ledger.cmd_history),
    "export": (ledger.ExportArgs, ledger.cmd_export),
    "reverify": (fleet.ReverifyArgs, ledger.cmd_reverify),
    "overlap": (ledger.OverlapArgs, ledger.cmd_overlap),
    "draft-card": (ledger.DraftCardArgs, ledger.cmd_draft_card),
    "drafts": (ledger.DraftsArgs, ledger.cmd_drafts),
    "promote": (ledger.PromoteArgs, ledger.cmd_promote),
    "ledger-copy": (ledger_admin.LedgerCopyArgs, ledger_admin.cmd_ledger_copy),
    "ledger-key": (ledger_admin.LedgerKeyArgs, ledger_admin.cmd_ledger_key),
    "fleet-node": (fleet.FleetNodeArgs, fleet.cmd_fleet_node),
    "check-kernel": (verify.CheckKernelArgs, verify.cmd_check_kernel),
    "verify": (VerifyArgs, verify.cmd_verify),
    "doctor": (doctor.DoctorArgs, doctor.cmd_doctor),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="skill-server",
        description="Expert-skill knowledge server for GPU kernel hotspots, with executable verifiers.",
    )
    parser.add_argument("--skills-dir", default=None, help="folder of skill cards (default: $SKILL_SERVER_SKILLS_DIR, "
                        "else the project's skills/)")
    parser.add_argument("--ledger", default=None,
                        help="results ledger: a file, or a postgresql://user@host/db URL (default: $SKILL_SERVER_LEDGER, "
                        "else <project>/var/ledger.sqlite)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in REGISTRARS:
        module.register(sub)
    return parser


def command_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Each command's own parser (argparse keeps them on its subparsers action)."""
    for action in parser._actions:  # noqa: SLF001 - argparse has no public way to its subparsers
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return dict(action.choices)
    return {}


def option_names(parser: argparse.ArgumentParser, command_parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each argument's destination -> how it is typed (``--shape``, or the positional's name)."""
    names = {}
    for action in [*parser._actions, *command_parser._actions]:  # noqa: SLF001
        long = [o for o in action.option_strings if o.startswith("--")] or action.option_strings
        names[action.dest] = long[0] if long else action.dest
    return names


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    model, handler = COMMANDS[ns.command]
    try:
        try:
            args = model.from_namespace(ns, settings())
        except ValidationError as exc:  # a value without its form: one line naming the option
            flags = option_names(parser, command_parsers(parser)[ns.command])
            print(f"skill-server {ns.command}: error: {describe_argument_error(exc, flags)}", file=sys.stderr)
            return EXIT_BAD_INPUT
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SettingsError as exc:  # a SKILL_SERVER_* variable that does not parse
        print(f"skill-server: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

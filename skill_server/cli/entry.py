"""``skill-server`` command line. Each command group lives in its own ``cli_*`` module
with a ``register(subparsers)`` function; this file only assembles them and turns
errors into clear messages and exit codes (0 ok, 1 findings/failure, 2 bad input)."""
from __future__ import annotations

import argparse
import importlib
import sys

from skill_server.settings import SettingsError

COMMAND_MODULES = (
    "skill_server.cli.catalog",
    "skill_server.cli.serve",
    "skill_server.cli.ledger",
    "skill_server.cli.ledger_admin",
    "skill_server.cli.fleet",
    "skill_server.cli.verify",
    "skill_server.cli.doctor",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="skill-server",
        description="Expert-skill knowledge server for GPU kernel hotspots, with executable verifiers.",
    )
    parser.add_argument("--skills-dir", default=None, help="folder of skill cards (default: the project's skills/)")
    parser.add_argument("--ledger", default=None,
                        help="results ledger: a file, or a postgresql://user@host/db URL (default: $SKILL_SERVER_LEDGER, "
                        "else <project>/var/ledger.sqlite)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SettingsError as exc:  # a SKILL_SERVER_* variable that does not parse
        print(f"skill-server: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

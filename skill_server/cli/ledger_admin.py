"""Ledger administration: ``ledger-copy`` (between backends) and ``ledger-key`` (the
signing key a shared ledger needs). Exit codes: 0 ok, 2 bad input or a refused request."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import Field

from skill_server.cli.common import EXIT_BAD_INPUT, EXIT_OK, CommandArgs, emit_json, handles_errors, service_from
from skill_server.ledger.backend_copy import copy_ledger
from skill_server.ledger.postgres import is_postgres_url
from skill_server.ledger.results import open_store
from skill_server.ledger.signing import create_key, read_key


class LedgerCopyArgs(CommandArgs):
    """``ledger-copy``: every row of one ledger into another, checked."""

    source: str = Field(description="ledger file or postgresql://user@host/db URL")
    target: str = Field(description="ledger file or postgresql://user@host/db URL (created / migrated when new)")
    replace: bool = Field(False, description="delete the target's records first")
    as_json: bool = False


class LedgerKeyArgs(CommandArgs):
    """``ledger-key``: the signing key, shown, created or registered."""

    create: Path | None = Field(None, description="write a new key file (mode 0600) here; refused when it exists")
    register_key: bool = Field(False, description="register this server's key with the ledger")
    as_json: bool = False


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ledger-copy", help="copy a ledger between backends (SQLite file <-> postgresql:// URL), checked",
                       description="Copy every row of the SOURCE ledger into TARGET in one transaction, then read it "
                       "back and compare each table (rows and sha256). Signed rows stay verified on servers holding "
                       "the same signing key. Passwords in URLs are never printed.")
    p.add_argument("source", help="ledger file or postgresql://user@host/db URL")
    p.add_argument("target", help="ledger file or postgresql://user@host/db URL (created / migrated when new)")
    p.add_argument("--replace", action="store_true", help="delete the target's records first (otherwise a target "
                   "holding records is refused)")
    p.add_argument("--json", action="store_true", dest="as_json")

    p = sub.add_parser("ledger-key", help="the signing key: show it, create a fleet key, register it with the ledger",
                       description="Without options: which key this server signs with (fingerprint only, never the "
                       "key) and which keys the ledger knows. A shared (postgresql://) ledger needs one key on every "
                       "server: create it once with --create and install the file everywhere.")
    p.add_argument("--create", metavar="PATH", type=Path, help="write a new key file (mode 0600) at PATH; refused "
                   "when PATH exists")
    p.add_argument("--register", action="store_true", dest="register_key", help="register this server's key with the ledger (a "
                   "deliberate key rotation on a shared ledger)")
    p.add_argument("--ledger", metavar="PATH_OR_URL", default=argparse.SUPPRESS, help="the ledger (default: "
                   "$SKILL_SERVER_LEDGER, else <project>/var/ledger.sqlite)")
    p.add_argument("--json", action="store_true", dest="as_json")


@handles_errors
def cmd_ledger_copy(args: LedgerCopyArgs) -> int:
    source, target = open_store(_location(args.source)), open_store(_location(args.target))
    result = copy_ledger(source, target, replace=args.replace)
    if args.as_json:
        emit_json(result)
    else:
        print("\n".join(result.lines()))
    return EXIT_OK


def _location(text: str) -> str | Path:
    return text if is_postgres_url(text) else Path(text).expanduser().resolve()


@handles_errors
def cmd_ledger_key(args: LedgerKeyArgs) -> int:
    if args.create is not None:
        path = args.create.expanduser().resolve()
        if path.exists():
            raise ValueError(f"{path} exists: a key is never replaced; choose another path or move it away first")
        key = create_key(path)
        print(f"created signing key {path} (fingerprint {key.key_id}); install this same file, mode 0600, on every "
              "server writing to the shared ledger and point $SKILL_SERVER_KEY at it")
        return EXIT_OK

    ledger = service_from(args).ledger
    if args.register_key:
        key_id = ledger.register_key()
        print(f"registered key {key_id} ({ledger.keys.path}) with {ledger.location}")
        return EXIT_OK
    try:
        key = read_key(ledger.keys.path)
        problem = None if key is not None else ledger.keys.problem() or "no key yet (created on the first write)"
    except Exception as exc:  # noqa: BLE001 - KeyUnavailable: shown, never a traceback
        key, problem = None, str(exc)
    registered = ledger.store.key_ids()
    view = {"ledger": ledger.location, "shared": bool(getattr(ledger.store, "shared", False)),
            "key_path": str(ledger.keys.path), "key_id": key.key_id if key else None, "problem": problem,
            "registered": registered, "matches": bool(key and (not registered or key.key_id in registered))}
    if args.as_json:
        emit_json(view)
    else:
        print(f"ledger {view['ledger']} ({'shared' if view['shared'] else 'one server'})")
        print(f"this server's key: {view['key_path']} " + (f"fingerprint {key.key_id}" if key else f"({problem})"))
        print(f"keys registered with the ledger: {', '.join(registered) or 'none yet'}")
        if key and registered and key.key_id not in registered:
            print("this server's key is not registered: its verified records read as reported on the other servers",
                  file=sys.stderr)
            return EXIT_BAD_INPUT
    return EXIT_OK

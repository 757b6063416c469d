"""Helpers shared by the ``cli_*`` command modules: service construction, JSON output,
error reporting."""
from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from skill_server.service.facade import ServiceError, SkillService

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT = 0, 1, 2


def service_from(args: Any):

    # --ledger: a global option (when cli.py declares it) or a command's own
    return SkillService(args.skills_dir, check_interval=3600.0, ledger_path=getattr(args, "ledger", None))


def emit_json(model: BaseModel | list | dict) -> None:
    if isinstance(model, BaseModel):
        text = model.model_dump_json(indent=2)
    else:
        text = json.dumps(model, indent=2, default=lambda o: o.model_dump(mode="json") if isinstance(o, BaseModel) else str(o))
    sys.stdout.write(text + "\n")


def handles_errors(fn: Callable[[Any], int]) -> Callable[[Any], int]:
    """Turn service / validation errors into one clear line on stderr and exit 2."""

    @functools.wraps(fn)
    def wrapper(args: Any) -> int:

        try:
            return fn(args)
        except (ServiceError, ValueError, KeyError, FileNotFoundError) as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            if isinstance(exc, ValidationError):
                msg = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            print(f"skill-server {args.command}: error: {msg}", file=sys.stderr)
            return EXIT_BAD_INPUT

    return wrapper

"""Helpers shared by the command modules: the typed arguments every command extends,
service construction, JSON output, error reporting."""
from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skill_server.service.facade import ServiceError, SkillService
from skill_server.settings import Settings

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT = 0, 1, 2
SETTING = "setting"  # a field's json_schema_extra key: the Settings field that supplies its default


def from_setting(name: str, description: str) -> Any:
    """A field whose value, when the command line leaves it out, is the setting ``name``
    (``skill_server.settings.Settings``: a ``SKILL_SERVER_*`` variable)."""
    return Field(None, description=description, json_schema_extra={SETTING: name})


class CommandArgs(BaseModel):
    """The arguments of one command, typed. Each command's model extends this with its own
    options; ``skill_server.cli.entry`` builds it from the parsed command line
    (:meth:`from_namespace`) and hands it to the command's handler."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str = Field(description="the command's name, as typed")
    skills_dir: Path | None = from_setting("skills_dir", "folder of skill cards (default: the project's skills/)")
    ledger: str | None = from_setting("ledger", "ledger file or postgresql:// URL (default: <project>/var/ledger.sqlite)")

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace, env: Settings) -> Self:
        """The parsed command line, with the settings' values where it left a setting out.
        Raises ``ValidationError`` for a value that does not have its form."""
        data = dict(vars(ns))
        for name, info in cls.model_fields.items():
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            if SETTING in extra and data.get(name) is None:
                data[name] = getattr(env, str(extra[SETTING]))
        return cls.model_validate(cls.prepare(ns, data))

    @classmethod
    def prepare(cls, ns: argparse.Namespace, data: dict[str, Any]) -> dict[str, Any]:
        """A command's hook between the command line and validation (default: unchanged)."""
        return data


def describe_argument_error(exc: ValidationError, flags: dict[str, str]) -> str:
    """One line for what did not validate, naming each option as it is typed (``--shape``)."""
    parts = []
    for err in exc.errors():
        field = str(err["loc"][0]) if err.get("loc") else ""
        msg = str(err["ctx"]["error"]) if err["type"] == "value_error" and "error" in err.get("ctx", {}) else err["msg"]
        named = msg.startswith("-") or not field  # a validator's message may name its option itself
        parts.append(msg if named else f"{flags.get(field, field)}: {msg}")
    return "; ".join(parts)


def service_from(args: CommandArgs) -> SkillService:
    return SkillService(args.skills_dir, check_interval=3600.0, ledger_path=args.ledger)


def emit_json(model: BaseModel | list | dict) -> None:
    if isinstance(model, BaseModel):
        text = model.model_dump_json(indent=2)
    else:
        text = json.dumps(model, indent=2, default=lambda o: o.model_dump(mode="json") if isinstance(o, BaseModel) else str(o))
    sys.stdout.write(text + "\n")


A = TypeVar("A", bound=CommandArgs)


def handles_errors(fn: Callable[[A], int]) -> Callable[[A], int]:
    """Turn service / validation errors into one clear line on stderr and exit 2."""

    @functools.wraps(fn)
    def wrapper(args: A) -> int:

        try:
            return fn(args)
        except (ServiceError, ValueError, KeyError, FileNotFoundError) as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            if isinstance(exc, ValidationError):
                msg = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            print(f"skill-server {args.command}: error: {msg}", file=sys.stderr)
            return EXIT_BAD_INPUT

    return wrapper

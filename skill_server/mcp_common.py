"""Helpers shared by the ``mcp_*`` adapter modules: error translation and tool
annotations. Adapters hold no behaviour; these only shape what the client sees."""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import ValidationError

F = TypeVar("F", bound=Callable[..., Any])

# A read-only tool that looks only at the local catalog.
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def describe_validation_error(exc: ValidationError, prefix: str = "") -> str:
    """One line per problem: which field, what was expected, what came in."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in (*((prefix,) if prefix else ()), *err.get("loc", ())))
        kind = err.get("type", "")
        if kind == "missing":
            text = "required, missing"
        elif kind == "extra_forbidden":
            text = "unknown field (check the spelling against the tool's inputSchema)"
        else:
            shown = repr(err.get("input"))
            text = f"{err.get('msg', 'invalid')} (got {shown[:80]}{'...' if len(shown) > 80 else ''})"
        parts.append(f"{loc or 'arguments'}: {text}")
    return "; ".join(parts)


def tool_errors(fn: F) -> F:
    """Turn the service's anticipated errors into ``ToolError`` so the agent reads the
    actionable message (the SDK hides the text of any other exception). Works on plain
    and ``async`` tool functions."""
    from .card_files import CardFileError
    from .service import ServiceError

    def translate(exc: Exception) -> ToolError:
        if isinstance(exc, ValidationError):
            return ToolError(describe_validation_error(exc))
        return ToolError(str(exc))

    anticipated = (ServiceError, CardFileError, ValidationError)
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except anticipated as exc:
                raise translate(exc) from None

        return async_wrapper  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except anticipated as exc:
            raise translate(exc) from None

    return wrapper  # type: ignore[return-value]


def check_profile_path(path: str, roots: tuple[Path, ...] | None) -> None:
    """Transport policy for ``match_profile(path=...)``: the operator may confine the
    files a client can make the server read (``serve --profile-root``)."""
    if roots is None:
        return
    if not roots:
        raise ToolError("this server does not read profile files by path (remote clients): "
                        "pass the file's text as content instead")
    real = Path(path).expanduser().resolve()
    if not any(real.is_relative_to(r.resolve()) for r in roots):
        raise ToolError(f"path {path!r} is outside the folders this server reads profiles from "
                        f"({', '.join(str(r) for r in roots)}): move the file there or pass its text as content")

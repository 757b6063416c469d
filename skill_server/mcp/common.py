"""Helpers shared by the ``mcp_*`` adapter modules: error translation, bounded error
text, tool annotations and the worker threads CPU-heavy calls run on. Adapters hold no
behaviour; these only shape what the client sees and where a call runs."""
from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import ValidationError

from skill_server.cards.card_files import CardFileError
from skill_server.policy.client_policy import ClientInputError
from skill_server.policy.confinement import ConfinementError
from skill_server.service.facade import ServiceError

F = TypeVar("F", bound=Callable[..., Any])

MAX_ERROR_CHARS = 2000
_LONG_LITERAL = re.compile(r"'[^'\n]{120,}'|\"[^\"\n]{120,}\"")

# CPU-bound calls run on at most this many worker threads at once. Few on purpose: every
# thread that computes competes with the event loop for the GIL, and with many of them
# the loop (which answers everyone else) waits behind all of them.
CPU_THREADS = 2
_cpu_limiter: anyio.CapacityLimiter | None = None


async def run_off_loop(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` on a worker thread of the CPU pool, so the event loop keeps
    answering other clients while it computes."""
    global _cpu_limiter
    if _cpu_limiter is None:
        _cpu_limiter = anyio.CapacityLimiter(CPU_THREADS)
    return await anyio.to_thread.run_sync(fn, *args, limiter=_cpu_limiter)


def bounded(message: str, limit: int = MAX_ERROR_CHARS) -> str:
    """An error text that never echoes a large input whole: each long quoted value is cut
    to its start and length, and the whole text to ``limit`` characters."""
    if len(message) > 200:
        message = _LONG_LITERAL.sub(lambda m: f"{m.group(0)[:61]}...{m.group(0)[0]} ({len(m.group(0)) - 2} characters)",
                                    message)
    if len(message) > limit:
        message = message[: limit - 40] + f" [... {len(message) - limit + 40} more characters]"
    return message


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
            text = f"{bounded(err.get('msg', 'invalid'), 400)} (got {shown[:80]}{'...' if len(shown) > 80 else ''})"
        parts.append(f"{bounded(loc, 200) or 'arguments'}: {text}")
    return bounded("; ".join(parts))


def tool_errors(fn: F) -> F:
    """Turn the service's anticipated errors into ``ToolError`` so the agent reads the
    actionable message (the SDK hides the text of any other exception). Works on plain
    and ``async`` tool functions."""

    def translate(exc: Exception) -> ToolError:
        if isinstance(exc, ValidationError):
            return ToolError(describe_validation_error(exc))
        if isinstance(exc, OverflowError):  # only a client's number can be this large
            return ToolError(f"a number in the arguments is too large to compute with ({bounded(str(exc), 200)}): "
                             "give values a real kernel, shape or measurement has")
        return ToolError(bounded(str(exc)))

    anticipated = (ServiceError, CardFileError, ValidationError, ClientInputError, ConfinementError, OverflowError)
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

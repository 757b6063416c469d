"""The handler registry every instruction family registers into (``@op("v_add_u32", ...)``)."""
from __future__ import annotations

from collections.abc import Callable

HANDLERS: dict[str, Callable] = {}
#: the handlers as registered (before any test swaps one): batched forms mirror only these
ORIGINAL: dict[str, Callable] = {}


def op(*names: str):
    def deco(fn: Callable) -> Callable:
        for n in names:
            HANDLERS[n] = fn
        return fn

    return deco

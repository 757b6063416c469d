"""Instruction semantics, one module per family; each registers its handlers in ``registry``.

A handler is ``fn(wave, ins)``; ``HANDLERS`` maps an exact mnemonic (with its encoding
suffix, e.g. ``v_add_u32_e32``) to it. ``handler_for`` resolves a mnemonic: exact match,
then the name without ``_e32``/``_e64``; SDWA and DPP forms resolve only where a family
implements those modifiers. Semantics follow AMD's CDNA4 ISA reference pseudocode.
"""
from __future__ import annotations

from collections.abc import Callable

from verifiers.gfx950.emulator.ops import (  # noqa: F401 - importing a family registers its handlers
    atomics,
    ds,
    ds_transpose,
    flow,
    lanes,
    mfma,
    salu,
    smem,
    valu_convert,
    valu_float,
    valu_int,
    vmem,
)
from verifiers.gfx950.emulator.ops.common import PURE
from verifiers.gfx950.emulator.ops.lanes import dpp_handler
from verifiers.gfx950.emulator.ops.registry import HANDLERS, ORIGINAL, op
from verifiers.gfx950.emulator.ops.valu_convert import _sdwa_handler

__all__ = ["HANDLERS", "ORIGINAL", "handler_for", "implemented", "op"]

ORIGINAL.update(HANDLERS)


def handler_for(mnemonic: str) -> Callable | None:
    h = HANDLERS.get(mnemonic)
    if h is None and mnemonic.endswith(("_sdwa", "_dpp")):
        base = mnemonic.rsplit("_", 1)[0]
        if base in PURE:
            h = _sdwa_handler(base) if mnemonic.endswith("_sdwa") else dpp_handler(base)
            HANDLERS[mnemonic] = h
    if h is None:
        for suffix in ("_e32", "_e64"):
            if mnemonic.endswith(suffix):
                h = HANDLERS.get(mnemonic[: -len(suffix)])
                break
    return h


def implemented() -> list[str]:
    return sorted(HANDLERS)

"""Runs many waves (several workgroups' worth) in lockstep: one decoded instruction for every
wave whose PC is at it.

Why: a handler call costs tens of microseconds of Python and numpy overhead whatever the
lane count, and every wave of a GEMM runs the same instruction stream. So the waves of a
``Batch`` keep their vector registers in shared arrays (``v[slot]`` is a wave's file), and
each step takes the waves at the smallest PC: instructions with a batched handler
(``ops.batched``: elementwise VALU, packed f32, MFMA, ...) run once for all of them on
``[waves, 64]`` arrays; any other instruction, or one the batched handler declines (a
register with a load in flight, a poisoned operand, ...), runs per wave through its
ordinary handler, with the same semantics and hazard checks as ``executor.run_wave``.
Waves that diverge (branches, exec-dependent paths) simply sit at different PCs: the
most-behind ones step first, so they re-converge at the next common instruction.

Barriers are per workgroup: when every live wave of a workgroup waits at ``s_barrier`` it
opens (a new LDS epoch). Interleaving waves instruction by instruction is an order a GPU
may also produce; LDS races and missing waits are found by epoch and per-wave bookkeeping,
not by the order.
"""
from __future__ import annotations

import numpy as np

from verifiers.gfx950.emulator.errors import EmulatorError, ExecutionError
from verifiers.gfx950.emulator.operands import VGPR_FILE
from verifiers.gfx950.emulator.state import LANES, POISON

_STOPS = ("s_barrier", "s_endpgm")


class Batch:
    """The vector register files of ``n`` waves: ``v[slot]`` / ``vp[slot]`` are one wave's."""

    def __init__(self, n: int) -> None:
        self.v = np.zeros((n, VGPR_FILE, LANES), dtype=np.uint32)
        self.vp = np.full((n, VGPR_FILE, LANES), POISON, dtype=np.uint8)
        self.waves: list = []
        #: register -> how many of the waves have a load in flight into it (``state.InFlight``)
        self.inflight_v: dict[int, int] = {}
        self.inflight_s: dict[int, int] = {}


def _release(group) -> None:  # noqa: ANN001 - Workgroup
    live = [w for w in group.waves if not w.done]
    if live and all(w.at_barrier for w in live):
        group.epoch += 1
        for w in live:
            w.at_barrier = False


def run_lockstep(groups: list, ctx) -> None:  # noqa: ANN001 - list[Workgroup], Context
    instrs = ctx.program.instructions
    counts = ctx.counts
    n = len(instrs)
    waves = [w for g in groups for w in g.waves]
    active = [w for w in waves if not (w.done or w.at_barrier)]
    group = None  # the waves at ``pc`` when known without a scan (all of them moved on together)
    while active:
        if group is None:
            pc = min(w.pc for w in active)
            group = [w for w in active if w.pc == pc]
        if pc >= n:
            w = group[0]
            raise ExecutionError(f"kernel {ctx.kernel_name!r}: execution ran past the end of the kernel "
                                 f"(wave {w.index} of workgroup {w.group.id}) without s_endpgm")
        ins = instrs[pc]
        ctx.current = ins
        w = group[0]
        together = False
        try:
            batched = ins.batch
            if batched is not None and len(group) > 1 and batched(group, ins):
                together = True  # the waves' ``pc`` fields are written when the group breaks up (below)
            else:
                for w in group:
                    w.pc = pc + 1
                    ins.handler(w, ins)
        except EmulatorError:
            raise
        except Exception as exc:  # noqa: BLE001 - an emulator defect: name the instruction
            raise ExecutionError(
                f"kernel {ctx.kernel_name!r}: internal emulator error executing {ins.text!r} at 0x{ins.address:x} "
                f"(wave {w.index} of workgroup {w.group.id}): {type(exc).__name__}: {exc}"
            ) from exc
        counts[pc] += len(group)
        ctx.executed += len(group)
        if together and len(group) == len(active) and ins.mnemonic not in _STOPS:
            pc += 1  # a batched step moves no wave but by one: the group stays, at the next instruction
            continue
        if together:  # only per-wave handlers (branches) read ``pc``: written before any runs
            for w in group:
                w.pc = pc + 1
        if ins.mnemonic in _STOPS:
            for g in {id(x.group): x.group for x in group}.values():
                _release(g)
            active = [w for w in waves if not (w.done or w.at_barrier)]
        group = None

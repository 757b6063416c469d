"""Runs the workgroups of a launch: waves of one workgroup interleaved at ``s_barrier``.

Within a workgroup each wave runs until it reaches ``s_barrier`` or ``s_endpgm``; when
every live wave waits at the barrier, the barrier opens (a new LDS epoch) and they go on.
Workgroups run one after another, each with fresh (poisoned) LDS. Memory a wave reads
is what earlier waves and workgroups wrote: an order a GPU may also produce; LDS
races and missing waits are reported rather than resolved by that order.
"""
from __future__ import annotations

import time
from collections import Counter

import numpy as np

from verifiers.gfx950.emulator.errors import EmulatorError, ExecutionError, UnimplementedInstruction
from verifiers.gfx950.emulator.hazards import HazardLog
from verifiers.gfx950.emulator.memory import GlobalMemory, Lds
from verifiers.gfx950.emulator.ops.ds import lds_write, straddle
from verifiers.gfx950.emulator.program import Program
from verifiers.gfx950.emulator.state import Pending, Wave


class Workgroup:
    def __init__(self, gid: tuple[int, int, int], lds_bytes: int, bank=None, row: int = 0) -> None:  # noqa: ANN001
        self.id = gid
        self.lds = Lds(lds_bytes, bank, row)
        self.epoch = 0
        self.waves: list[Wave] = []


class Context:
    """What handlers reach through ``wave.ctx``: memory, hazards, the program, counters."""

    def __init__(self, program: Program, memory: GlobalMemory, max_instructions: int,
                 max_seconds: float | None = None) -> None:
        self.program = program
        self.kernel_name = program.kernel
        self.memory = memory
        self.hazards = HazardLog(program.kernel)
        self.stats: Counter = Counter()
        self.current = None
        self.executed = 0
        self.max_instructions = max_instructions
        self.deadline = None if max_seconds is None else time.perf_counter() + max_seconds
        self.max_seconds = max_seconds
        self.counts = [0] * len(program.instructions)

    # --- errors raised by handlers
    def unimplemented(self, ins, detail: str) -> UnimplementedInstruction:  # noqa: ANN001
        return UnimplementedInstruction(ins.mnemonic, self.kernel_name, ins.address, ins.text, detail)

    def error(self, ins, detail: str) -> ExecutionError:  # noqa: ANN001
        return ExecutionError(f"kernel {self.kernel_name!r}: {ins.text} at 0x{ins.address:x}: {detail}")

    def check_budget(self, where: str) -> None:
        """Stop a launch that runs past its wall-clock budget (a huge grid, an endless loop)."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise ExecutionError(f"kernel {self.kernel_name!r}: emulation exceeded its {self.max_seconds:g} s budget "
                                 f"({self.executed} instructions executed, at {where}); raise max_seconds for a "
                                 "longer run or emulate a smaller grid")

    def backward_branch(self, w, ins) -> None:  # noqa: ANN001
        self.check_budget(f"{ins.text} in wave {w.index} of workgroup {w.group.id}")
        if self.executed > self.max_instructions:
            raise ExecutionError(
                f"kernel {self.kernel_name!r}: more than {self.max_instructions} instructions executed (last backward "
                f"branch {ins.text} at 0x{ins.address:x}, wave {w.index} of workgroup {w.group.id}): an endless loop, "
                "or a wait on another wave that this emulator's barrier-only scheduling never interleaves; raise "
                "max_instructions if the kernel is just long"
            )

    # --- buffer/global -> LDS DMA
    def lds_dma_issue(self, w, ins, lds_addr: np.ndarray, data: np.ndarray) -> None:  # noqa: ANN001
        lds = w.group.lds
        inb = lds.in_bounds(lds_addr, data.shape[1])
        if not inb.all():
            self.stats["lds_oob_writes"] += int((~inb).sum())
            straddle(w, ins, inb, lds_addr, data.shape[1])
            lds_addr, data = lds_addr[inb], data[inb]
        if not lds_addr.size:
            return
        d = lds.dwords(lds_addr, data.shape[1])
        lds.pending[d] = w.index
        w.pending.append(Pending("vm", lds_addr=lds_addr, lds_bytes=data, issue=ins.text))

    def lds_dma_land(self, w, p) -> None:  # noqa: ANN001
        lds = w.group.lds
        addr, data = (p.lds_addr, p.lds_bytes) if p.lot is None else p.lot.row(w)  # a batched issue: w's row
        d = lds.dwords(addr, data.shape[1])
        lds.pending[d] = -1
        saved, self.current = self.current, _DmaLanding(p)
        lds_write(w, self.current, addr, data, np.zeros(data.shape, dtype=bool))
        self.current = saved


class _DmaLanding:
    """Stands in for the instruction when a DMA's LDS write is checked at its landing."""

    def __init__(self, p) -> None:  # noqa: ANN001
        self.text = p.issue + "  (landing at s_waitcnt)"
        self.address = -1
        self.mnemonic = p.issue.split()[0] if p.issue else "dma"


def run_wave(w: Wave, ctx: Context) -> None:
    instrs = ctx.program.instructions
    counts = ctx.counts
    n = len(instrs)
    try:
        while not (w.done or w.at_barrier):
            pc = w.pc
            if pc >= n:
                raise ExecutionError(f"kernel {ctx.kernel_name!r}: execution ran past the end of the kernel "
                                     f"(wave {w.index} of workgroup {w.group.id}) without s_endpgm")
            ins = instrs[pc]
            w.pc = pc + 1
            ctx.current = ins
            ins.handler(w, ins)
            counts[pc] += 1
            ctx.executed += 1
    except EmulatorError:
        raise
    except Exception as exc:  # noqa: BLE001 - an emulator defect: name the instruction
        ins = ctx.current
        raise ExecutionError(
            f"kernel {ctx.kernel_name!r}: internal emulator error executing {ins.text!r} at 0x{ins.address:x} "
            f"(wave {w.index} of workgroup {w.group.id}): {type(exc).__name__}: {exc}"
        ) from exc


def run_workgroup(group: Workgroup, ctx: Context) -> None:
    while True:
        for w in group.waves:
            if not (w.done or w.at_barrier):
                run_wave(w, ctx)
        live = [w for w in group.waves if not w.done]
        if not live:
            return
        group.epoch += 1
        for w in live:
            w.at_barrier = False


def opcode_counts(ctx: Context) -> dict[str, int]:
    out: Counter = Counter()
    for ins, c in zip(ctx.program.instructions, ctx.counts):
        if c:
            out[ins.mnemonic] += c
    return dict(sorted(out.items()))

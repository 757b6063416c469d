"""``launch(code_object, kernel, grid, block, args) -> EmulatedLaunch``: run one kernel
dispatch on CPU tensors.

Checks first (before anything runs): the code object (gfx950, parsable, the kernel in
it), grid and workgroup sizes (against the kernel's required / maximum size), the
arguments against the kernarg layout of the metadata note (count; a CPU tensor or None
for each pointer; an int/float/bool or exact-size bytes for each by-value slot), and that
every opcode of the kernel is implemented. Then: kernarg segment with hidden arguments,
per-wave register initialisation from the kernel descriptor (user SGPRs, kernarg
preload, workgroup ids, packed workitem ids in v0), and execution.
"""
from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

import numpy as np

from verifiers.gfx950.emulator.code_object import CodeObject, KernelInfo, load_code_object
from verifiers.gfx950.emulator.errors import LaunchArgumentError
from verifiers.gfx950.emulator.executor import Context, Workgroup, opcode_counts, run_workgroup
from verifiers.gfx950.emulator.lockstep import Batch, run_lockstep
from verifiers.gfx950.emulator.memory import KERNARG_BASE, GlobalMemory, LdsBank
from verifiers.gfx950.emulator.program import Program
from verifiers.gfx950.emulator.report import EmulatedLaunch
from verifiers.gfx950.emulator.state import LANES, Wave
from verifiers.settings import verifier_settings

DISPATCH_BASE = KERNARG_BASE + (1 << 30)
DEFAULT_MAX_INSTRUCTIONS = 200_000_000
DEFAULT_MAX_SECONDS = 900.0
MAX_LDS_BYTES = 160 * 1024  # gfx950: 160 KiB per workgroup
#: waves run in lockstep (whole workgroups; SKILL_SERVER_EMULATOR_BATCH_WAVES overrides,
#: SKILL_SERVER_EMULATOR_LOCKSTEP=0 runs one wave at a time as before). 256 halves the
#: per-instruction Python steps of 128 for the card shape (about 20 % less time measured);
#: 512 was no faster (an 80 MiB register file: more cache misses)
BATCH_WAVES = 256
_PROGRAMS: dict[tuple[str, str], Program] = {}


def _dims(value: Any, what: str) -> tuple[int, int, int]:
    if isinstance(value, int):
        value = (value,)
    try:
        dims = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise LaunchArgumentError(f"{what} must be an int or a tuple of up to 3 ints, got {value!r}") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise LaunchArgumentError(f"{what} must have 1 to 3 positive sizes, got {value!r}")
    return dims + (1,) * (3 - len(dims))


def program_for(code_object: CodeObject, kernel: KernelInfo) -> Program:
    key = (code_object.digest, kernel.name)
    prog = _PROGRAMS.get(key)
    if prog is None:
        prog = _PROGRAMS[key] = Program(code_object, kernel)
    return prog


def launch(
    code_object: CodeObject | bytes | str | Path,
    kernel: str,
    grid: Any,
    block: Any,
    args: list | tuple,
    *,
    dynamic_lds_bytes: int = 0,
    max_instructions: int = DEFAULT_MAX_INSTRUCTIONS,
    max_seconds: float | None = DEFAULT_MAX_SECONDS,
) -> EmulatedLaunch:
    """Run ``kernel`` over ``grid`` workgroups of ``block`` threads; ``args`` in kernarg
    order (explicit arguments only: hidden ones are filled here). Tensors are written in place.

    max_instructions / max_seconds: budgets after which the run stops with ExecutionError
    (endless loops, grids too large to emulate); None for no time limit."""
    t0 = time.perf_counter()
    co = code_object if isinstance(code_object, CodeObject) else load_code_object(code_object)
    info = co.kernel(kernel)
    grid3, block3 = _dims(grid, "grid"), _dims(block, "block")
    threads = block3[0] * block3[1] * block3[2]
    limit = info.max_flat_workgroup_size or 1024
    if threads > limit:
        raise LaunchArgumentError(f"kernel {kernel!r}: block {block3} has {threads} threads, more than its maximum {limit}")
    if info.reqd_workgroup_size and tuple(info.reqd_workgroup_size) != block3:
        raise LaunchArgumentError(f"kernel {kernel!r} requires workgroup size {info.reqd_workgroup_size}, got {block3}")
    lds_bytes = info.group_segment_fixed_size + int(dynamic_lds_bytes)
    if lds_bytes > MAX_LDS_BYTES:
        raise LaunchArgumentError(f"kernel {kernel!r}: {lds_bytes} bytes of LDS exceed gfx950's {MAX_LDS_BYTES}")
    memory = GlobalMemory()
    kernarg = _kernarg_segment(info, args, memory, grid3, block3, int(dynamic_lds_bytes))
    td = time.perf_counter()
    program = program_for(co, info)
    program.require_implemented()
    decode_s = time.perf_counter() - td
    kva = memory.map_bytes(kernarg, "kernarg segment", KERNARG_BASE)
    dispatch = _dispatch_packet(info, grid3, block3, kva, lds_bytes)
    dva = memory.map_bytes(dispatch, "dispatch packet", DISPATCH_BASE)
    ctx = Context(program, memory, max_instructions, max_seconds)
    ctx.private_bytes = info.private_segment_fixed_size
    waves_total = 0
    gids = [(gx, gy, gz) for gz in range(grid3[2]) for gy in range(grid3[1]) for gx in range(grid3[0])]
    per_group = -(-threads // LANES)
    env = verifier_settings()
    lockstep = env.emulator_lockstep
    chunk = max(1, (env.emulator_batch_waves or BATCH_WAVES) // per_group) if lockstep else 1
    for first in range(0, len(gids), chunk):
        part = gids[first : first + chunk]
        batch = Batch(len(part) * per_group) if lockstep else None
        bank = LdsBank(len(part), lds_bytes) if lockstep else None
        groups = []
        for k, gid in enumerate(part):
            group = Workgroup(gid, lds_bytes, bank, k)
            group.waves = _make_waves(group, info, ctx, gid, block3, kva, dva, kernarg, batch, k * per_group)
            waves_total += len(group.waves)
            groups.append(group)
        if lockstep:
            batch.waves = [w for g in groups for w in g.waves]
            run_lockstep(groups, ctx)
        else:
            run_workgroup(groups[0], ctx)
        ctx.check_budget(f"the end of workgroup {part[-1]}")
    return EmulatedLaunch(
        kernel=kernel,
        code_object=f"{co.origin} sha256:{co.digest[:12]}",
        grid=grid3,
        block=block3,
        workgroups=grid3[0] * grid3[1] * grid3[2],
        waves=waves_total,
        instructions=ctx.executed,
        opcode_counts=opcode_counts(ctx),
        hazards=ctx.hazards.hazards(),
        seconds=round(time.perf_counter() - t0, 3),
        decode_seconds=round(decode_s, 3),
        buffer_oob_loads=ctx.stats["buffer_oob_loads"],
        buffer_oob_stores=ctx.stats["buffer_oob_stores"],
        lds_oob_reads=ctx.stats["lds_oob_reads"],
        lds_oob_writes=ctx.stats["lds_oob_writes"],
    )


# --------------------------------------------------------------------------- arguments
def _kernarg_segment(info: KernelInfo, args, memory: GlobalMemory, grid, block, dyn_lds: int) -> np.ndarray:  # noqa: ANN001
    import torch

    explicit = info.explicit_args
    args = list(args)
    if len(args) != len(explicit):
        kinds = ", ".join(f"{a.value_kind}[{a.size}]" for a in explicit)
        raise LaunchArgumentError(
            f"kernel {info.name!r} takes {len(explicit)} explicit arguments ({kinds}), got {len(args)}"
        )
    seg = bytearray(max(info.kernarg_segment_size, 1))
    for spec, value in zip(explicit, args):
        where = f"kernel {info.name!r}: argument {spec.index}{f' ({spec.name})' if spec.name else ''}"
        if spec.offset + spec.size > len(seg):
            raise LaunchArgumentError(f"{where}: slot [{spec.offset}, +{spec.size}) lies outside the kernarg segment")
        if spec.value_kind == "global_buffer":
            if value is None:
                raw = (0).to_bytes(8, "little")
            elif isinstance(value, torch.Tensor):
                if value.device.type != "cpu":
                    raise LaunchArgumentError(f"{where}: tensor on {value.device}; the emulator takes CPU tensors")
                raw = memory.map_tensor(value, f"{spec.index}{f' ({spec.name})' if spec.name else ''}").to_bytes(8, "little")
            else:
                raise LaunchArgumentError(f"{where}: a pointer (global_buffer) slot needs a CPU torch tensor or None, "
                                          f"got {type(value).__name__}")
            if spec.size != 8:
                raise LaunchArgumentError(f"{where}: pointer slot of size {spec.size}, expected 8")
        elif spec.value_kind == "by_value":
            raw = _by_value(value, spec.size, where)
        else:
            raise LaunchArgumentError(f"{where}: argument kind {spec.value_kind!r} is not supported by the emulator")
        seg[spec.offset : spec.offset + spec.size] = raw
    for spec in info.args:
        if spec.hidden:
            raw = _hidden(spec.value_kind, spec.size, grid, block, dyn_lds)
            if spec.offset + spec.size <= len(seg):
                seg[spec.offset : spec.offset + spec.size] = raw
    return np.frombuffer(bytes(seg), dtype=np.uint8).copy()


def _by_value(value, size: int, where: str) -> bytes:  # noqa: ANN001
    if isinstance(value, (bytes, bytearray, memoryview)):
        if len(value) != size:
            raise LaunchArgumentError(f"{where}: {len(value)} bytes given for a {size}-byte by-value slot")
        return bytes(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        lo, hi = -(1 << (8 * size - 1)), (1 << (8 * size)) - 1
        if not lo <= value <= hi:
            raise LaunchArgumentError(f"{where}: {value} does not fit the {size}-byte slot")
        return (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    if isinstance(value, float):
        if size == 4:
            return struct.pack("<f", value)
        if size == 8:
            return struct.pack("<d", value)
        raise LaunchArgumentError(f"{where}: a float for a {size}-byte slot")
    raise LaunchArgumentError(f"{where}: by-value slot of {size} bytes needs an int, float, bool or bytes, "
                              f"got {type(value).__name__}")


def _hidden(kind: str, size: int, grid, block, dyn_lds: int) -> bytes:  # noqa: ANN001
    vals = {
        "hidden_block_count_x": grid[0], "hidden_block_count_y": grid[1], "hidden_block_count_z": grid[2],
        "hidden_group_size_x": block[0], "hidden_group_size_y": block[1], "hidden_group_size_z": block[2],
        "hidden_grid_dims": 1 + (grid[1] > 1 or block[1] > 1) + (grid[2] > 1 or block[2] > 1),
        "hidden_dynamic_lds_size": dyn_lds,
    }
    return int(vals.get(kind, 0)).to_bytes(size, "little")  # offsets, remainders, pointers: 0


def _dispatch_packet(info: KernelInfo, grid, block, kernarg_va: int, lds_bytes: int) -> np.ndarray:  # noqa: ANN001
    """An hsa_kernel_dispatch_packet_t (64 bytes) for kernels that read their dispatch pointer."""
    pkt = bytearray(64)
    struct.pack_into("<HHHHHHIIIIIQQ", pkt, 0, 0, 3, block[0], block[1], block[2], 0,
                     grid[0] * block[0], grid[1] * block[1], grid[2] * block[2],
                     info.private_segment_fixed_size, lds_bytes, 0, kernarg_va)
    return np.frombuffer(bytes(pkt), dtype=np.uint8).copy()


# --------------------------------------------------------------------------- waves
def _make_waves(group: Workgroup, info: KernelInfo, ctx: Context, gid, block, kva: int, dva: int,
                kernarg: np.ndarray, batch: Batch | None = None, first_slot: int = 0) -> list[Wave]:  # noqa: ANN001
    d = info.descriptor
    threads = block[0] * block[1] * block[2]
    nwaves = -(-threads // LANES)
    tid = np.arange(threads)
    tx, ty, tz = tid % block[0], (tid // block[0]) % block[1], tid // (block[0] * block[1])
    packed = tx | (ty << 10) | (tz << 20) if d.workitem_id_vgprs >= 1 else tx
    waves = []
    enables = d.user_sgpr_enables
    for wi in range(nwaves):
        n = min(LANES, threads - wi * LANES)
        w = Wave(group, wi, (1 << n) - 1, ctx, None if batch is None else (batch, first_slot + wi))
        s = 0
        for name, count in (("private_segment_buffer", 4), ("dispatch_ptr", 2), ("queue_ptr", 2),
                            ("kernarg_segment_ptr", 2), ("dispatch_id", 2), ("flat_scratch_init", 2),
                            ("private_segment_size", 1)):
            if enables[name]:
                value = {"dispatch_ptr": dva, "kernarg_segment_ptr": kva,
                         "private_segment_size": info.private_segment_fixed_size}.get(name, 0)
                for k in range(count):
                    w.swrite_index(s + k, (value >> (32 * k)) & 0xFFFFFFFF)
                s += count
        if d.kernarg_preload_dwords:
            words = kernarg.view(np.uint32) if kernarg.size % 4 == 0 else np.frombuffer(
                bytes(kernarg) + b"\0" * (-kernarg.size % 4), dtype=np.uint32)
            first = d.kernarg_preload_offset
            for k in range(d.kernarg_preload_dwords):
                if first + k < words.size:
                    w.swrite_index(s + k, int(words[first + k]))
        s = d.user_sgpr_count
        for on, value in zip(d.workgroup_id_enables, gid):
            if on:
                w.swrite_index(s, value)
                s += 1
        if d.enable_workgroup_info:
            w.swrite_index(s, 0)
            s += 1
        if d.enable_private_segment:
            w.swrite_index(s, 0)  # private segment wave byte offset
        lanes = packed[wi * LANES : wi * LANES + n].astype(np.uint32)
        w.v[0, :n] = lanes
        w.vp[0, :n] = 0
        waves.append(w)
    return waves

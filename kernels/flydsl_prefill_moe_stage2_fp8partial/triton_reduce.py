"""Triton top-k reduce: load the ``top_k`` partial rows of a token, (fp8: e4m3 -> f32,
``* (1/S)`` per slot), sum in fp32, store bf16.

One kernel body, two variants selected by the constexpr ``IN_FP8``. The partial scale
``S`` is a constexpr too, so it is baked into the code, part of Triton's cache key, and
read back by the ``repr`` hook that names the compiled kernel
(``moe_reduce_infp8_s<hex(S)>`` / ``moe_reduce_inbf16``): the name the profiler shows is
computed from the same constexpr the code was specialised on. The reciprocal is derived
inside the kernel from ``S`` (``1.0 / S`` folds at compile time), never passed
separately.

Layout: ``partial`` is [M * top_k, N] (row ``t * top_k + j``), contiguous in N;
``out`` is [M, N] bf16. Grid: (cdiv(M, ROWS), cdiv(N, BLOCK_N)); ``ROWS`` tokens per
program: 1 on GPUs, up to ``CPU_ROWS`` in the interpreter.

CPU twin. On CPU tensors the same Python function runs in Triton's interpreter. The
interpreter's fp32 -> bf16 cast truncates instead of rounding to nearest even, so the
twin (``SOFT_CVT=True``) rounds with integer ops on the fp32 bits and stores the bf16
bits through an int16 view; on a GPU (``SOFT_CVT=False``) the hardware conversion does
the same rounding. Only builtins are used (``tl.full``, not the ``@jit`` ``tl.zeros``),
so the twin runs whether or not ``TRITON_INTERPRET`` was set when triton was imported.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.naming import reduce_name

if TYPE_CHECKING:  # pragma: no cover
    import torch


def _constant(proxy: Any, name: str) -> Any:
    value = proxy.constants[name]
    return getattr(value, "value", value)


def _kernel_repr(proxy: Any) -> str:
    in_fp8 = bool(_constant(proxy, "IN_FP8"))
    return reduce_name(in_fp8, float(_constant(proxy, "S")) if in_fp8 else None)


def moe_reduce(
    p_ptr,
    out_ptr,
    M,
    N,
    stride_p,
    stride_o,
    TOP_K: tl.constexpr,
    IN_FP8: tl.constexpr,
    S: tl.constexpr,
    BLOCK_N: tl.constexpr,
    ROWS: tl.constexpr,
    SOFT_CVT: tl.constexpr,
):
    tok = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS).to(tl.int64)
    offs = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (tok[:, None] < M) & (offs[None, :] < N)
    row0 = p_ptr + tok[:, None] * TOP_K * stride_p + offs[None, :]
    acc = tl.full([ROWS, BLOCK_N], 0.0, tl.float32)
    for j in tl.static_range(TOP_K):
        x = tl.load(row0 + j * stride_p, mask=mask, other=0.0).to(tl.float32)
        if IN_FP8:
            x = x * (1.0 / S)  # unscale each slot before the sum (card, procedure step 3)
        acc += x
    dst = out_ptr + tok[:, None] * stride_o + offs[None, :]
    if SOFT_CVT:  # round-to-nearest-even on the bits (out_ptr is an int16 view of the bf16 output)
        bits = acc.to(tl.int32, bitcast=True)
        bits = bits + 0x7FFF + ((bits >> 16) & 1)
        tl.store(dst, (bits >> 16).to(tl.int16), mask=mask)
    else:
        tl.store(dst, acc.to(tl.bfloat16), mask=mask)


moe_reduce_kernel = triton.jit(moe_reduce, repr=_kernel_repr)
_INTERPRETED: list = []
CPU_ROWS = 64


def kernel_for(device: "torch.device"):
    """The kernel for ``device``: compiled on CUDA / ROCm, interpreted on CPU."""
    if device.type != "cpu":
        return moe_reduce_kernel
    if not _INTERPRETED:
        from triton.runtime.interpreter import InterpretedFunction

        _INTERPRETED.append(InterpretedFunction(moe_reduce))
    return _INTERPRETED[0]


def default_block_n(in_fp8: bool) -> int:
    """16-byte loads per thread with 4 warps: 2048 fp8 or 1024 bf16 columns per program."""
    return 2048 if in_fp8 else 1024


def launcher(
    partial: "torch.Tensor",
    out: "torch.Tensor",
    top_k: int,
    scale: float | None,
    *,
    block_n: int | None = None,
    num_warps: int = 4,
):
    """Bind a reduce launch to fixed buffers; returns ``(launch, kernel_name)``.

    partial: [M*top_k, N], float8_e4m3fn (fp8 variant, ``scale`` required) or bf16
    (``scale`` must be None). out: [M, N] bf16.
    """
    import torch

    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.fp8_format import check_scale

    in_fp8 = partial.dtype == torch.float8_e4m3fn
    if not in_fp8 and partial.dtype != torch.bfloat16:
        raise TypeError(f"partial must be float8_e4m3fn or bfloat16, got {partial.dtype}")
    if in_fp8 == (scale is None):
        raise ValueError("an fp8 partial needs its scale; a bf16 partial takes none")
    s = check_scale(scale) if in_fp8 else 1.0
    if out.dim() != 2 or out.dtype != torch.bfloat16:
        raise ValueError(f"out must be bf16 [M, N], got {out.dtype} {tuple(out.shape)}")
    M, N = out.shape
    if tuple(partial.shape) != (M * top_k, N):
        raise ValueError(f"partial {tuple(partial.shape)} does not match out {tuple(out.shape)} with top_k={top_k}")
    if partial.stride(1) != 1 or out.stride(1) != 1:
        raise ValueError("partial and out must be contiguous along N")
    bn = block_n or default_block_n(in_fp8)
    soft = partial.device.type == "cpu"
    # the interpreter pays ~15 ms per program whatever its size: on CPU one program takes a
    # block of tokens; compiled kernels keep one token per program
    rows = min(triton.next_power_of_2(M), CPU_ROWS) if soft else 1
    grid = (triton.cdiv(M, rows), triton.cdiv(N, bn))
    kernel = kernel_for(partial.device)
    dst = out.view(torch.int16) if soft else out
    name = reduce_name(in_fp8, s if in_fp8 else None)
    stride_p, stride_o = partial.stride(0), out.stride(0)

    def launch() -> None:
        kernel[grid](
            partial, dst, M, N, stride_p, stride_o,
            TOP_K=top_k, IN_FP8=in_fp8, S=s, BLOCK_N=bn, ROWS=rows, SOFT_CVT=soft, num_warps=num_warps,
        )

    return launch, name

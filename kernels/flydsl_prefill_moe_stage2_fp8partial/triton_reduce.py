"""Triton top-k reduce: load the ``top_k`` partial rows of a token, (fp8: e4m3 -> f32,
``* (1/S)`` per slot), sum in fp32, store bf16.

One kernel body, two variants selected by the constexpr ``IN_FP8``; the partial scale
``S`` is a constexpr too, so it is baked into the code, part of Triton's cache key, and
read back by the ``repr`` hook that names the compiled kernel
(``moe_reduce_infp8_s<hex(S)>`` / ``moe_reduce_inbf16``): the name the profiler shows is
computed from the same constexpr the code was specialised on. The reciprocal is derived
inside the kernel from ``S`` (``1.0 / S`` folds at compile time), never passed
separately.

Layout: ``partial`` is [M * top_k, N] (row ``t * top_k + j``), contiguous in N;
``out`` is [M, N] bf16. Grid: (M, cdiv(N, BLOCK_N)).
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
    N,
    stride_p,
    stride_o,
    TOP_K: tl.constexpr,
    IN_FP8: tl.constexpr,
    S: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    tok = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = offs < N
    row0 = p_ptr + tok * TOP_K * stride_p + offs
    acc = tl.full([BLOCK_N], 0.0, tl.float32)  # tl.full, not tl.zeros: a builtin, so the
    # interpreter twin runs whether or not TRITON_INTERPRET was set before triton was imported
    for j in tl.static_range(TOP_K):
        x = tl.load(row0 + j * stride_p, mask=mask, other=0.0).to(tl.float32)
        if IN_FP8:
            x = x * (1.0 / S)  # unscale each slot before the sum (card, step 3)
        acc += x
    tl.store(out_ptr + tok * stride_o + offs, acc.to(tl.bfloat16), mask=mask)


# Compiled on a GPU; the interpreter twin runs the same Python function on CPU tensors.
moe_reduce_kernel = triton.jit(moe_reduce, repr=_kernel_repr)


def kernel_for(device: "torch.device"):
    """The jitted kernel for ``device``: compiled on CUDA/ROCm, interpreted on CPU."""
    if device.type == "cpu":
        return _interpreted()
    return moe_reduce_kernel


_INTERPRETED = None


def _interpreted():
    global _INTERPRETED
    if _INTERPRETED is None:
        from triton.runtime.interpreter import InterpretedFunction

        _INTERPRETED = InterpretedFunction(moe_reduce)
    return _INTERPRETED


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
    M, N = out.shape
    if partial.shape != (M * top_k, N) or out.dtype != torch.bfloat16:
        raise ValueError(f"partial {tuple(partial.shape)} / out {out.dtype} {tuple(out.shape)} do not match top_k={top_k}")
    if partial.stride(1) != 1 or out.stride(1) != 1:
        raise ValueError("partial and out must be contiguous along N")
    bn = block_n or default_block_n(in_fp8)
    grid = (M, triton.cdiv(N, bn))
    kernel = kernel_for(partial.device)
    name = reduce_name(in_fp8, s if in_fp8 else None)
    stride_p, stride_o = partial.stride(0), out.stride(0)

    def launch() -> None:
        kernel[grid](partial, out, N, stride_p, stride_o, TOP_K=top_k, IN_FP8=in_fp8, S=s, BLOCK_N=bn, num_warps=num_warps)

    return launch, name

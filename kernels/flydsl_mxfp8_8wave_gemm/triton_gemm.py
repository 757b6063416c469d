"""Portable Triton twin of the mxfp8 GEMM (CUDA, ROCm, and CPU via TRITON_INTERPRET=1).

Same function as the oracle: each ``[BM, BK]`` / ``[BN, BK]`` fp8 tile is dequantised in
registers with its per-32 e8m0 scales into bf16 (exact: 3 mantissa bits times a power of
two fit bf16 for every normal scale) and fed to ``tl.dot`` with an fp32 accumulator, so
the products are exact and only the fp32 summation order differs from the oracle.
(On CPU, under the interpreter, the dot runs in fp32 "ieee" instead: the interpreter
mis-multiplies bf16 operands; the products are exact either way.) It
reads the plain (unshuffled) operands: ``a [M, K]``, ``a_scale_e8m0 [M, K/32]``,
``b [N, K]``, ``b_scale_e8m0 [N, K/32]``.

This is a correctness twin for platforms without an mx MMA (the H200, CPU), not a fast
kernel.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

import triton
import triton.language as tl

if TYPE_CHECKING:  # pragma: no cover
    import torch

KERNEL_NAME = "_mxfp8_dequant_gemm_kernel"


@triton.jit
def _e8m0_to_f32(e):
    # e8m0 byte -> fp32 2^(e-127): the byte is the fp32 exponent field; 0 is 2^-127
    bits = tl.where(e == 0, 1 << 22, e << 23)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _round_to_bf16(x):
    # round-to-nearest-even to bf16 by integer arithmetic, then an exact cast: the CPU
    # interpreter's own fp32 -> bf16 cast truncates; GPUs round to nearest even anyway
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True).to(tl.bfloat16)


@triton.jit
def _mxfp8_dequant_gemm_kernel(
    a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, BF16_DOT: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    kb = K // 32
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        offs_k = k0 + tl.arange(0, BK)
        mask_a = (offs_m[:, None] < M) & (offs_k[None, :] < K)
        mask_b = (offs_n[:, None] < N) & (offs_k[None, :] < K)
        a = tl.load(a_ptr + offs_m[:, None] * K + offs_k[None, :], mask=mask_a, other=0)
        b = tl.load(b_ptr + offs_n[:, None] * K + offs_k[None, :], mask=mask_b, other=0)
        ea = tl.load(sa_ptr + offs_m[:, None] * kb + offs_k[None, :] // 32, mask=mask_a, other=127)
        eb = tl.load(sb_ptr + offs_n[:, None] * kb + offs_k[None, :] // 32, mask=mask_b, other=127)
        a_f = a.to(tl.float8e4nv, bitcast=True).to(tl.float32) * _e8m0_to_f32(ea.to(tl.int32))
        b_f = b.to(tl.float8e4nv, bitcast=True).to(tl.float32) * _e8m0_to_f32(eb.to(tl.int32))
        if BF16_DOT:
            acc += tl.dot(a_f.to(tl.bfloat16), tl.trans(b_f.to(tl.bfloat16)))
        else:  # the CPU interpreter mis-multiplies bf16; fp32 "ieee" is exact here too
            acc += tl.dot(a_f, tl.trans(b_f), input_precision="ieee")
    mask_c = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], _round_to_bf16(acc), mask=mask_c)


def mxfp8_gemm_triton(
    a: "torch.Tensor",
    a_exps: "torch.Tensor",
    b: "torch.Tensor",
    b_exps: "torch.Tensor",
    out: "torch.Tensor",
    *,
    block: tuple[int, int, int] = (64, 64, 128),
) -> None:
    """Write ``bf16((A * sa) @ (B * sb)^T)`` into ``out [M, N]``."""
    import torch

    m, k = a.shape
    n = b.shape[0]
    if b.shape[1] != k or tuple(a_exps.shape) != (m, k // 32) or tuple(b_exps.shape) != (n, k // 32):
        raise ValueError(
            f"mxfp8_gemm_triton: shapes a={tuple(a.shape)} a_exps={tuple(a_exps.shape)} "
            f"b={tuple(b.shape)} b_exps={tuple(b_exps.shape)} are inconsistent"
        )
    if k % 32:
        raise ValueError(f"mxfp8_gemm_triton: K={k} must be a multiple of 32")
    if tuple(out.shape) != (m, n) or out.dtype != torch.bfloat16:
        raise ValueError(f"mxfp8_gemm_triton: out must be bf16 [{m}, {n}], got {out.dtype} {tuple(out.shape)}")
    if a.device.type == "cpu" and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        raise RuntimeError(
            "mxfp8_gemm_triton on CPU tensors needs the Triton interpreter: set TRITON_INTERPRET=1 "
            "before triton_gemm is imported (or run on a GPU)"
        )
    bm, bn, bk = block
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
    _mxfp8_dequant_gemm_kernel[grid](
        a.view(torch.uint8), b.view(torch.uint8), a_exps, b_exps, out, m, n, k,
        BM=bm, BN=bn, BK=bk, BF16_DOT=a.device.type != "cpu",
    )

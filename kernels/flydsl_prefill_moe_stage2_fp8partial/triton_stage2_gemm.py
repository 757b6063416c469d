"""Triton stage-2 grouped GEMM over experts, storing per-(token, slot) partials.

For every sorted row ``r`` with flat id ``f = sorted_ids[r] < M*top_k`` and expert
``e = block_expert[r // ROUTE_BLOCK_M]``:

    P[f, :] = topk_weight[f] * (a2[f, :] @ w2[e]^T)        (fp32 accumulate)

then the epilogue stores ``P`` either as bf16 (``PF8=False``: the baseline) or as OCP
e4m3 of ``clamp(P * S, -448, 448)`` (``PF8=True``: the card's fp8-partial store). The
datapath is bf16 x bf16 -> fp32 (``tl.dot`` on tensor cores / MFMA); only the final
global store changes with the variant, as the card prescribes.

A third mode (``ACC_OUT=True``, kernel ``moe2_gemm_accf32``) stores the raw fp32
accumulator rows in sorted order ([capacity, N], no weight, no scatter) for the FlyDSL
store epilogue (``flydsl_stage2_epilogue``) to finish: an ablation arm that exercises
that kernel on hardware, not a fast path.

The scale ``S`` is a ``tl.constexpr``: part of Triton's cache key and of the compiled
kernel's name (``moe2_gemm_pf8_s<hex(S)>`` via the ``repr`` hook, or
``moe2_gemm_bf16``), the same single value the reducer is built with.

Tiles: ``BLOCK_M`` must divide ``ROUTE_BLOCK_M`` (64) so a tile never straddles two
experts; padding rows (sentinel ``f == M*top_k``) load zeros and store nothing; row
tiles at or past ``num_padded`` (the unused tail of the fixed-capacity sorted buffer)
return at once. Program
order is grouped by ``GROUP_M`` row tiles per column sweep, so neighbouring programs
reuse the same expert's weight tiles from L2.

CPU twin (``SOFT_CVT=True``, Triton's interpreter on CPU tensors): the interpreter's
``tl.dot`` multiplies the raw bf16 storage as integers, so the twin upcasts both tiles to
fp32 first (exact; the products and the fp32 accumulation are the same as on the
tensor cores up to summation order); and its fp32 -> bf16 / e4m3 casts do not round to
nearest even (bf16 truncates, e4m3 drops the mantissa carry), so the twin rounds on the
fp32 bits and stores raw bytes / halfwords through a uint8 / int16 view of the partial.
On a GPU the bf16 ``tl.dot`` and the hardware conversions are used.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.naming import GEMM_ACC, gemm_name
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.routing import ROUTE_BLOCK_M

if TYPE_CHECKING:  # pragma: no cover
    import torch


def _constant(proxy: Any, name: str) -> Any:
    value = proxy.constants[name]
    return getattr(value, "value", value)


def _kernel_repr(proxy: Any) -> str:
    if bool(_constant(proxy, "ACC_OUT")):
        return GEMM_ACC
    pf8 = bool(_constant(proxy, "PF8"))
    return gemm_name(pf8, float(_constant(proxy, "S")) if pf8 else None)


def moe2_gemm(
    a_ptr,
    w_ptr,
    out_ptr,
    sorted_ids_ptr,
    block_expert_ptr,
    num_padded_ptr,
    topk_w_ptr,
    num_valid,
    N,
    K,
    num_tiles_m,
    stride_a,
    stride_we,
    stride_wn,
    stride_o,
    PF8: tl.constexpr,
    S: tl.constexpr,
    ACC_OUT: tl.constexpr,
    SOFT_CVT: tl.constexpr,
    ROUTE_BM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    pid = tl.program_id(0)
    tiles_n = (N + BLOCK_N - 1) // BLOCK_N
    group = GROUP_M * tiles_n
    first_m = (pid // group) * GROUP_M
    group_m = tl.minimum(num_tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % group_m
    pid_n = (pid % group) // group_m
    if pid_m * BLOCK_M >= tl.load(num_padded_ptr):
        return  # past the rows in use: the fixed-capacity tail of the sorted buffer

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    tok = tl.load(sorted_ids_ptr + offs_m)
    row_ok = tok < num_valid
    expert = tl.load(block_expert_ptr + (pid_m * BLOCK_M) // ROUTE_BM).to(tl.int64)
    tok64 = tok.to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = offs_n < N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + tok64[:, None] * stride_a + offs_k[None, :]
    w_ptrs = w_ptr + expert * stride_we + offs_n[None, :].to(tl.int64) * stride_wn + offs_k[:, None]

    acc = tl.full([BLOCK_M, BLOCK_N], 0.0, tl.float32)
    for k0 in range(0, K, BLOCK_K):
        if EVEN_K:
            a = tl.load(a_ptrs, mask=row_ok[:, None], other=0.0)
            b = tl.load(w_ptrs, mask=col_ok[None, :], other=0.0)
        else:
            k_ok = (k0 + offs_k) < K
            a = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
            b = tl.load(w_ptrs, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        if SOFT_CVT:  # the interpreter's dot multiplies bf16 storage as integers: upcast (exact) first
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K

    if ACC_OUT:  # raw fp32 accumulator rows in sorted order, for a separate store epilogue
        r_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * stride_o + offs_n[None, :]
        tl.store(r_ptrs, acc, mask=col_ok[None, :])
        return

    # epilogue: router weight in fp32, then the partial store in the chosen format
    acc = acc * tl.load(topk_w_ptr + tok64, mask=row_ok, other=0.0)[:, None]
    o_ptrs = out_ptr + tok64[:, None] * stride_o + offs_n[None, :]
    o_mask = row_ok[:, None] & col_ok[None, :]
    if PF8:
        y = tl.minimum(tl.maximum(acc * S, -448.0), 448.0)
        if SOFT_CVT:  # e4m3 round-to-nearest-even on the fp32 bits; out_ptr is a uint8 view
            bits = y.to(tl.int32, bitcast=True)
            mag = bits & 0x7FFFFFFF
            mag = mag + 0x7FFFF + ((mag >> 20) & 1)  # drop 20 mantissa bits, RNE, carry into the exponent
            normal = (((mag >> 23) - 120) << 3) | ((mag >> 20) & 7)  # rebias 127 -> 7
            # |y| < 2^-6: subnormal e4m3 = round(|y| * 2^9) (RNE through the 1.5 * 2^23 magic number);
            # the result 8 is the encoding of 2^-6 itself, so the two ranges join up
            sub = ((tl.abs(y) * 512.0 + 12582912.0) - 12582912.0).to(tl.int32)
            byte = tl.where(tl.abs(y) < 0.015625, sub, normal) | ((bits >> 24) & 0x80)
            tl.store(o_ptrs, byte.to(tl.uint8), mask=o_mask)
        else:
            tl.store(o_ptrs, y.to(out_ptr.dtype.element_ty), mask=o_mask)
    else:
        if SOFT_CVT:  # bf16 round-to-nearest-even on the fp32 bits; out_ptr is an int16 view
            bits = acc.to(tl.int32, bitcast=True)
            bits = bits + 0x7FFF + ((bits >> 16) & 1)
            tl.store(o_ptrs, (bits >> 16).to(tl.int16), mask=o_mask)
        else:
            tl.store(o_ptrs, acc.to(tl.bfloat16), mask=o_mask)


moe2_gemm_kernel = triton.jit(moe2_gemm, repr=_kernel_repr)
_INTERPRETED: list = []


def kernel_for(device: "torch.device"):
    """The kernel for ``device``: compiled on CUDA / ROCm, interpreted on CPU."""
    if device.type != "cpu":
        return moe2_gemm_kernel
    if not _INTERPRETED:
        from triton.runtime.interpreter import InterpretedFunction

        _INTERPRETED.append(InterpretedFunction(moe2_gemm))
    return _INTERPRETED[0]


@dataclass(frozen=True)
class GemmConfig:
    """Tile configuration shared by both arms (only the epilogue differs between them)."""

    block_m: int = 64
    block_n: int = 128
    block_k: int = 64
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 3

    def check(self) -> None:
        if ROUTE_BLOCK_M % self.block_m:
            raise ValueError(f"block_m={self.block_m} must divide ROUTE_BLOCK_M={ROUTE_BLOCK_M}")
        for name in ("block_m", "block_n", "block_k"):
            v = getattr(self, name)
            if v < 16 or v & (v - 1):
                raise ValueError(f"{name}={v} must be a power of two >= 16")


def launcher(
    inputs: dict[str, "torch.Tensor"],
    partial: "torch.Tensor",
    scale: float | None,
    config: GemmConfig | None = None,
):
    """Bind a stage-2 GEMM launch to fixed buffers; returns ``(launch, kernel_name)``.

    partial: the [M*top_k, N] workspace, float8_e4m3fn (``scale`` required) or bf16
    (``scale`` must be None); or a float32 [capacity, N] buffer for the raw sorted
    accumulator rows (``scale`` must be None).
    """
    import torch

    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.fp8_format import check_scale
    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.oracle import dims_of

    cfg = config or GemmConfig()
    cfg.check()
    d = dims_of(inputs)
    a2, w2 = inputs["a2"], inputs["w2"]
    pf8 = partial.dtype == torch.float8_e4m3fn
    acc_out = partial.dtype == torch.float32
    if not (pf8 or acc_out) and partial.dtype != torch.bfloat16:
        raise TypeError(f"partial must be float8_e4m3fn, bfloat16 or float32 (accumulator rows), got {partial.dtype}")
    if pf8 == (scale is None):
        raise ValueError("an fp8 partial store needs its scale; bf16 and accumulator stores take none")
    s = check_scale(scale) if pf8 else 1.0
    rows = inputs["sorted_ids"].numel() if acc_out else d["M"] * d["top_k"]
    if tuple(partial.shape) != (rows, d["N"]) or partial.stride(1) != 1:
        raise ValueError(f"the {partial.dtype} output must be [{rows}, {d['N']}] contiguous in N, got {tuple(partial.shape)}")
    sorted_ids, block_expert, num_padded = inputs["sorted_ids"], inputs["block_expert"], inputs["num_padded"]
    weights = inputs["topk_weights"].reshape(-1)
    num_tiles_m = sorted_ids.numel() // cfg.block_m
    grid = (num_tiles_m * triton.cdiv(d["N"], cfg.block_n),)
    soft = a2.device.type == "cpu"
    dst = (partial.view(torch.uint8) if pf8 else partial.view(torch.int16)) if soft and not acc_out else partial
    kernel = kernel_for(a2.device)
    name = GEMM_ACC if acc_out else gemm_name(pf8, s if pf8 else None)
    num_valid = d["M"] * d["top_k"]
    even_k = d["K"] % cfg.block_k == 0

    def launch() -> None:
        kernel[grid](
            a2, w2, dst, sorted_ids, block_expert, num_padded, weights,
            num_valid, d["N"], d["K"], num_tiles_m,
            a2.stride(0), w2.stride(0), w2.stride(1), partial.stride(0),
            PF8=pf8, S=s, ACC_OUT=acc_out, SOFT_CVT=soft, ROUTE_BM=ROUTE_BLOCK_M,
            BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
            EVEN_K=even_k, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )

    return launch, name

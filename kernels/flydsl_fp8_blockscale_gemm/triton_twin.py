"""Portable Triton twin of the block-scale fp8 GEMM: the card's parity fix, in Triton.

``C[M, N] = sum over 128-K blocks kb of (A_kb @ B_kb^T) * a_scale[:, kb] * b_scale[nb, kb]``

The MMA stays plain fp8 (no hardware scale operand, so nothing is rounded to a
power of two); each 128-K step's fp32 partial is *promoted*: multiplied by the
row's activation scale times the block's weight scale and added to an fp32
accumulator. That is the software post-MMA scale the card prescribes (and what
cuBLAS and DeepGEMM do on Hopper), and why the kernel is named
``blockscale_fp8_gemm_promote``: its runtime signature.

Runs on NVIDIA (TMA or pointer loads), AMD (pointer loads) and, with
``TRITON_INTERPRET=1`` set before this module is imported, on CPU tensors.
Tile configs come from :mod:`.twin_configs` (:func:`pick_config` per shape class).

Layout notes:
- ``a_scale_t`` (``[K/128, M]``, contiguous) is what the kernel reads: one K block's
  scales for a row tile are one contiguous, coalesced load.
- ``b`` is ``[N, K]`` with K contiguous, so its tile is K-major, the operand order
  fp8 wgmma needs; ``b_shuffled`` (the CK layout) is for the gfx950 kernels only.
- Out-of-range rows/columns are clamped (``% M``, ``% N``) on the pointer path, so
  the main loop carries no masks; they are masked on store. TMA zero-fills them.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import triton
import triton.language as tl

from .contract import ContractError, check_contract, platform_of
from .twin_configs import DeviceCache, TwinConfig, device_cache, pick_config

if TYPE_CHECKING:  # pragma: no cover
    import torch

KERNEL_NAME = "blockscale_fp8_gemm_promote"
Launch = Callable[[], None]


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped program order: GROUP_M row tiles walk one column of tiles together.

    With GROUP_M >= the number of row tiles the order is M-fastest over all of M,
    so every program that reads one B panel runs back to back (L2 locality).
    """
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    local = tile_id % num_pid_in_group
    return first_pid_m + local % group_size_m, local // group_size_m


@triton.jit
def _round_to_bf16(x):
    """fp32 values rounded to the nearest bf16 (ties to even), still fp32: the cast that
    follows is exact, so a truncating cast (the interpreter's) stores the rounded value."""
    bits = x.to(tl.int32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _promote_tile(
    a_src, b_src, c_dst, as_t_ptr, bs_ptr,
    M, N, num_kb, stride_am, stride_bn, stride_cm,
    pid_m, pid_n,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SPLIT_N: tl.constexpr, USE_TMA: tl.constexpr, NUM_STAGES: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
    MMA_BF16: tl.constexpr, SOFT_CVT: tl.constexpr,
):
    SCALE_BLOCK: tl.constexpr = 128
    off_m = pid_m * BLOCK_M
    off_n0 = pid_n * (BLOCK_N * SPLIT_N)
    off_n1 = off_n0 + BLOCK_N
    offs_m = off_m + tl.arange(0, BLOCK_M)
    rows = offs_m % M  # clamped rows: valid addresses, results discarded on store
    # one weight-scale block per BLOCK_N-wide half (BLOCK_N divides 128)
    nb0 = off_n0 // SCALE_BLOCK
    nb1 = tl.minimum(off_n1 // SCALE_BLOCK, N // SCALE_BLOCK - 1)
    num_sb = num_kb * BLOCK_K // SCALE_BLOCK  # 128-K scale blocks along K
    if not USE_TMA:
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_src + rows.to(tl.int64)[:, None] * stride_am + offs_k[None, :]
        cols0 = (off_n0 + tl.arange(0, BLOCK_N)) % N
        b0_ptrs = b_src + cols0.to(tl.int64)[None, :] * stride_bn + offs_k[:, None]
        cols1 = (off_n1 + tl.arange(0, BLOCK_N)) % N
        b1_ptrs = b_src + cols1.to(tl.int64)[None, :] * stride_bn + offs_k[:, None]

    acc0 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in tl.range(0, num_kb, num_stages=NUM_STAGES, warp_specialize=WARP_SPECIALIZE):
        if USE_TMA:
            a = a_src.load([off_m, kb * BLOCK_K])
            b0 = b_src.load([off_n0, kb * BLOCK_K]).T
        else:
            a = tl.load(a_ptrs)
            b0 = tl.load(b0_ptrs)
        sb = kb * BLOCK_K // SCALE_BLOCK  # the 128-K scale block this MMA step lies in
        if MMA_BF16:
            # fp8 -> bf16 is exact; bf16 MMAs accumulate in full fp32 (Hopper's fp8 MMAs do not)
            a = a.to(tl.bfloat16)
            b0 = b0.to(tl.bfloat16)
        a_s = tl.load(as_t_ptr + sb * M + rows)  # [BLOCK_M] activation scales of this K block
        # promote: fp32 partial of this K step times its block's fp32 scales, into fp32.
        # BLOCK_K < 128 promotes more often (shorter runs inside the tensor core's
        # reduced-precision fp8 accumulation) at the cost of more FMAs.
        s0 = a_s * tl.load(bs_ptr + nb0 * num_sb + sb)
        acc0 += tl.dot(a, b0, out_dtype=tl.float32) * s0[:, None]
        if SPLIT_N == 2:
            if USE_TMA:
                b1 = b_src.load([off_n1, kb * BLOCK_K]).T
            else:
                b1 = tl.load(b1_ptrs)
                b1_ptrs += BLOCK_K
            if MMA_BF16:
                b1 = b1.to(tl.bfloat16)
            s1 = a_s * tl.load(bs_ptr + nb1 * num_sb + sb)
            acc1 += tl.dot(a, b1, out_dtype=tl.float32) * s1[:, None]
        if not USE_TMA:
            a_ptrs += BLOCK_K
            b0_ptrs += BLOCK_K

    if SOFT_CVT:  # Triton's interpreter (CPU) casts fp32 -> bf16 by truncation: round first
        acc0 = _round_to_bf16(acc0)
        acc1 = _round_to_bf16(acc1)
    if USE_TMA:
        c_dst.store([off_m, off_n0], acc0.to(tl.bfloat16))
        if SPLIT_N == 2:
            c_dst.store([off_m, off_n1], acc1.to(tl.bfloat16))
    else:
        row_ok = offs_m[:, None] < M
        c_rows = c_dst + offs_m.to(tl.int64)[:, None] * stride_cm
        offs_n0 = off_n0 + tl.arange(0, BLOCK_N)
        tl.store(c_rows + offs_n0[None, :], acc0.to(tl.bfloat16), mask=row_ok & (offs_n0[None, :] < N))
        if SPLIT_N == 2:
            offs_n1 = off_n1 + tl.arange(0, BLOCK_N)
            tl.store(c_rows + offs_n1[None, :], acc1.to(tl.bfloat16), mask=row_ok & (offs_n1[None, :] < N))


@triton.jit
def blockscale_fp8_gemm_promote(
    a_src, b_src, c_dst, as_t_ptr, bs_ptr,
    M, N, K, stride_am, stride_bn, stride_cm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SPLIT_N: tl.constexpr, GROUP_M: tl.constexpr,
    USE_TMA: tl.constexpr, PERSISTENT: tl.constexpr, FLATTEN: tl.constexpr, NUM_PROGS: tl.constexpr,
    NUM_STAGES: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, MMA_BF16: tl.constexpr, SOFT_CVT: tl.constexpr = False,
):
    """fp8 A[M,K] x fp8 B[N,K]^T with per-(row, 128-K) and per-(128x128) fp32 scales -> bf16 C.

    ``a_src``/``b_src``/``c_dst`` are tensor descriptors when USE_TMA, else pointers.
    """
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N * SPLIT_N)
    num_kb = K // BLOCK_K
    if PERSISTENT:
        for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_PROGS, flatten=FLATTEN):
            pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
            _promote_tile(a_src, b_src, c_dst, as_t_ptr, bs_ptr, M, N, num_kb, stride_am, stride_bn,
                          stride_cm, pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_N, USE_TMA, NUM_STAGES,
                          WARP_SPECIALIZE, MMA_BF16, SOFT_CVT)
    else:
        pid_m, pid_n = _tile_coords(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
        _promote_tile(a_src, b_src, c_dst, as_t_ptr, bs_ptr, M, N, num_kb, stride_am, stride_bn,
                      stride_cm, pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_N, USE_TMA, NUM_STAGES,
                      WARP_SPECIALIZE, MMA_BF16, SOFT_CVT)


def _num_sms(device: "torch.device") -> int:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def _device_cache(device: "torch.device", platform: str) -> DeviceCache:
    """The cache model of ``device`` from what torch reports (L2 size, gcnArchName)."""
    if device.type != "cuda":
        return device_cache("cpu")
    import torch

    props = torch.cuda.get_device_properties(device)
    return device_cache(platform, getattr(props, "L2_cache_size", None), getattr(props, "gcnArchName", None),
                        getattr(props, "name", ""))


def _tma_supported(device: "torch.device") -> bool:
    import torch

    if device.type != "cuda" or torch.version.hip:
        return False
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.get_device_capability(device)[0] >= 9


def build(
    inputs: dict[str, "torch.Tensor"],
    outputs: dict[str, "torch.Tensor"],
    config: TwinConfig | None = None,
) -> Launch:
    """Compile (and run once) the twin for these tensors; return the zero-arg launch.

    ``config`` defaults to :func:`pick_config` for the shape and platform. The
    returned callable carries ``.config`` and ``.reason`` for reports.
    """
    dims = check_contract(inputs, outputs)
    m, n, k = dims["M"], dims["N"], dims["K"]
    a, b, c = inputs["a"], inputs["b"], outputs["c"]
    a_scale_t, b_scale = inputs["a_scale_t"], inputs["b_scale"]
    platform = platform_of(a)
    interpreted = KERNEL_IS_INTERPRETED
    if platform == "cpu" and not interpreted:
        raise ContractError(
            "triton_twin on CPU tensors needs the Triton interpreter: set TRITON_INTERPRET=1 "
            "before this module is first imported"
        )
    if platform != "cpu" and interpreted:
        raise ContractError("triton_twin was imported with TRITON_INTERPRET=1 but got GPU tensors")
    num_sms = _num_sms(a.device)
    if config is None:
        choice = pick_config(m, n, k, platform, num_sms=num_sms, cache=_device_cache(a.device, platform))
        config, reason = choice.config, f"{choice.shape_class}: {choice.reason}"
    else:
        reason = "explicit config"
    if config.use_tma and not (_tma_supported(a.device) or interpreted):
        raise ContractError(
            f"config {config.label} uses TMA, which needs an NVIDIA GPU of compute capability >= 9 "
            "and triton.tools.tensor_descriptor; pick use_tma=False"
        )

    if config.use_tma:
        from triton.tools.tensor_descriptor import TensorDescriptor

        a_src = TensorDescriptor.from_tensor(a, [config.block_m, config.block_k])
        b_src = TensorDescriptor.from_tensor(b, [config.block_n, config.block_k])
        c_dst = TensorDescriptor.from_tensor(c, [config.block_m, config.block_n])
    else:
        a_src, b_src, c_dst = a, b, c

    tiles = triton.cdiv(m, config.block_m) * triton.cdiv(n, config.tile_n)
    # persistent: one program per CTA slot (sm_90 occupancy from twin_aot: 1 CTA of
    # 128-row tiles per SM, 2 of 64-row ones)
    programs = min(tiles, num_sms * (2 if config.block_m == 64 else 1)) if config.persistent else tiles
    grid = (programs,)
    kernel = blockscale_fp8_gemm_promote
    args = (a_src, b_src, c_dst, a_scale_t, b_scale, m, n, k, a.stride(0), b.stride(0), c.stride(0))
    meta = dict(
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
        SPLIT_N=config.split_n, GROUP_M=config.group_m, USE_TMA=config.use_tma,
        PERSISTENT=config.persistent, FLATTEN=config.flatten, NUM_PROGS=programs,
        NUM_STAGES=config.num_stages, WARP_SPECIALIZE=config.warp_specialize,
        MMA_BF16=config.mma_dtype == "bf16", SOFT_CVT=interpreted,
    )
    if not interpreted:
        meta.update(num_warps=config.num_warps, num_stages=config.num_stages)

    def launch() -> None:
        kernel[grid](*args, **meta)

    launch()  # compile + warm (untimed)
    if platform != "cpu":
        import torch

        torch.cuda.synchronize(a.device)
    launch.config = config  # type: ignore[attr-defined]
    launch.reason = reason  # type: ignore[attr-defined]
    return launch


KERNEL_IS_INTERPRETED = not isinstance(blockscale_fp8_gemm_promote, triton.runtime.JITFunction)

"""Compile the Triton twin for sm_90 on any machine (no GPU) and read its resource usage.

``triton.compile`` with a ``GPUTarget("cuda", 90, 32)`` runs the whole NVIDIA pipeline
(TTIR -> TTGIR -> LLVM -> PTX -> cubin through the ptxas bundled with Triton), so the
registers, spills (local memory), shared memory and the MMA instructions of every
config can be checked before anyone spends GPU time on it. The runtime JIT adds the
same divisibility-by-16 hints for aligned pointers and strides that are given here.

Occupancy per SM is estimated from the H100/H200 limits (65536 registers allocated
per warp in units of 256, 228 KiB shared memory with 1 KiB reserved per CTA, 64 warps).
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import asdict, dataclass

from .twin_configs import TwinConfig

SM90_REGS = 65536
SM90_SMEM = 228 * 1024
SM90_SMEM_RESERVED = 1024
SM90_MAX_WARPS = 64


@dataclass(frozen=True)
class AotReport:
    config: str
    registers: int
    spill_bytes: int  # local memory per thread (0: no spills)
    shared_bytes: int
    total_warps: int  # incl. the partitions warp specialisation adds
    ctas_per_sm: int
    mma: list[str]  # distinct wgmma/mma instruction shapes in the PTX
    waits_per_loop_estimate: int  # wgmma.wait_group count in the PTX

    def as_dict(self) -> dict:
        return asdict(self)


def _cuobjdump() -> str:
    import triton

    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: this Triton build ships no NVIDIA tools; cannot read cubin resources")
    return path


def signature(cfg: TwinConfig) -> tuple[dict[str, str], dict[str, object], dict]:
    if cfg.use_tma:
        a = f"tensordesc<fp8e4nv[{cfg.block_m}, {cfg.block_k}]>"
        b = f"tensordesc<fp8e4nv[{cfg.block_n}, {cfg.block_k}]>"
        c = f"tensordesc<bf16[{cfg.block_m}, {cfg.block_n}]>"
    else:
        a, b, c = "*fp8e4nv", "*fp8e4nv", "*bf16"
    sig = {"a_src": a, "b_src": b, "c_dst": c, "as_t_ptr": "*fp32", "bs_ptr": "*fp32",
           "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32", "stride_bn": "i32", "stride_cm": "i32"}
    const = dict(BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, SPLIT_N=cfg.split_n,
                 GROUP_M=cfg.group_m, USE_TMA=cfg.use_tma, PERSISTENT=cfg.persistent, FLATTEN=cfg.flatten,
                 NUM_PROGS=132, NUM_STAGES=cfg.num_stages, WARP_SPECIALIZE=cfg.warp_specialize,
                 MMA_BF16=cfg.mma_dtype == "bf16", SOFT_CVT=False)
    sig.update({k: "constexpr" for k in const})
    first = 3 if cfg.use_tma else 0  # descriptors carry their own alignment
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(first, 11)}
    return sig, const, attrs


def compile_sm90(cfg: TwinConfig):
    """The compiled kernel (``CompiledKernel``) of ``cfg`` for sm_90a."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from .triton_twin import blockscale_fp8_gemm_promote

    sig, const, attrs = signature(cfg)
    src = ASTSource(fn=blockscale_fp8_gemm_promote, signature=sig, constexprs=const, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})


def _resources(cubin: bytes) -> tuple[int, int]:
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
        path = f.name
    try:
        out = subprocess.run([_cuobjdump(), "-res-usage", path], capture_output=True, text=True, timeout=60).stdout
    finally:
        os.unlink(path)
    m = re.search(r"REG:(\d+).*?LOCAL:(\d+)", out, re.S)
    if not m:
        raise RuntimeError(f"cuobjdump -res-usage gave no REG/LOCAL line: {out[:400]}")
    return int(m.group(1)), int(m.group(2))


def ctas_per_sm(registers: int, shared: int, num_warps: int) -> int:
    regs_per_warp = -(-registers * 32 // 256) * 256
    by_regs = SM90_REGS // (regs_per_warp * num_warps)
    by_smem = SM90_SMEM // (shared + SM90_SMEM_RESERVED) if shared else 32
    return max(0, min(by_regs, by_smem, SM90_MAX_WARPS // num_warps))


def report(cfg: TwinConfig) -> AotReport:
    ck = compile_sm90(cfg)
    regs, local = _resources(ck.asm["cubin"])
    ptx = ck.asm["ptx"]
    shapes = sorted(set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m\d+n\d+k\d+)", ptx)))
    shared = int(ck.metadata.shared)
    warps = int(getattr(ck.metadata, "num_warps", cfg.num_warps))
    return AotReport(config=cfg.label, registers=regs, spill_bytes=local, shared_bytes=shared,
                     total_warps=warps, ctas_per_sm=ctas_per_sm(regs, shared, warps), mma=shapes,
                     waits_per_loop_estimate=ptx.count("wgmma.wait_group"))

"""Compile the Triton twins ahead of time for a GPU target, on a machine with no GPU.

``triton.compile`` lowers a kernel for ``GPUTarget("cuda", 90, 32)`` (H100/H200: PTX
and cubin, ptxas ships with triton) or ``GPUTarget("hip", "gfx950", 64)`` (MI355X:
AMDGCN) without a device. That gives static evidence for the GPU code path the CPU twin
does not execute (the interpreter runs ``SOFT_CVT=True``, the GPU ``SOFT_CVT=False``):

* the compiled kernel's name, produced by the ``repr`` hook from the constexprs
  (``moe2_gemm_pf8_s<hex>``, ``moe_reduce_infp8_s<hex>``, ...);
* the store side converts with the hardware fp8 instruction
  (``cvt.rn.satfinite.e4m3x2.f32`` on sm_90, ``v_cvt_(scalef32_)pk_fp8_f32`` on gfx950)
  and the datapath is a bf16 MMA (``wgmma ... .bf16.bf16`` / ``v_mfma_f32_*_bf16``), never
  an fp8 one: the compute stays bf16, only the partial store changes;
* the reduce side decodes fp8 with the hardware conversion.
"""
from __future__ import annotations

from dataclasses import dataclass

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.routing import ROUTE_BLOCK_M
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.triton_stage2_gemm import GemmConfig

TARGETS = {"sm90": ("cuda", 90, 32), "gfx950": ("hip", "gfx950", 64)}


@dataclass(frozen=True)
class CompiledKernel:
    name: str  # the kernel symbol the profiler will show
    asm: str  # PTX (cuda) or AMDGCN (hip)
    target: str


def _target(name: str):
    from triton.backends.compiler import GPUTarget

    if name not in TARGETS:
        raise ValueError(f"unknown target {name!r}; expected one of {sorted(TARGETS)}")
    return GPUTarget(*TARGETS[name])


def _compile(fn, signature: dict, constexprs: dict, target: str, num_warps: int, num_stages: int) -> CompiledKernel:
    import triton
    from triton.compiler import ASTSource

    sig = dict(signature)
    sig.update({k: "constexpr" for k in constexprs})
    src = ASTSource(fn=fn, signature=sig, constexprs=constexprs)
    k = triton.compile(src, target=_target(target), options={"num_warps": num_warps, "num_stages": num_stages})
    return CompiledKernel(name=k.metadata.name, asm=k.asm.get("ptx") or k.asm.get("amdgcn") or "", target=target)


def _jit(fn, repr_fn):
    """A compiled-path JITFunction even when TRITON_INTERPRET=1 made the module's kernel
    an interpreted one."""
    from triton.runtime.jit import JITFunction

    return JITFunction(fn, repr=repr_fn)


def compile_gemm(target: str, scale: float | None, config: GemmConfig | None = None) -> CompiledKernel:
    """The stage-2 GEMM (``scale=None``: bf16 partial store) for ``target``."""
    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import triton_stage2_gemm as g

    cfg = config or GemmConfig()
    pf8 = scale is not None
    sig = {
        "a_ptr": "*bf16", "w_ptr": "*bf16", "out_ptr": "*fp8e4nv" if pf8 else "*bf16",
        "sorted_ids_ptr": "*i32", "block_expert_ptr": "*i32", "num_padded_ptr": "*i32", "topk_w_ptr": "*fp32",
        "num_valid": "i32", "N": "i32", "K": "i32", "num_tiles_m": "i32",
        "stride_a": "i32", "stride_we": "i32", "stride_wn": "i32", "stride_o": "i32",
    }
    ce = {
        "PF8": pf8, "S": float(scale) if pf8 else 1.0, "ACC_OUT": False, "SOFT_CVT": False, "ROUTE_BM": ROUTE_BLOCK_M,
        "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k, "GROUP_M": cfg.group_m, "EVEN_K": True,
    }
    return _compile(_jit(g.moe2_gemm, g._kernel_repr), sig, ce, target, cfg.num_warps, cfg.num_stages)


def compile_reduce(target: str, top_k: int, scale: float | None, block_n: int | None = None) -> CompiledKernel:
    """The top-k reduce (``scale=None``: bf16 partials) for ``target``."""
    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import triton_reduce as r

    in_fp8 = scale is not None
    sig = {"p_ptr": "*fp8e4nv" if in_fp8 else "*bf16", "out_ptr": "*bf16", "M": "i32", "N": "i32", "stride_p": "i32", "stride_o": "i32"}
    ce = {"TOP_K": top_k, "IN_FP8": in_fp8, "S": float(scale) if in_fp8 else 1.0,
          "BLOCK_N": block_n or r.default_block_n(in_fp8), "ROWS": 1, "SOFT_CVT": False}
    return _compile(_jit(r.moe_reduce, r._kernel_repr), sig, ce, target, 4, 1)

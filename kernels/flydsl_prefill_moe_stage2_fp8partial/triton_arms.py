"""Builders for the Triton arms (CUDA, ROCm, and CPU through the interpreter).

``build_bf16``: the baseline, bf16 partials (``moe2_gemm_bf16`` + ``moe_reduce_inbf16``).
``build_fp8``: the card's recipe, fp8 e4m3 partials with the calibrated scale
(``moe2_gemm_pf8_s<hex>`` + ``moe_reduce_infp8_s<hex>``); the scale comes from
``calibration.scale_for(dims)`` (a calibration draw on its own seed), and that one value
is handed to both kernels.

Both follow the problem protocol: ``build(inputs, outputs) -> launch``; everything is
allocated and specialised here; ``launch()`` only enqueues the two kernels.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import triton_reduce, triton_stage2_gemm
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.oracle import dims_of
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.segment import Stage2Launch
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.triton_stage2_gemm import GemmConfig

if TYPE_CHECKING:  # pragma: no cover
    import torch

Tensors = dict[str, "torch.Tensor"]


def check_outputs(outputs: Tensors, dims: dict[str, int]) -> "torch.Tensor":
    import torch

    out = outputs.get("out")
    if out is None:
        raise ValueError(f"outputs must hold 'out'; got {sorted(outputs)}")
    if tuple(out.shape) != (dims["M"], dims["N"]) or out.dtype != torch.bfloat16 or out.stride(1) != 1:
        raise ValueError(f"outputs['out'] must be bf16 [M, N] = {(dims['M'], dims['N'])} contiguous in N, "
                         f"got {out.dtype} {tuple(out.shape)}")
    return out


def build_stage2(
    inputs: Tensors,
    outputs: Tensors,
    *,
    scale: float | None,
    reducer_scale: float | None = None,
    gemm_config: GemmConfig | None = None,
    reduce_block_n: int | None = None,
) -> Stage2Launch:
    """Triton GEMM + Triton reduce. ``scale=None``: bf16 partials; else fp8 with ``scale``.

    reducer_scale: the scale the reducer is compiled with; defaults to ``scale``. Only
    the deliberately broken candidate (``mismatched_scale``) passes another value.
    """
    import torch

    d = dims_of(inputs)
    out = check_outputs(outputs, d)
    fp8 = scale is not None
    if not fp8 and reducer_scale is not None:
        raise ValueError("a bf16 partial takes no reducer scale")
    rscale = scale if reducer_scale is None else reducer_scale
    partial = torch.empty(
        d["M"] * d["top_k"], d["N"], device=out.device, dtype=torch.float8_e4m3fn if fp8 else torch.bfloat16
    )
    gemm, gname = triton_stage2_gemm.launcher(inputs, partial, scale, gemm_config)
    red, rname = triton_reduce.launcher(partial, out, d["top_k"], rscale, block_n=reduce_block_n)
    return Stage2Launch(
        steps=((gname, gemm), (rname, red)),
        partial=partial,
        producer_scale=scale,
        reducer_scale=rscale,
        annotate=out.device.type == "cpu",
    )


def calibrated_scale(inputs: Tensors) -> float:
    """The calibrated partial scale for these inputs' dims (calibration seed, cached)."""
    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.calibration import scale_for

    return scale_for(dims_of(inputs), device=inputs["a2"].device).scale


def build_bf16(inputs: Tensors, outputs: Tensors) -> Stage2Launch:
    """Baseline arm: bf16 partials."""
    return build_stage2(inputs, outputs, scale=None)


def build_fp8(inputs: Tensors, outputs: Tensors) -> Stage2Launch:
    """The card's arm: fp8 e4m3 partials, one calibrated scale for store and reduce."""
    return build_stage2(inputs, outputs, scale=calibrated_scale(inputs))

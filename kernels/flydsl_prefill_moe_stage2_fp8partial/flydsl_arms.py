"""Builders for the ROCm (gfx950 / MI355X) arms: the Triton stage-2 GEMM (its epilogue
stores the partial, bf16 or fp8) followed by the FlyDSL top-k reduce.

``build_fp8``: ``moe2_gemm_pf8_s<hex>`` + ``moe_reduce_infp8_s<hex>`` with the calibrated
scale handed to both; ``build_bf16``: ``moe2_gemm_bf16`` + ``moe_reduce_inbf16``.
``build_fp8_epilogue`` (ablation, three kernels): the GEMM writes raw fp32 accumulator
rows in sorted order (``moe2_gemm_accf32``), the FlyDSL store epilogue applies the
router weight and ``s`` and scatters e4m3 partial rows (``moe2_store_pf8_s<hex>``), the
FlyDSL reduce finishes (``moe_reduce_infp8_s<hex>``). It is slower by construction (an
extra fp32 round trip) and exists to run the FlyDSL store side on hardware under the
verifier's parity checks.

Not exercised on this project's machines (no AMD GPU): the FlyDSL reduce is compiled and
gated for gfx950 here (``gfx950_targets``), and these builders need an MI355X with a
ROCm build of torch and triton to run. On any other device they raise a clear error.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import flydsl_reduce, flydsl_stage2_epilogue, triton_stage2_gemm
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.oracle import dims_of
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.segment import Stage2Launch
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.triton_arms import calibrated_scale, check_outputs

if TYPE_CHECKING:  # pragma: no cover
    import torch

Tensors = dict[str, "torch.Tensor"]


def _require_rocm(t: "torch.Tensor") -> None:
    import torch

    if t.device.type != "cuda" or getattr(torch.version, "hip", None) is None:
        raise RuntimeError(
            "the FlyDSL arms run on ROCm only (an MI355X / gfx950 with a ROCm build of torch); "
            f"got a tensor on {t.device} with torch.version.hip={getattr(torch.version, 'hip', None)!r}. "
            "Use the Triton arms (triton_fp8 / triton_bf16) elsewhere."
        )


def build_stage2(inputs: Tensors, outputs: Tensors, *, scale: float | None) -> Stage2Launch:
    import torch

    d = dims_of(inputs)
    out = check_outputs(outputs, d)
    _require_rocm(out)
    fp8 = scale is not None
    partial = torch.empty(
        d["M"] * d["top_k"], d["N"], device=out.device, dtype=torch.float8_e4m3fn if fp8 else torch.bfloat16
    )
    gemm, gname = triton_stage2_gemm.launcher(inputs, partial, scale)
    red, rname = flydsl_reduce.launcher(partial, out, d["top_k"], scale)
    return Stage2Launch(steps=((gname, gemm), (rname, red)), partial=partial, producer_scale=scale, reducer_scale=scale)


def build_fp8(inputs: Tensors, outputs: Tensors) -> Stage2Launch:
    return build_stage2(inputs, outputs, scale=calibrated_scale(inputs))


def build_bf16(inputs: Tensors, outputs: Tensors) -> Stage2Launch:
    return build_stage2(inputs, outputs, scale=None)


def build_fp8_epilogue(inputs: Tensors, outputs: Tensors) -> Stage2Launch:
    """GEMM to fp32 accumulator rows, FlyDSL fp8 store epilogue, FlyDSL infp8 reduce."""
    import torch

    d = dims_of(inputs)
    out = check_outputs(outputs, d)
    _require_rocm(out)
    scale = calibrated_scale(inputs)
    acc = torch.empty(inputs["sorted_ids"].numel(), d["N"], device=out.device, dtype=torch.float32)
    partial = torch.empty(d["M"] * d["top_k"], d["N"], device=out.device, dtype=torch.float8_e4m3fn)
    gemm, gname = triton_stage2_gemm.launcher(inputs, acc, None)
    store, sname = flydsl_stage2_epilogue.launcher(acc, inputs["sorted_ids"], inputs["topk_weights"], partial, scale)
    red, rname = flydsl_reduce.launcher(partial, out, d["top_k"], scale)
    return Stage2Launch(
        steps=((gname, gemm), (sname, store), (rname, red)), partial=partial, producer_scale=scale, reducer_scale=scale
    )


# --------------------------------------------------------------------------- emulator
# The same arms with the FlyDSL kernels run on the gfx950 emulator
# (``verifiers.gfx950.emulator``) and the Triton GEMM in Triton's CPU interpreter: parity of
# the FlyDSL reduce and store epilogue on a machine with no AMD GPU. ``kernels[role]`` is
# a kernel compiled by the emulated arm's target (``gfx950_targets.EMULATED_ARMS``); its
# scale is a compile-time constant (``config["scale"]``), the producer's is calibrated.


def _reducer_scale(kernels: dict, producer: float | None) -> float | None:
    """The scale the emulated reducer was compiled with: the calibrated one times the
    target's ``scale_factor`` (2.0 for the deliberately mismatched reducer)."""
    cfg = kernels["reduce"].config
    return producer * cfg.get("scale_factor", 1.0) if cfg.get("fp8") and producer is not None else None


def _emulated_reduce(kernels: dict, partial: "torch.Tensor", out: "torch.Tensor", m: int):
    import torch

    red = kernels["reduce"]
    src = partial.view(torch.uint8) if partial.dtype == torch.float8_e4m3fn else partial
    return red.kernel_name, lambda: red(src, out, m)


def build_stage2_emulated(inputs: Tensors, outputs: Tensors, kernels: dict, *, fp8: bool) -> Stage2Launch:
    import torch

    d = dims_of(inputs)
    out = check_outputs(outputs, d)
    scale = calibrated_scale(inputs) if fp8 else None
    partial = torch.empty(d["M"] * d["top_k"], d["N"], device=out.device,
                          dtype=torch.float8_e4m3fn if fp8 else torch.bfloat16)
    gemm, gname = triton_stage2_gemm.launcher(inputs, partial, scale)
    rname, red = _emulated_reduce(kernels, partial, out, d["M"])
    return Stage2Launch(steps=((gname, gemm), (rname, red)), partial=partial, producer_scale=scale,
                        reducer_scale=_reducer_scale(kernels, scale), annotate=True)


def build_fp8_emulated(inputs: Tensors, outputs: Tensors, kernels: dict) -> Stage2Launch:
    return build_stage2_emulated(inputs, outputs, kernels, fp8=True)


def build_bf16_emulated(inputs: Tensors, outputs: Tensors, kernels: dict) -> Stage2Launch:
    return build_stage2_emulated(inputs, outputs, kernels, fp8=False)


def build_fp8_epilogue_emulated(inputs: Tensors, outputs: Tensors, kernels: dict) -> Stage2Launch:
    """GEMM to fp32 accumulator rows (CPU), FlyDSL store epilogue and reduce (emulated)."""
    import torch

    d = dims_of(inputs)
    out = check_outputs(outputs, d)
    scale = calibrated_scale(inputs)
    sorted_ids = inputs["sorted_ids"]
    acc = torch.empty(sorted_ids.numel(), d["N"], device=out.device, dtype=torch.float32)
    partial = torch.empty(d["M"] * d["top_k"], d["N"], device=out.device, dtype=torch.float8_e4m3fn)
    gemm, gname = triton_stage2_gemm.launcher(inputs, acc, None)
    store = kernels["store"]
    weights = inputs["topk_weights"].reshape(-1)
    dst = partial.view(torch.uint8)
    rows, num_valid = sorted_ids.numel(), partial.shape[0]
    rname, red = _emulated_reduce(kernels, partial, out, d["M"])
    return Stage2Launch(
        steps=((gname, gemm), (store.kernel_name, lambda: store(acc, sorted_ids, weights, dst, rows, num_valid)),
               (rname, red)),
        partial=partial, producer_scale=scale, reducer_scale=_reducer_scale(kernels, scale), annotate=True,
    )


# --------------------------------------------------------------------------- fused FlyDSL GEMM
# The card's stage 2 in FlyDSL end to end: the fused down-proj GEMM whose epilogue stores the
# partial (``flydsl_stage2_gemm``: ``moe2_gemm_cshuffle_pf8_s<hex>``, or ``moe2_gemm_bf16``
# for the baseline) and the FlyDSL reduce, one scale handed to both compiles.


def build_fused(inputs: Tensors, outputs: Tensors, *, fp8: bool) -> Stage2Launch:
    import torch

    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import flydsl_stage2_gemm

    d = dims_of(inputs)
    out = check_outputs(outputs, d)
    _require_rocm(out)
    scale = calibrated_scale(inputs) if fp8 else None
    partial = torch.empty(d["M"] * d["top_k"], d["N"], device=out.device,
                          dtype=torch.float8_e4m3fn if fp8 else torch.bfloat16)
    gemm, gname = flydsl_stage2_gemm.launcher(inputs, partial, scale)
    red, rname = flydsl_reduce.launcher(partial, out, d["top_k"], scale)
    return Stage2Launch(steps=((gname, gemm), (rname, red)), partial=partial, producer_scale=scale, reducer_scale=scale)


def build_fused_fp8(inputs: Tensors, outputs: Tensors) -> Stage2Launch:
    return build_fused(inputs, outputs, fp8=True)


def build_fused_bf16(inputs: Tensors, outputs: Tensors) -> Stage2Launch:
    return build_fused(inputs, outputs, fp8=False)


def _scaled(kernels: dict, role: str, calibrated: float | None) -> float | None:
    """The scale an emulated kernel was compiled with: calibrated x its target's factor."""
    cfg = kernels[role].config
    return calibrated * cfg.get("scale_factor", 1.0) if calibrated is not None and cfg.get("fp8") else None


def build_fused_emulated(inputs: Tensors, outputs: Tensors, kernels: dict) -> Stage2Launch:
    """Fused FlyDSL GEMM and FlyDSL reduce, both on the gfx950 emulator; ``kernels["gemm"]``
    and ``kernels["reduce"]`` carry the compile-time scale each was built with."""
    import torch

    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import flydsl_stage2_gemm

    d = dims_of(inputs)
    out = check_outputs(outputs, d)
    fp8 = bool(kernels["gemm"].config.get("fp8"))
    calibrated = calibrated_scale(inputs) if fp8 else None
    partial = torch.empty(d["M"] * d["top_k"], d["N"], device=out.device,
                          dtype=torch.float8_e4m3fn if fp8 else torch.bfloat16)
    flydsl_stage2_gemm.check_partial(inputs, partial, calibrated)
    gemm = kernels["gemm"]
    args = flydsl_stage2_gemm.launcher_args(inputs, partial)
    rname, red = _emulated_reduce(kernels, partial, out, d["M"])
    return Stage2Launch(steps=((gemm.kernel_name, lambda: gemm(*args)), (rname, red)), partial=partial,
                        producer_scale=_scaled(kernels, "gemm", calibrated),
                        reducer_scale=_scaled(kernels, "reduce", calibrated), annotate=True)

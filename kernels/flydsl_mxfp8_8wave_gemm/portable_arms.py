"""Portable arm builders of the mxfp8 GEMM problem (candidate contract: ``build -> launch``;
the specs that name them are in ``arms.py``).

``build_torch``: dequantise both operands in torch and multiply in fp32 (the oracle's own
recipe, timed; cuBLAS / hipBLASLt / CPU BLAS). ``build_triton``: the Triton twin in
``triton_gemm.py``. Both read the plain operands (``a``, ``a_scale_e8m0``, ``b``,
``b_scale_e8m0``) and write ``outputs["c"]`` in place.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch

Tensors = dict[str, "torch.Tensor"]


def _plain_operands(inputs: Tensors, outputs: Tensors) -> tuple:
    missing = [k for k in ("a", "a_scale_e8m0", "b", "b_scale_e8m0") if k not in inputs]
    if missing or "c" not in outputs:
        raise KeyError(
            f"mxfp8 GEMM arm: missing inputs {missing} or output 'c' (have {sorted(inputs)}, {sorted(outputs)})"
        )
    return inputs["a"], inputs["a_scale_e8m0"], inputs["b"], inputs["b_scale_e8m0"], outputs["c"]


def build_torch(inputs: Tensors, outputs: Tensors) -> Callable[[], None]:
    """Dequantise -> fp32 matmul -> bf16, in torch, every call."""
    import torch

    from skill_kernels.flydsl_mxfp8_8wave_gemm.oracle import mxfp8_gemm_fp32

    a, sa, b, sb, c = _plain_operands(inputs, outputs)
    if torch.get_float32_matmul_precision() != "highest":
        raise RuntimeError(
            "build_torch: torch float32 matmul precision is "
            f"{torch.get_float32_matmul_precision()!r}; the fp32 arm needs 'highest' (no TF32)"
        )

    def launch() -> None:
        # no NaN-byte check here: it reads a flag back from the device, and a launch that waits
        # for the device cannot queue its work ahead of the judge's gate (every call "late" on a GPU)
        c.copy_(mxfp8_gemm_fp32(a, sa, b, sb, check_nan=False).to(torch.bfloat16))

    return launch


def build_triton(inputs: Tensors, outputs: Tensors) -> Callable[[], None]:
    """The Triton dequant-in-register twin (TRITON_INTERPRET=1 on CPU)."""
    from skill_kernels.flydsl_mxfp8_8wave_gemm.triton_gemm import mxfp8_gemm_triton

    a, sa, b, sb, c = _plain_operands(inputs, outputs)
    mxfp8_gemm_triton(a, sa, b, sb, c)  # compile (and validate shapes) once, untimed

    def launch() -> None:
        mxfp8_gemm_triton(a, sa, b, sb, c)

    return launch


def build_scales_pinned(inputs: Tensors, outputs: Tensors) -> Callable[[], None]:
    """Ablation (must FAIL parity): the scales pinned to 1.0, i.e. what a block-scale
    kernel's scaled MFMA holds (E8M0 0x7F) with no software promote behind it."""
    import torch

    a, _, b, _, c = _plain_operands(inputs, outputs)

    def launch() -> None:
        c.copy_((a.to(torch.float32) @ b.to(torch.float32).t()).to(torch.bfloat16))

    return launch

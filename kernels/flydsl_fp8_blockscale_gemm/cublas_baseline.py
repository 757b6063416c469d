"""cuBLAS block-scale fp8 GEMM arm (NVIDIA Hopper): the baseline on the H200.

``torch.nn.functional.scaled_mm`` with ``BlockWise1x128`` on A and ``BlockWise128x128``
on B, the call measured in ``notes/h200-measurements.md``. What cuBLAS wants:

- A ``[M, K]`` row major, B as ``[K, N]`` column major (``b.t()``, no copy);
- A's scales ``[M, K/128]`` *column major*: exactly ``a_scale_t.t()`` (no copy);
- B's 128x128 scales as ``[L4, N/128]`` column major, where ``L4 = round_up(K/128, 4)``:
  the ``[N/128, K/128]`` scales padded along K/128 to a multiple of 4, then ``.t()``.
  Without the pad K=768 (6 blocks) is refused ("scale_b must have shape 8 x 56").

Everything is prepared in ``build`` (the pad copies ``b_scale`` once: it is one of the
problem's ``static_inputs``, fixed like the weights it scales); ``launch`` is one library call that writes ``c``
in place through the ``out=`` overload of ``aten._scaled_mm_v2`` when this torch has
it (checked bitwise against ``F.scaled_mm`` once, in build), else ``F.scaled_mm``
followed by a copy (``launch.variant`` says which). Requirements reported upstream:
sm_90 and cuBLAS >= 12.9.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .contract import SCALE_BLOCK, ContractError, check_contract, platform_of

if TYPE_CHECKING:  # pragma: no cover
    import torch

Launch = Callable[[], None]


class PlatformError(RuntimeError):
    """The arm cannot run on this platform."""


def padded_b_scale(b_scale: "torch.Tensor") -> "torch.Tensor":
    """``[N/128, K/128]`` -> contiguous ``[N/128, round_up(K/128, 4)]`` (zero pad: no such K blocks)."""
    import torch.nn.functional as F

    kb = b_scale.shape[1]
    pad = -kb % 4
    return F.pad(b_scale, (0, pad)).contiguous() if pad else b_scale.contiguous()


def scaled_mm_operands(inputs: dict[str, "torch.Tensor"]) -> tuple["torch.Tensor", ...]:
    """(mat_a, mat_b, scale_a, scale_b) in the layouts cuBLAS's block-scale GEMM takes."""
    a, b = inputs["a"], inputs["b"]
    scale_a = inputs["a_scale_t"].t()  # [M, K/128], column major
    scale_b = padded_b_scale(inputs["b_scale"]).t()  # [L4, N/128], column major
    return a, b.t(), scale_a, scale_b


def build(inputs: dict[str, "torch.Tensor"], outputs: dict[str, "torch.Tensor"]) -> Launch:
    dims = check_contract(inputs, outputs)
    platform = platform_of(inputs["a"])
    if platform != "cuda":
        raise PlatformError(
            f"cublas_blockscale runs on NVIDIA GPUs only (cuBLAS block-scale GEMM, sm_90); this is "
            f"{platform}. Use ck_blockscale on ROCm or torch_dequant anywhere."
        )
    import torch
    import torch.nn.functional as F

    if dims["K"] % SCALE_BLOCK:
        raise ContractError(f"K={dims['K']} must be a multiple of {SCALE_BLOCK}")
    c = outputs["c"]
    mat_a, mat_b, scale_a, scale_b = scaled_mm_operands(inputs)
    recipe_a, recipe_b = F.ScalingType.BlockWise1x128, F.ScalingType.BlockWise128x128

    def reference_call() -> "torch.Tensor":
        return F.scaled_mm(mat_a, mat_b, scale_a, recipe_a, scale_b, recipe_b, output_dtype=torch.bfloat16)

    try:
        expected = reference_call()
    except (RuntimeError, ValueError) as e:
        raise PlatformError(
            f"cuBLAS block-scale GEMM refused {dims['M']}x{dims['N']}x{dims['K']} "
            f"(needs sm_90 and cuBLAS >= 12.9): {e}"
        ) from e

    out_op = getattr(getattr(torch.ops.aten, "_scaled_mm_v2", None), "out", None)

    def launch_out() -> None:
        out_op(mat_a, mat_b, [scale_a], [recipe_a.value], [], [scale_b], [recipe_b.value], [],
               None, torch.bfloat16, [], False, out=c)

    def launch_copy() -> None:
        c.copy_(reference_call())

    launch, variant = launch_copy, "scaled_mm+copy"
    if out_op is not None:
        try:
            launch_out()
            torch.cuda.synchronize()
            if torch.equal(c, expected):
                launch, variant = launch_out, "scaled_mm_v2.out"
        except (RuntimeError, TypeError, ValueError):
            pass
    launch()
    torch.cuda.synchronize()
    launch.variant = variant  # type: ignore[attr-defined]
    return launch

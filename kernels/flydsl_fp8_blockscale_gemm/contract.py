"""The input contract every arm of this problem shares, and a checker for it.

Inputs (all on one device, contiguous):

==============  ==================  =========================================
name            dtype               shape / meaning
==============  ==================  =========================================
``a``           float8_e4m3fn       ``[M, K]`` activations, row major
``a_scale``     float32             ``[M, K/128]`` one scale per row per 128-K block
``a_scale_t``   float32             ``[K/128, M]`` the same scales, transposed, contiguous
``b``           float8_e4m3fn       ``[N, K]`` weights, row major (K contiguous)
``b_shuffled``  float8_e4m3fn       ``[N, K]`` the CK 16x16 preshuffle of ``b``
``b_scale``     float32             ``[N/128, K/128]`` one scale per 128x128 block
==============  ==================  =========================================

Output: ``c`` bfloat16 ``[M, N]``. ``K`` and ``N`` must be multiples of 128 (the
scale block); ``M`` is free.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # pragma: no cover
    import torch

SCALE_BLOCK = 128
INPUT_NAMES = ("a", "a_scale", "a_scale_t", "b", "b_shuffled", "b_scale")
OUTPUT_NAMES = ("c",)
Platform = Literal["cuda", "rocm", "cpu"]


class ContractError(ValueError):
    """An input or output tensor does not follow the problem's contract."""


def platform_of(t: "torch.Tensor") -> Platform:
    """``cuda``, ``rocm`` (a HIP build's "cuda" device) or ``cpu``."""
    import torch

    if t.device.type == "cuda":
        return "rocm" if torch.version.hip else "cuda"
    if t.device.type == "cpu":
        return "cpu"
    raise ContractError(f"unsupported device {t.device}; expected a cuda/rocm GPU or the cpu")


def check_contract(
    inputs: dict[str, "torch.Tensor"], outputs: dict[str, "torch.Tensor"] | None = None
) -> dict[str, int]:
    """Validate ``inputs`` (and ``outputs`` when given); return ``{"M", "N", "K"}``.

    Raises :class:`ContractError` naming the tensor and what was expected.
    """
    import torch

    missing = [n for n in INPUT_NAMES if n not in inputs]
    if missing:
        raise ContractError(f"inputs: missing {missing}; expected all of {list(INPUT_NAMES)}")
    for name in INPUT_NAMES:
        if not isinstance(inputs[name], torch.Tensor):
            raise ContractError(f"inputs[{name!r}]: expected a torch.Tensor, got {type(inputs[name]).__name__}")
    a = inputs["a"]
    if a.dim() != 2:
        raise ContractError(f"inputs['a']: expected [M, K], got shape {tuple(a.shape)}")
    m, k = a.shape
    n = inputs["b"].shape[0] if inputs["b"].dim() == 2 else -1
    if k % SCALE_BLOCK or k == 0:
        raise ContractError(f"inputs['a']: K={k} must be a positive multiple of {SCALE_BLOCK}")
    if n <= 0 or n % SCALE_BLOCK:
        raise ContractError(
            f"inputs['b']: expected [N, K] with N a positive multiple of {SCALE_BLOCK}, "
            f"got shape {tuple(inputs['b'].shape)}"
        )
    kb, nb = k // SCALE_BLOCK, n // SCALE_BLOCK
    fp8 = torch.float8_e4m3fn
    expected = {
        "a": ((m, k), fp8),
        "a_scale": ((m, kb), torch.float32),
        "a_scale_t": ((kb, m), torch.float32),
        "b": ((n, k), fp8),
        "b_shuffled": ((n, k), fp8),
        "b_scale": ((nb, kb), torch.float32),
    }
    device = a.device
    for name, (shape, dtype) in expected.items():
        t = inputs[name]
        if tuple(t.shape) != shape:
            raise ContractError(f"inputs[{name!r}]: expected shape {list(shape)}, got {list(t.shape)}")
        if t.dtype != dtype:
            raise ContractError(f"inputs[{name!r}]: expected dtype {dtype}, got {t.dtype}")
        if not t.is_contiguous():
            raise ContractError(f"inputs[{name!r}]: must be contiguous (row major)")
        if t.device != device:
            raise ContractError(f"inputs[{name!r}]: on {t.device}, but 'a' is on {device}")
    if outputs is not None:
        c = outputs.get("c")
        if not isinstance(c, torch.Tensor):
            raise ContractError("outputs: expected a preallocated tensor 'c'")
        if tuple(c.shape) != (m, n) or c.dtype != torch.bfloat16 or not c.is_contiguous():
            raise ContractError(
                f"outputs['c']: expected contiguous bfloat16 [{m}, {n}], "
                f"got {c.dtype} {list(c.shape)} contiguous={c.is_contiguous()}"
            )
        if c.device != device:
            raise ContractError(f"outputs['c']: on {c.device}, but the inputs are on {device}")
    return {"M": m, "N": n, "K": k}

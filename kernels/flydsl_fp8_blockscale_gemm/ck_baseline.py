"""CK a8w8 block-scale GEMM arm (ROCm): the card's production baseline, through aiter.

Prefers the b-preshuffle kernel the card measured against
(``gemm_a8w8_blockscale_bpreshuffle``: ``b_shuffled`` + A scales transposed and
contiguous, viewed as ``[M, K/128]``), else the plain one (``b`` + ``a_scale``).
Out-parameter entry points (``*_ck(..., Y)``) are used when aiter exposes them so
``launch`` is one kernel; otherwise the returned tensor is copied into ``c``
(``launch.variant`` says which). aiter is not a dependency of this project: without
it this arm raises a clear error.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .contract import check_contract, platform_of

if TYPE_CHECKING:  # pragma: no cover
    import torch

Launch = Callable[[], None]


class PlatformError(RuntimeError):
    """The arm cannot run on this platform."""


def _import_aiter() -> Any:
    try:
        import aiter  # type: ignore[import-not-found]
    except ImportError as e:
        raise PlatformError(
            "ck_blockscale needs AMD's aiter (CK a8w8 block-scale GEMM): install aiter on the ROCm "
            f"box (https://github.com/ROCm/aiter); import failed: {e}"
        ) from e
    return aiter


def build(inputs: dict[str, "torch.Tensor"], outputs: dict[str, "torch.Tensor"]) -> Launch:
    check_contract(inputs, outputs)
    platform = platform_of(inputs["a"])
    if platform != "rocm":
        raise PlatformError(f"ck_blockscale runs on ROCm only (CK via aiter); this is {platform}")
    import torch

    aiter = _import_aiter()
    a, c = inputs["a"], outputs["c"]
    m, kb = inputs["a_scale"].shape
    # CK's b-preshuffle kernel reads A's scales K-block major: [K/128, M] memory viewed as [M, K/128]
    a_scale_t_view = inputs["a_scale_t"].view(m, kb)
    b_scale = inputs["b_scale"]
    candidates: list[tuple[str, Callable[[], Any], bool]] = []
    if hasattr(aiter, "gemm_a8w8_blockscale_bpreshuffle_ck"):
        fn = aiter.gemm_a8w8_blockscale_bpreshuffle_ck
        candidates.append(("bpreshuffle_ck(out)", lambda: fn(a, inputs["b_shuffled"], a_scale_t_view, b_scale, c), True))
    if hasattr(aiter, "gemm_a8w8_blockscale_bpreshuffle"):
        fn2 = aiter.gemm_a8w8_blockscale_bpreshuffle
        candidates.append(("bpreshuffle", lambda: fn2(a, inputs["b_shuffled"], a_scale_t_view, b_scale, torch.bfloat16), False))
    if hasattr(aiter, "gemm_a8w8_blockscale"):
        fn3 = aiter.gemm_a8w8_blockscale
        candidates.append(("plain", lambda: fn3(a, inputs["b"], inputs["a_scale"], b_scale, torch.bfloat16), False))
    if not candidates:
        raise PlatformError("aiter is installed but exposes no gemm_a8w8_blockscale* entry point")
    errors = []
    for variant, call, writes_out in candidates:
        try:
            result = call()
            torch.cuda.synchronize()
        except (RuntimeError, TypeError, ValueError, AssertionError) as e:
            errors.append(f"{variant}: {e}")
            continue
        if writes_out:
            launch = call
        else:
            def launch(call: Callable[[], Any] = call) -> None:
                c.copy_(call())
            if tuple(result.shape) != tuple(c.shape):
                errors.append(f"{variant}: returned shape {tuple(result.shape)}")
                continue
        launch()
        torch.cuda.synchronize()
        launch.variant = variant  # type: ignore[attr-defined]
        return launch
    raise PlatformError("every aiter block-scale entry point failed: " + "; ".join(errors))

"""Inputs, outputs and parity perturbations in the problem's contract (see ``contract``).

The data is shaped like a transformer linear layer's, so that the block scales
really vary and a wrong scale anywhere shows up:

- activations: unit Gaussians times a per-token gain (log-normal, sigma 0.5) and a
  handful of outlier channels (about 1 % of K, x8..x32, the "massive activation"
  pattern of LLMs), so 1x128 blocks that hold an outlier get a much larger scale
  than their neighbours in the same row;
- weights: Gaussians with std 0.02 times a per-128x128-block gain (log-normal,
  sigma 0.5), so no two weight blocks share a scale.

Output magnitudes are O(1), like a real layer's. That matters for the strict
rtol=atol=1e-2 check: Hopper's fp8 tensor cores are reported to keep only about 14
bits while accumulating inside an MMA (DeepSeek-V3 report, H800), an error that grows
with the output's magnitude; at O(1) it stays far below atol for any correct kernel
(not measured here: the H200 bench records it), while the E8M0 rounding (up to a
factor sqrt(2) per block) stays far above it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .contract import SCALE_BLOCK
from .quant import quantize_activations, quantize_weights

if TYPE_CHECKING:  # pragma: no cover
    import torch

Tensors = dict[str, "torch.Tensor"]

OUTLIER_CHANNEL_FRACTION = 0.01
OUTLIER_GAIN = (8.0, 32.0)
TOKEN_GAIN_SIGMA = 0.5
WEIGHT_STD = 0.02
WEIGHT_BLOCK_GAIN_SIGMA = 0.5


def _check_dims(dims: dict[str, int]) -> tuple[int, int, int]:
    try:
        m, n, k = int(dims["M"]), int(dims["N"]), int(dims["K"])
    except KeyError as e:
        raise ValueError(f"dims: missing {e.args[0]!r}; expected M, N, K") from None
    if m <= 0 or n <= 0 or k <= 0:
        raise ValueError(f"dims: M, N, K must be positive, got {dims}")
    if n % SCALE_BLOCK or k % SCALE_BLOCK:
        raise ValueError(f"dims: N={n} and K={k} must be multiples of {SCALE_BLOCK} (the scale block)")
    return m, n, k


def realistic_activations(m: int, k: int, gen: "torch.Generator", device: Any) -> "torch.Tensor":
    """fp32 ``[M, K]`` with per-token gains and a few outlier channels; never zero."""
    import torch

    x = torch.randn(m, k, generator=gen, device=device)
    token_gain = torch.exp(TOKEN_GAIN_SIGMA * torch.randn(m, 1, generator=gen, device=device))
    channel_gain = torch.ones(1, k, device=device)
    n_out = max(1, round(OUTLIER_CHANNEL_FRACTION * k))
    idx = torch.randperm(k, generator=gen, device=device)[:n_out]
    lo, hi = OUTLIER_GAIN
    channel_gain[0, idx] = lo + (hi - lo) * torch.rand(n_out, generator=gen, device=device)
    return x * token_gain * channel_gain


def realistic_weights(n: int, k: int, gen: "torch.Generator", device: Any) -> "torch.Tensor":
    """fp32 ``[N, K]``, std 0.02 with a distinct gain per 128x128 block; never zero."""
    import torch

    w = WEIGHT_STD * torch.randn(n, k, generator=gen, device=device)
    gain = torch.exp(
        WEIGHT_BLOCK_GAIN_SIGMA
        * torch.randn(n // SCALE_BLOCK, 1, k // SCALE_BLOCK, 1, generator=gen, device=device)
    )
    return (w.view(n // SCALE_BLOCK, SCALE_BLOCK, k // SCALE_BLOCK, SCALE_BLOCK) * gain).view(n, k)


def assemble_inputs(
    a: "torch.Tensor", a_scale: "torch.Tensor", b: "torch.Tensor", b_scale: "torch.Tensor"
) -> Tensors:
    """The contract's six inputs from quantised operands (derives ``a_scale_t`` and ``b_shuffled``)."""
    from skill_kernels.fp8_common.layouts import preshuffle_b

    return {
        "a": a.contiguous(),
        "a_scale": a_scale.contiguous(),
        "a_scale_t": a_scale.t().contiguous(),
        "b": b.contiguous(),
        "b_shuffled": preshuffle_b(b.contiguous()),
        "b_scale": b_scale.contiguous(),
    }


def make_inputs(dims: dict[str, int], seed: int, device: Any = "cpu") -> Tensors:
    """Seeded, quantised inputs for ``dims`` on ``device`` (generated there)."""
    import torch

    m, n, k = _check_dims(dims)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    a, a_scale = quantize_activations(realistic_activations(m, k, gen, device))
    b, b_scale = quantize_weights(realistic_weights(n, k, gen, device))
    return assemble_inputs(a, a_scale, b, b_scale)


def make_outputs(dims: dict[str, int], device: Any = "cpu") -> Tensors:
    """Preallocated ``c`` (bf16 ``[M, N]``); the verifier poisons it before each run."""
    import torch

    m, n, _ = _check_dims(dims)
    return {"c": torch.empty(m, n, dtype=torch.bfloat16, device=device)}


# --- perturbations (parity runs each on top of the seeded inputs) ------------------

def _cloned(inputs: Tensors) -> Tensors:
    return {name: t.clone() for name, t in inputs.items()}


def scale_activation_scales(factor: float) -> Callable[[Tensors], Tensors]:
    """Multiply A's block scales (both layouts) by ``factor``: C scales by ``factor``.

    x3 gives larger magnitudes; x0.01 puts the outputs inside atol, where only relative
    L2 and cosine can tell right from wrong. Only A's scales move, so C grows at most
    3x: Hopper's fp8 MMA is reported to accumulate with reduced precision inside each
    128-K block (an error that grows with the block partials), and a 9x larger C could
    start to eat into atol near zero for *every* correct kernel, cuBLAS included.
    """

    def perturb(inputs: Tensors) -> Tensors:
        out = _cloned(inputs)
        for name in ("a_scale", "a_scale_t"):
            out[name] = (out[name] * factor).contiguous()
        return out

    perturb.__name__ = f"a_scales_x{factor:g}"
    return perturb


def flip_sign_a(inputs: Tensors) -> Tensors:
    """Negate every activation by flipping the fp8 sign bit (exact; C becomes -C)."""
    import torch

    out = _cloned(inputs)
    bits = out["a"].view(torch.uint8)
    out["a"] = torch.bitwise_xor(bits, 0x80).view(torch.float8_e4m3fn)
    return out


PERTURBATIONS: dict[str, Callable[[Tensors], Tensors]] = {
    "a_scales_x3": scale_activation_scales(3.0),
    "a_scales_x0.01": scale_activation_scales(0.01),
    "a_sign_flip": flip_sign_a,
}

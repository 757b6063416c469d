"""Inputs, outputs and parity perturbations of the mxfp8 GEMM problem.

Input names (every arm reads the subset it needs; all are consistent views of one
quantised problem):

====================  =================  ===========  ==========================================
name                  dtype              shape        what
====================  =================  ===========  ==========================================
``a``                 float8_e4m3fn      [M, K]       activations, row-major
``a_scale_e8m0``      uint8              [M, K/32]    A's ue8m0 scale bytes, quantiser layout
``a_scale_shuffled``  uint8              [K/32, M]    ``shuffle_mxfp8_a_scale(a_scale_e8m0)``
``b``                 float8_e4m3fn      [N, K]       weight, K-contiguous (C = A B^T)
``b_shuffled``        float8_e4m3fn      [N, K]       ``preshuffle_b(b)`` (CK 16x16 layout)
``b_scale_e8m0``      uint8              [N, K/32]    B's ue8m0 scale bytes
``b_scale_shuffled``  uint8              [K/32, N]    ``shuffle_mxfp8_b_scale(b_scale_e8m0)``
====================  =================  ===========  ==========================================

Output: ``c`` bf16 ``[M, N]``.

The data looks like a transformer linear layer's, so that neighbouring 32-blocks get
different scales and any scale applied to the wrong block (or per 128 instead of per
32, or not at all) shows: activations are Gaussians times a log-normal per-token gain
with ~1 % outlier channels (x8..x32); weights are N(0, 0.02) times a log-normal gain per
32-element block. Outputs are O(1). Everything is generated on the CPU from the seed and
then moved, so every platform sees the same bytes.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import torch

Tensors = dict[str, "torch.Tensor"]

MX_BLOCK = 32
OUTLIER_CHANNEL_FRACTION = 0.01
OUTLIER_GAIN = (8.0, 32.0)
TOKEN_GAIN_SIGMA = 0.5
WEIGHT_STD = 0.02
WEIGHT_BLOCK_GAIN_SIGMA = 1.0


def check_dims(dims: dict[str, int]) -> tuple[int, int, int]:
    """The problem's shape contract (the operator's: M, N multiples of 64, K of 128, K >= 256)."""
    try:
        m, n, k = int(dims["M"]), int(dims["N"]), int(dims["K"])
    except KeyError as e:
        raise ValueError(f"mxfp8 problem dims: missing {e.args[0]!r}; expected M, N, K") from None
    bad = []
    if m <= 0 or m % 64:
        bad.append(f"M={m} must be a positive multiple of 64 (packed A-scale group)")
    if n <= 0 or n % 64:
        bad.append(f"N={n} must be a positive multiple of 64 (packed B-scale group)")
    if k < 256 or k % 128:
        bad.append(f"K={k} must be a multiple of 128 and >= 256")
    if bad:
        raise ValueError("mxfp8 problem dims " + str(dims) + ": " + "; ".join(bad))
    return m, n, k


def realistic_activations(m: int, k: int, gen: "torch.Generator", device: Any = None) -> "torch.Tensor":
    """``device`` None: on the CPU (``make_inputs``: the same bytes on every platform); else on
    ``gen``'s device (``refresh_inputs``: fresh values per timed call)."""
    import torch

    x = torch.randn(m, k, generator=gen, device=device)
    token_gain = torch.exp(TOKEN_GAIN_SIGMA * torch.randn(m, 1, generator=gen, device=device))
    channel_gain = torch.ones(1, k, device=device)
    n_out = max(1, round(OUTLIER_CHANNEL_FRACTION * k))
    idx = torch.randperm(k, generator=gen, device=device)[:n_out]
    lo, hi = OUTLIER_GAIN
    channel_gain[0, idx] = lo + (hi - lo) * torch.rand(n_out, generator=gen, device=device)
    return x * token_gain * channel_gain


def realistic_weights(n: int, k: int, gen: "torch.Generator") -> "torch.Tensor":
    import torch

    w = WEIGHT_STD * torch.randn(n, k, generator=gen)
    gain = torch.exp(WEIGHT_BLOCK_GAIN_SIGMA * torch.randn(n, k // MX_BLOCK, 1, generator=gen))
    return (w.view(n, k // MX_BLOCK, MX_BLOCK) * gain).view(n, k)


def assemble_inputs(a: "torch.Tensor", a_exps: "torch.Tensor", b: "torch.Tensor", b_exps: "torch.Tensor") -> Tensors:
    """All seven inputs from the quantised operands (derives the shuffled layouts)."""
    from skill_kernels.fp8_common.layouts import preshuffle_b, shuffle_mxfp8_a_scale, shuffle_mxfp8_b_scale

    a, a_exps, b, b_exps = (t.contiguous() for t in (a, a_exps, b, b_exps))
    return {
        "a": a,
        "a_scale_e8m0": a_exps,
        "a_scale_shuffled": shuffle_mxfp8_a_scale(a_exps),
        "b": b,
        "b_shuffled": preshuffle_b(b),
        "b_scale_e8m0": b_exps,
        "b_scale_shuffled": shuffle_mxfp8_b_scale(b_exps),
    }


def make_inputs(dims: dict[str, int], seed: int, device: Any = "cpu") -> Tensors:
    """Seeded, quantised inputs for ``dims``, generated on the CPU and moved to ``device``."""
    import torch

    from .oracle import quantize_mxfp8

    m, n, k = check_dims(dims)
    gen = torch.Generator().manual_seed(int(seed))
    a = quantize_mxfp8(realistic_activations(m, k, gen))
    b = quantize_mxfp8(realistic_weights(n, k, gen))
    inputs = assemble_inputs(a.q, a.exps, b.q, b.exps)
    return {name: t.to(device) for name, t in inputs.items()}


#: the weight and its layouts stay for a whole timing run; the activations change per call
STATIC_INPUTS = ("b", "b_shuffled", "b_scale_e8m0", "b_scale_shuffled")
REFRESHED_INPUTS = ("a", "a_scale_e8m0", "a_scale_shuffled")  # what ``refresh_inputs`` writes


def refresh_inputs(values: Tensors, dims: dict[str, int], seed: int) -> None:
    """New activations in place (``a``, its scale bytes in both layouts), drawn like
    ``make_inputs`` draws them but on the inputs' device: O(M*K) per timed call, where a
    full ``make_inputs`` (the default without this hook) quantises both operands and
    preshuffles the weight on the CPU, which cost the card's verification minutes per shape."""
    import torch

    from skill_kernels.fp8_common.layouts import shuffle_mxfp8_a_scale

    from .oracle import quantize_mxfp8

    m, _, k = check_dims(dims)
    a = values["a"]
    gen = torch.Generator(device=a.device)
    gen.manual_seed(int(seed))
    mx = quantize_mxfp8(realistic_activations(m, k, gen, a.device))
    a.copy_(mx.q)
    values["a_scale_e8m0"].copy_(mx.exps)
    values["a_scale_shuffled"].copy_(shuffle_mxfp8_a_scale(mx.exps))


def oracle_at(values: Tensors, dims: dict[str, int], index: Tensors) -> Tensors:
    """``c`` at flat indices: one float64 dot product of the dequantised row and column per
    element, rounded to bf16 like the oracle (which sums in float32: a last-bit difference)."""
    import torch

    from .oracle import dequantize_mxfp8

    _, n, _ = check_dims(dims)
    idx = index["c"].long()
    rows, cols = idx // n, idx % n
    a = dequantize_mxfp8(values["a"][rows], values["a_scale_e8m0"][rows]).double()
    b = dequantize_mxfp8(values["b"][cols], values["b_scale_e8m0"][cols]).double()
    return {"c": (a * b).sum(dim=1).to(torch.bfloat16)}


def make_outputs(dims: dict[str, int], device: Any = "cpu") -> Tensors:
    """Preallocated ``c`` (bf16 ``[M, N]``); the verifier poisons it before each run."""
    import torch

    m, n, _ = check_dims(dims)
    return {"c": torch.empty(m, n, dtype=torch.bfloat16, device=device)}


def oracle(inputs: Tensors, dims: dict[str, int]) -> Tensors:
    """dequantise -> fp32 matmul -> bf16, from the plain (unshuffled) operands."""
    from .oracle import mxfp8_gemm_oracle

    check_dims(dims)
    return {"c": mxfp8_gemm_oracle(inputs["a"], inputs["a_scale_e8m0"], inputs["b"], inputs["b_scale_e8m0"])}


# --- perturbations: each rebuilds every derived layout so the inputs stay consistent ---

def _rebuilt(inputs: Tensors, *, a=None, a_exps=None, b=None, b_exps=None) -> Tensors:  # noqa: ANN001
    device = inputs["a"].device
    fresh = assemble_inputs(
        (inputs["a"] if a is None else a).cpu(),
        (inputs["a_scale_e8m0"] if a_exps is None else a_exps).cpu(),
        (inputs["b"] if b is None else b).cpu(),
        (inputs["b_scale_e8m0"] if b_exps is None else b_exps).cpu(),
    )
    return {name: t.to(device) for name, t in fresh.items()}


def _shift_exps(exps: "torch.Tensor", delta: int) -> "torch.Tensor":
    import torch

    shifted = exps.to(torch.int32) + delta
    if bool(((shifted < 1) | (shifted > 254)).any()):
        raise ValueError(f"perturbation: shifting e8m0 bytes by {delta} leaves the normal range [1, 254]")
    return shifted.to(torch.uint8)


def a_scales_x8(inputs: Tensors) -> Tensors:
    """Every A scale x8 (e8m0 + 3): C x8 exactly."""
    return _rebuilt(inputs, a_exps=_shift_exps(inputs["a_scale_e8m0"], 3))


def b_scales_div128(inputs: Tensors) -> Tensors:
    """Every B scale / 128 (e8m0 - 7): C / 128, small outputs inside atol (rel-L2 / cosine decide)."""
    return _rebuilt(inputs, b_exps=_shift_exps(inputs["b_scale_e8m0"], -7))


def flip_sign_a(inputs: Tensors) -> Tensors:
    """Negate A by flipping the fp8 sign bit (exact; C becomes -C)."""
    import torch

    bits = inputs["a"].view(torch.uint8)
    return _rebuilt(inputs, a=torch.bitwise_xor(bits, 0x80).view(torch.float8_e4m3fn))


def scale_jitter(inputs: Tensors) -> Tensors:
    """Move every A and B scale by a random power of two in [1/4, 4] per 32-block: a
    kernel that applies scales per 128 (or to the wrong block) cannot track this."""
    import torch

    gen = torch.Generator().manual_seed(1234)
    out = {}
    for name in ("a_scale_e8m0", "b_scale_e8m0"):
        e = inputs[name].cpu()
        jitter = torch.randint(-2, 3, tuple(e.shape), generator=gen, dtype=torch.int32)
        out[name] = (e.to(torch.int32) + jitter).clamp(1, 254).to(torch.uint8)
    return _rebuilt(inputs, a_exps=out["a_scale_e8m0"], b_exps=out["b_scale_e8m0"])


PERTURBATIONS: dict[str, Callable[[Tensors], Tensors]] = {
    "a_scales_x8": a_scales_x8,
    "b_scales_div128": b_scales_div128,
    "flip_sign_a": flip_sign_a,
    "scale_jitter": scale_jitter,
}

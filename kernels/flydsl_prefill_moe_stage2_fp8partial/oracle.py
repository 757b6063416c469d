"""Inputs, the fp32 oracle and torch emulations of both partial formats.

Dimensions (the problem's ``dim_names``): ``M`` tokens, ``N`` hidden size (stage-2 output
width), ``K`` intermediate size (stage-2 GEMM depth), ``E`` experts, ``top_k`` experts
per token.

Inputs (``make_inputs``), all on one device:

============== ===================== =====================================================
name           dtype, shape          meaning
============== ===================== =====================================================
a2             bf16 [M*top_k, K]     stage-2 activations: row ``f = t*top_k + j`` is the
                                     activated stage-1 output of token ``t`` for its
                                     ``j``-th expert (``silu(gate) * up``)
w2             bf16 [E, N, K]        down-projection weights, one [N, K] matrix per expert
topk_ids       int32 [M, top_k]      expert of each (token, slot)
topk_weights   fp32 [M, top_k]       router weight of each (token, slot) (rows sum to 1)
sorted_ids     int32 [P]             flat ids sorted by expert, each expert padded to
                                     ``ROUTE_BLOCK_M`` (64) rows with the sentinel
                                     ``M*top_k``; ``P = padded_capacity(M, E, top_k)``
block_expert   int32 [P/64]          expert of each 64-row block (-1 past ``num_padded``)
num_padded     int32 [1]             rows of ``sorted_ids`` in use (multiple of 64)
============== ===================== =====================================================

Shapes depend on the dims only (not on the seed), so any seed's input set can be copied
into another's buffers.

Output: ``out`` bf16 [M, N].

Where the router weight goes (decided once, used everywhere): the stage-2 GEMM
multiplies each partial row by its router weight in fp32 in the epilogue, before the
store (and so before the fp8 scale), as vLLM's ``MUL_ROUTED_WEIGHT`` and FlyDSL/aiter's
stage-2 ``doweight`` do; the reduce is a plain sum of the ``top_k`` rows. The partial
``P[f] = w[f] * (a2[f] @ w2[e(f)]^T)`` is therefore the weighted contribution, and the
calibration histogram is taken over those weighted values.

``oracle`` computes the partials and their sum in fp32 from ``topk_ids`` (not from the
sorted blocks, so a wrong block layout in a kernel cannot agree with it by
construction). ``emulate_bf16_partial`` / ``emulate_fp8_partial`` reproduce, in torch, the
rounding steps of the two arms (fp32 partial -> bf16 or e4m3 -> fp32 sum -> bf16).

Values: ``a2 = silu(g) * u`` with ``g, u ~ N(0, 1)``; ``w2 ~ N(0, 1/K) * gain_e`` with a
per-expert gain in [0.5, 1.5], so the partial range differs between experts (a single
scale must cover all of them). Weights and activations are drawn with a generator on
the target device (fast at the real sizes); the same seed gives different values on CPU
and CUDA, and the routing is drawn on the CPU (float64) so it is identical everywhere.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import routing
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.fp8_format import dequantize_e4m3, quantize_e4m3

if TYPE_CHECKING:  # pragma: no cover
    import torch

Tensors = dict[str, "torch.Tensor"]
DIM_NAMES = ("M", "N", "K", "E", "top_k")
INPUT_NAMES = ("a2", "w2", "topk_ids", "topk_weights", "sorted_ids", "block_expert", "num_padded")


def check_dims(dims: Mapping[str, int]) -> dict[str, int]:
    """Validate a dims mapping; return a plain dict."""
    missing = [d for d in DIM_NAMES if d not in dims]
    if missing:
        raise ValueError(f"dims {dict(dims)} lack {missing}; expected all of {DIM_NAMES}")
    out = {d: int(dims[d]) for d in DIM_NAMES}
    bad = [d for d, v in out.items() if v <= 0]
    if bad:
        raise ValueError(f"dims must be positive, got {out}")
    if out["top_k"] > out["E"]:
        raise ValueError(f"top_k={out['top_k']} exceeds E={out['E']}")
    if out["N"] % 16 or out["K"] % 16:
        raise ValueError(f"N and K must be multiples of 16 (vector loads / stores), got N={out['N']}, K={out['K']}")
    return out


def _device(device: Any) -> "torch.device":
    import torch

    return torch.device(device if device is not None else "cpu")


def make_inputs(dims: Mapping[str, int], seed: int, device: Any = None) -> Tensors:
    """Draw one input set (see the module docstring for names and layouts)."""
    import torch

    d = check_dims(dims)
    M, N, K, E, top_k = d["M"], d["N"], d["K"], d["E"], d["top_k"]
    dev = _device(device)
    cpu_gen = torch.Generator().manual_seed(seed)
    topk_ids, topk_weights = routing.route(M, E, top_k, cpu_gen, routing.reachable_imbalance(E, top_k))
    sorted_ids, block_expert, num_padded = routing.align_blocks(topk_ids, E, routing.ROUTE_BLOCK_M)

    gen = torch.Generator(device=dev).manual_seed(seed + 0x5EED)
    gate = torch.randn(M * top_k, K, generator=gen, device=dev, dtype=torch.float32)
    up = torch.randn(M * top_k, K, generator=gen, device=dev, dtype=torch.float32)
    a2 = (torch.nn.functional.silu(gate) * up).to(torch.bfloat16)
    del gate, up
    gain = 0.5 + torch.rand(E, 1, 1, generator=gen, device=dev, dtype=torch.float32)
    w2 = torch.empty(E, N, K, device=dev, dtype=torch.bfloat16)
    for e in range(E):  # expert by expert: keeps the fp32 temporary at one [N, K] matrix
        w2[e] = (torch.randn(N, K, generator=gen, device=dev, dtype=torch.float32) * (gain[e] / K**0.5)).to(
            torch.bfloat16
        )
    return {
        "a2": a2,
        "w2": w2,
        "topk_ids": topk_ids.to(dev),
        "topk_weights": topk_weights.to(dev),
        "sorted_ids": sorted_ids.to(dev),
        "block_expert": block_expert.to(dev),
        "num_padded": num_padded.to(dev),
    }


def make_outputs(dims: Mapping[str, int], device: Any = None) -> Tensors:
    import torch

    d = check_dims(dims)
    return {"out": torch.empty(d["M"], d["N"], device=_device(device), dtype=torch.bfloat16)}


def dims_of(inputs: Mapping[str, "torch.Tensor"]) -> dict[str, int]:
    """Recover (M, N, K, E, top_k) from an input set, checking every shape and dtype."""
    import torch

    missing = [n for n in INPUT_NAMES if n not in inputs]
    if missing:
        raise ValueError(f"inputs lack {missing}; expected {INPUT_NAMES}")
    a2, w2, ids, wts = inputs["a2"], inputs["w2"], inputs["topk_ids"], inputs["topk_weights"]
    if w2.dim() != 3:
        raise ValueError(f"w2 must be [E, N, K], got shape {tuple(w2.shape)}")
    E, N, K = w2.shape
    if ids.dim() != 2:
        raise ValueError(f"topk_ids must be [M, top_k], got shape {tuple(ids.shape)}")
    M, top_k = ids.shape
    expect = {
        "a2": ((M * top_k, K), torch.bfloat16),
        "w2": ((E, N, K), torch.bfloat16),
        "topk_ids": ((M, top_k), torch.int32),
        "topk_weights": ((M, top_k), torch.float32),
    }
    for name, (shape, dtype) in expect.items():
        t = inputs[name]
        if tuple(t.shape) != shape or t.dtype != dtype:
            raise ValueError(f"input {name!r}: expected {dtype} {shape}, got {t.dtype} {tuple(t.shape)}")
    bm = routing.ROUTE_BLOCK_M
    cap = routing.padded_capacity(M, E, top_k, bm)
    blocks = {
        "sorted_ids": ((cap,), torch.int32),
        "block_expert": ((cap // bm,), torch.int32),
        "num_padded": ((1,), torch.int32),
    }
    for name, (shape, dtype) in blocks.items():
        t = inputs[name]
        if tuple(t.shape) != shape or t.dtype != dtype:
            raise ValueError(
                f"input {name!r}: expected {dtype} {shape} (capacity for M={M}, E={E}, top_k={top_k}), "
                f"got {t.dtype} {tuple(t.shape)}"
            )
    if not (a2.is_contiguous() and w2.is_contiguous()):
        raise ValueError("a2 and w2 must be contiguous")
    return {"M": M, "N": N, "K": K, "E": E, "top_k": top_k}


def stage2_partials(inputs: Mapping[str, "torch.Tensor"]) -> "torch.Tensor":
    """fp32 weighted partials ``P[f] = w[f] * (a2[f] @ w2[e(f)]^T)``, shape [M*top_k, N].

    Computed expert by expert from ``topk_ids``, in true fp32 (TF32 off).
    """
    import torch

    d = dims_of(inputs)
    a2, w2 = inputs["a2"], inputs["w2"]
    flat_e = inputs["topk_ids"].flatten().long()
    flat_w = inputs["topk_weights"].flatten()
    out = torch.zeros(d["M"] * d["top_k"], d["N"], device=a2.device, dtype=torch.float32)
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        order = torch.argsort(flat_e, stable=True)
        counts = torch.bincount(flat_e, minlength=d["E"]).tolist()
        start = 0
        for e, c in enumerate(counts):
            if c:
                rows = order[start : start + c]
                out[rows] = (a2[rows].float() @ w2[e].float().t()) * flat_w[rows, None]
            start += c
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    return out


def reduce_partials(partials: "torch.Tensor", top_k: int) -> "torch.Tensor":
    """fp32 sum over the top_k slots of each token (slot order 0..top_k-1)."""
    rows, n = partials.shape
    p = partials.view(rows // top_k, top_k, n)
    acc = p[:, 0].clone()
    for j in range(1, top_k):
        acc += p[:, j]
    return acc


def oracle(inputs: Mapping[str, "torch.Tensor"], dims: Mapping[str, int] | None = None) -> Tensors:
    """The fp32 reference: ``out[t] = sum_j w[t, j] * (a2[t, j] @ w2[e(t, j)]^T)`` (fp32)."""
    d = dims_of(inputs)
    if dims is not None and check_dims(dims) != d:
        raise ValueError(f"dims {dict(dims)} do not match the inputs' {d}")
    return {"out": reduce_partials(stage2_partials(inputs), d["top_k"])}


def emulate_bf16_partial(inputs: Mapping[str, "torch.Tensor"], partials: "torch.Tensor | None" = None) -> Tensors:
    """Baseline arm's rounding: fp32 partial -> bf16 store -> fp32 sum -> bf16 out."""
    import torch

    d = dims_of(inputs)
    p = stage2_partials(inputs) if partials is None else partials
    return {"out": reduce_partials(p.to(torch.bfloat16).float(), d["top_k"]).to(torch.bfloat16)}


def emulate_fp8_partial(
    inputs: Mapping[str, "torch.Tensor"],
    scale: float,
    partials: "torch.Tensor | None" = None,
    reducer_scale: float | None = None,
) -> Tensors:
    """fp8 arm's rounding: ``e4m3(clamp(P * s))`` -> ``* (1/s)`` per slot -> fp32 sum -> bf16.

    reducer_scale: the scale the reducer unscales with (defaults to ``scale``); a
    different value reproduces the producer/reducer mismatch the card warns about.
    """
    import torch

    d = dims_of(inputs)
    p = stage2_partials(inputs) if partials is None else partials
    q = quantize_e4m3(p, scale)
    deq = dequantize_e4m3(q, scale if reducer_scale is None else reducer_scale)
    return {"out": reduce_partials(deq, d["top_k"]).to(torch.bfloat16)}


def partial_bytes(dims: Mapping[str, int], fp8: bool) -> int:
    """Bytes of the partial buffer (written once by the GEMM, read once by the reduce)."""
    d = check_dims(dims)
    return d["M"] * d["top_k"] * d["N"] * (1 if fp8 else 2)


def reduce_bytes(dims: Mapping[str, int], fp8: bool) -> int:
    """Bytes the reduce kernel moves: read the partial, write the bf16 output."""
    d = check_dims(dims)
    return partial_bytes(d, fp8) + d["M"] * d["N"] * 2


def segment_min_bytes(dims: Mapping[str, int]) -> int:
    """A floor on the segment's traffic for any implementation: read a2 and every
    expert's weights once, write the output (a fused kernel with no partial at all)."""
    d = check_dims(dims)
    return 2 * (d["M"] * d["top_k"] * d["K"] + d["E"] * d["N"] * d["K"] + d["M"] * d["N"])


def segment_flops(dims: Mapping[str, int]) -> float:
    d = check_dims(dims)
    return 2.0 * d["M"] * d["top_k"] * d["N"] * d["K"]

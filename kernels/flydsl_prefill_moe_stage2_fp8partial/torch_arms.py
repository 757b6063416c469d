"""The bf16-partial baseline in torch, for CPU runs at the card's real shapes.

``build_bf16`` computes what the baseline arms compute (``triton_bf16``, ``flydsl_bf16``),
step for step, with torch operators instead of a kernel:

1. grouped GEMM over the sorted routing: for each run of 64-row blocks of one expert
   (``block_expert`` up to ``num_padded``), the flat rows ``f = sorted_ids[...]`` (the sentinel
   ``M * top_k`` padding skipped) get ``bf16(w[f] * (a2[f] @ w2[e]^T))``: bf16 operands, fp32
   products and sums (true fp32: no bf16 matmul, no TF32), the router weight applied in fp32
   before the bf16 store, into a partial buffer in (token, slot) order;
2. the top-k reduce: each token's ``top_k`` bf16 partial rows summed in fp32 in slot order,
   stored bf16.

It reads the routing the kernels read (``sorted_ids`` / ``block_expert`` / ``num_padded``) at
every call, never ``topk_ids`` (the oracle's path): a change of routing between calls is
seen, and a wrong block layout would not agree with the oracle by construction.

Why it exists: on the ``gfx950-emulated`` platform the relative parity rules need a CPU
baseline arm, and the Triton baseline runs in Triton's interpreter, hours at the card's
real shapes (M=16384, N=2880, K=2880, E=128: ~1.1 TFLOP of stage-2 GEMM). This arm does it
in seconds with the same arithmetic, so ``check-kernel --emulate --full`` can run the fused
FlyDSL stage 2 at a real card shape (``gfx950_targets.FULL_EMULATED_ARMS``).

CPU only: on a GPU its operators would launch library kernels under no name the segment
declares. On CPU each step runs inside a ``record_function`` range named
``moe2_gemm_bf16_torch`` / ``moe_reduce_inbf16_torch`` (``Stage2Launch(annotate=True)``), so a
CPU profile shows two named steps that the problem's segment patterns cover and that no
Triton or FlyDSL signature mistakes for its own kernels (``arms.TORCH_SIGNATURE``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.naming import TORCH_GEMM_BF16, TORCH_REDUCE_BF16
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.oracle import dims_of
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.routing import ROUTE_BLOCK_M
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.segment import Stage2Launch
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.triton_arms import check_outputs

if TYPE_CHECKING:  # pragma: no cover
    import torch

Tensors = dict[str, "torch.Tensor"]


def grouped_gemm_bf16(inputs: Tensors, partial: "torch.Tensor") -> None:
    """Step 1: ``partial[f] = bf16(w[f] * (a2[f] @ w2[e(f)]^T))`` expert run by expert run of the
    sorted blocks, in place. Rows no block names keep what they held (the kernels likewise)."""
    import torch

    a2, w2 = inputs["a2"], inputs["w2"]
    weights = inputs["topk_weights"].reshape(-1)
    sentinel = partial.shape[0]
    used = int(inputs["num_padded"][0])
    blocks = inputs["block_expert"][: used // ROUTE_BLOCK_M]
    ids = inputs["sorted_ids"][:used].long()
    experts, runs = torch.unique_consecutive(blocks, return_counts=True)
    start = 0
    for e, run in zip(experts.tolist(), runs.tolist()):
        rows = ids[start * ROUTE_BLOCK_M:(start + run) * ROUTE_BLOCK_M]
        start += run
        rows = rows[rows < sentinel]  # the padding of the expert's last block
        if e < 0 or rows.numel() == 0:  # no expert (never below num_padded) or only padding
            continue
        acc = a2[rows].float() @ w2[e].float().t()  # bf16 values, fp32 products and sums
        partial[rows] = (acc * weights[rows, None]).to(torch.bfloat16)


def reduce_bf16(partial: "torch.Tensor", out: "torch.Tensor", top_k: int) -> None:
    """Step 2: ``out[t] = bf16(sum_j fp32(partial[t * top_k + j]))``, slots in order, in place."""
    p = partial.view(out.shape[0], top_k, out.shape[1])
    acc = p[:, 0].float()
    for j in range(1, top_k):
        acc += p[:, j].float()
    out.copy_(acc)


def build_bf16(inputs: Tensors, outputs: Tensors) -> Stage2Launch:
    """The bf16-partial baseline (torch, CPU): grouped GEMM storing bf16 partials, top-k reduce."""
    import torch

    d = dims_of(inputs)
    out = check_outputs(outputs, d)
    if out.device.type != "cpu":
        raise RuntimeError(f"torch_bf16 is the CPU stand-in for the baseline; got tensors on {out.device}. "
                           "Use triton_bf16 (CUDA, ROCm) or flydsl_bf16 (ROCm) on a GPU.")
    partial = torch.empty(d["M"] * d["top_k"], d["N"], device=out.device, dtype=torch.bfloat16)
    top_k = d["top_k"]
    return Stage2Launch(
        steps=((TORCH_GEMM_BF16, lambda: grouped_gemm_bf16(inputs, partial)),
               (TORCH_REDUCE_BF16, lambda: reduce_bf16(partial, out, top_k))),
        partial=partial, producer_scale=None, reducer_scale=None, annotate=True,
    )

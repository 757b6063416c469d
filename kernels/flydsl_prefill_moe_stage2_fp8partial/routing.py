"""Skewed top-k routing and the sorted, padded expert blocks the grouped GEMM reads.

Routing model. Each expert has a fixed popularity ``p_e`` (a Zipf law over a seeded
random permutation of the experts, so the busiest expert changes with the seed); a token
picks its ``top_k`` experts by Plackett-Luce sampling (Gumbel-top-k on ``log p_e``), and
its router weights are the softmax of the picked logits (the renormalised top-k of a
softmax router, as Mixtral / Qwen-MoE / DeepSeek do). The Zipf exponent is solved so
that the busiest expert's expected load is ``target_imbalance`` times the mean load:
3.44 by default, the imbalance the card measured on real routing. Uniform routing would
flatter the grouped GEMM (no long expert tail) and is never used.

Blocks. ``align_blocks`` sorts the flat (token, slot) ids ``f = token * top_k + slot``
by expert and pads every expert's run to a multiple of ``ROUTE_BLOCK_M`` rows with the
sentinel ``M * top_k``; ``block_expert[b]`` names the expert of sorted block ``b`` and
``num_padded`` the rows in use, inside a buffer of fixed capacity per shape. This is the
layout of vLLM's ``moe_align_block_size`` / aiter's ``moe_sorting`` output, and it is
part of the problem's inputs (the sort runs before stage 1 and is not in the stage-2
segment). A GEMM may use any row tile that divides ``ROUTE_BLOCK_M``.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch

ROUTE_BLOCK_M = 64
DEFAULT_IMBALANCE = 3.44


def _imbalance_estimator(num_experts: int, top_k: int, samples: int = 8192, seed: int = 1234):
    """Monte-Carlo load of the most popular expert (index 0) over the mean load under
    Gumbel-top-k, as a function of the log popularity. One fixed noise draw is reused
    for every call (common random numbers), so the estimate is a smooth, monotone
    function for the bisection; reading expert 0 rather than the max count avoids the
    upward bias of a maximum over noisy counts."""
    import torch

    g = torch.Generator().manual_seed(seed)
    u = torch.rand(samples, num_experts, generator=g, dtype=torch.float32).clamp_(1e-7, 1 - 1e-7)
    gumbel = -torch.log(-torch.log(u))

    def estimate(log_p: "torch.Tensor") -> float:
        picks = (log_p.float()[None, :] + gumbel).topk(top_k, dim=1).indices
        busiest = (picks == 0).sum().double()
        return float(busiest / (samples * top_k / num_experts))

    return estimate


def reachable_imbalance(num_experts: int, top_k: int, target: float = DEFAULT_IMBALANCE) -> float:
    """The target, capped for tiny expert counts (test shapes) where it cannot be met.

    The busiest expert takes at most every token, i.e. ``E / top_k`` times the mean; the
    cap is three quarters of the way there.
    """
    ceiling = num_experts / top_k
    return min(float(target), 1.0 + 0.75 * (ceiling - 1.0))


@functools.lru_cache(maxsize=64)
def zipf_exponent(num_experts: int, top_k: int, target_imbalance: float = DEFAULT_IMBALANCE) -> float:
    """Zipf exponent ``a`` (``p_e ~ (rank+1)^-a``) giving the target busiest/mean load ratio."""
    import torch

    if not 1 <= top_k <= num_experts:
        raise ValueError(f"need 1 <= top_k <= E, got top_k={top_k}, E={num_experts}")
    ceiling = num_experts / top_k  # the busiest expert cannot take more than every token
    if not 1.0 <= target_imbalance < ceiling:
        raise ValueError(
            f"target imbalance {target_imbalance} is not reachable with E={num_experts}, "
            f"top_k={top_k} (must be in [1, {ceiling:.2f}))"
        )
    estimate = _imbalance_estimator(num_experts, top_k)
    log_ranks = torch.log(torch.arange(1, num_experts + 1, dtype=torch.float64))
    lo, hi = 0.0, 8.0
    for _ in range(24):  # bisection: the imbalance grows with the exponent
        mid = 0.5 * (lo + hi)
        if estimate(-mid * log_ranks) < target_imbalance:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def expert_log_popularity(
    num_experts: int, top_k: int, generator: "torch.Generator", target_imbalance: float = DEFAULT_IMBALANCE
) -> "torch.Tensor":
    """Per-expert log popularity (float64, CPU), Zipf ranks over a seeded permutation."""
    import torch

    a = zipf_exponent(num_experts, top_k, target_imbalance)
    ranks = torch.randperm(num_experts, generator=generator).double() + 1.0
    return -a * torch.log(ranks)


def route(
    num_tokens: int,
    num_experts: int,
    top_k: int,
    generator: "torch.Generator",
    target_imbalance: float = DEFAULT_IMBALANCE,
) -> tuple["torch.Tensor", "torch.Tensor"]:
    """Draw ``(topk_ids int32 [M, top_k], topk_weights float32 [M, top_k])`` on the CPU."""
    import torch

    log_p = expert_log_popularity(num_experts, top_k, generator, target_imbalance)
    u = torch.rand(num_tokens, num_experts, generator=generator, dtype=torch.float64).clamp_(1e-12, 1 - 1e-12)
    logits = log_p[None, :] - torch.log(-torch.log(u))
    vals, ids = logits.topk(top_k, dim=1)
    weights = torch.softmax(vals, dim=1)
    return ids.to(torch.int32), weights.to(torch.float32)


def load_imbalance(topk_ids: "torch.Tensor", num_experts: int) -> float:
    """Busiest expert's (token, slot) count over the mean count."""
    import torch

    load = torch.bincount(topk_ids.flatten().long().cpu(), minlength=num_experts).double()
    return float(load.max() / load.mean())


def padded_capacity(num_tokens: int, num_experts: int, top_k: int, block_m: int = ROUTE_BLOCK_M) -> int:
    """Fixed length of ``sorted_ids`` for a shape: every expert wastes < block_m rows, so
    ``M*top_k + min(E, M*top_k) * (block_m - 1)`` rounded up to whole blocks bounds any
    routing. A fixed length gives every seed's input set the same shapes (the verifier
    copies new values into the same buffers between timing rounds)."""
    rows = num_tokens * top_k + min(num_experts, num_tokens * top_k) * (block_m - 1)
    return (rows + block_m - 1) // block_m * block_m


def align_blocks(
    topk_ids: "torch.Tensor", num_experts: int, block_m: int = ROUTE_BLOCK_M, capacity: int | None = None
) -> tuple["torch.Tensor", "torch.Tensor", "torch.Tensor"]:
    """Sort flat (token, slot) ids by expert and pad each expert to ``block_m`` rows.

    Returns on the device of ``topk_ids``:

    - ``sorted_ids`` int32 [capacity]: flat ids grouped by expert (ascending within an
      expert), each expert's run padded to ``block_m`` rows; padding and the unused tail
      hold the sentinel ``M * top_k``;
    - ``block_expert`` int32 [capacity // block_m]: the expert of each block, -1 for the
      unused tail (never read: the GEMM stops at ``num_padded``);
    - ``num_padded`` int32 [1]: rows in use (a multiple of ``block_m``).

    capacity: defaults to ``padded_capacity(M, E, top_k, block_m)``.
    """
    import torch

    if topk_ids.dim() != 2:
        raise ValueError(f"topk_ids must be [M, top_k], got shape {tuple(topk_ids.shape)}")
    device = topk_ids.device
    M, top_k = topk_ids.shape
    flat = topk_ids.flatten().long()
    n = flat.numel()
    if n and (int(flat.min()) < 0 or int(flat.max()) >= num_experts):
        raise ValueError(f"topk_ids must lie in [0, {num_experts}), got [{int(flat.min())}, {int(flat.max())}]")
    cap = padded_capacity(M, num_experts, top_k, block_m) if capacity is None else capacity
    order = torch.sort(flat, stable=True).indices
    counts = torch.bincount(flat, minlength=num_experts)
    padded = (counts + block_m - 1) // block_m * block_m
    start = torch.cumsum(counts, 0) - counts
    pstart = torch.cumsum(padded, 0) - padded
    used = int(padded.sum())
    if used > cap or cap % block_m:
        raise ValueError(f"capacity {cap} cannot hold {used} padded rows in blocks of {block_m}")
    sorted_ids = torch.full((cap,), n, dtype=torch.int32, device=device)
    experts_sorted = flat[order]
    rank_in_expert = torch.arange(n, device=device) - start[experts_sorted]
    sorted_ids[pstart[experts_sorted] + rank_in_expert] = order.to(torch.int32)
    block_expert = torch.full((cap // block_m,), -1, dtype=torch.int32, device=device)
    block_expert[: used // block_m] = torch.repeat_interleave(
        torch.arange(num_experts, device=device, dtype=torch.int32), (padded // block_m)
    )
    num_padded = torch.tensor([used], dtype=torch.int32, device=device)
    return sorted_ids, block_expert, num_padded


def padded_blocks_summary(block_expert: "torch.Tensor", num_experts: int) -> dict[str, float]:
    """Blocks per expert: max, mean over experts with work, and the empty-expert count."""
    import torch

    be = block_expert.long().cpu()
    per = torch.bincount(be[be >= 0], minlength=num_experts)
    busy = per[per > 0]
    return {
        "blocks": int(per.sum()),
        "max_blocks": int(per.max()) if per.numel() else 0,
        "mean_blocks_busy": float(busy.double().mean()) if busy.numel() else 0.0,
        "idle_experts": int((per == 0).sum()),
    }

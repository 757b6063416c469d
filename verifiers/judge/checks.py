"""Checking every timed and profiled call on a sample of its output elements.

After each call the judge draws ``samples`` element indices per output from its own
random stream (the arm cannot know them in advance), reads those elements from the
shared output buffer, and computes the oracle at the same indices from the inputs it
wrote for that call (``Problem.oracle_at``: one dot product per element for a GEMM;
otherwise the full oracle, gathered). Two rules:

- per call (gross): every sampled element written and finite, and at most
  ``GROSS_FRACTION`` of them outside ten times the parity tolerance. A result cached
  from other inputs, computed only when poison or a profiler was seen, or left to a
  helper that had not finished, is uncorrelated with this call's oracle and fails at once;
- pooled over all of an arm's checked calls: the parity rules of the problem applied to
  the sampled figures, relative to the baseline arm's sampled figures (a precision
  downgrade that only shows while timed fails here).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verifiers.judge.metrics import OutputMetrics

if TYPE_CHECKING:  # pragma: no cover
    import torch

GROSS_TOLERANCE_FACTOR = 10.0
GROSS_FRACTION = 0.25


def sample_indices(numel: int, k: int, generator: "torch.Generator", device: Any) -> "torch.Tensor":
    import torch

    if numel <= k:
        return torch.arange(numel, device=device)
    return torch.randint(0, numel, (k,), generator=generator, device="cpu").to(device)


def gather(t: "torch.Tensor", flat: "torch.Tensor") -> "torch.Tensor":
    """Elements of ``t`` at row-major flat indices, through its strides (no copy of ``t``)."""
    import torch

    rest, offset = flat.clone(), torch.zeros_like(flat)
    for size, stride in reversed(list(zip(t.shape, t.stride()))):
        offset += (rest % size) * stride
        rest = rest // size
    span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride())) if t.numel() else 0
    return torch.as_strided(t, (span,), (1,), t.storage_offset())[offset]


def oracle_samples(problem: Any, values: Mapping[str, "torch.Tensor"], dims: Mapping[str, int],
                   index: Mapping[str, "torch.Tensor"]) -> dict[str, "torch.Tensor"]:
    """The oracle at ``index`` (float64), through the problem's hook or the full oracle."""
    import torch

    if problem.oracle_at is not None:
        got = problem.oracle_at(values, dict(dims), index)
        return {name: got[name].to(torch.float64).reshape(-1) for name in index}
    full = problem.oracle({k: v.clone() for k, v in values.items()}, dict(dims))
    return {name: gather(full[name], idx).to(torch.float64) for name, idx in index.items()}


@dataclass
class Pool:
    """Running sums of one output's sampled comparisons for one arm."""

    n: int = 0
    nonfinite: int = 0
    unwritten: int = 0
    mismatches: int = 0
    max_abs: float = 0.0
    sq_diff: float = 0.0
    sq_oracle: float = 0.0
    sq_arm: float = 0.0
    dot: float = 0.0

    def metrics(self) -> OutputMetrics:
        nx, no = math.sqrt(self.sq_arm), math.sqrt(self.sq_oracle)
        if self.nonfinite:
            return OutputMetrics(numel=self.n, nonfinite=self.nonfinite, mismatches=self.mismatches, max_abs=math.inf,
                                 rel_l2=math.inf, cosine=0.0, norm_ratio=math.inf, unwritten=self.unwritten)
        rel = math.sqrt(self.sq_diff) / no if no else (0.0 if self.sq_diff == 0 else math.inf)
        cos = 1.0 if nx == 0 and no == 0 else (0.0 if nx == 0 or no == 0 else max(-1.0, min(1.0, self.dot / (nx * no))))
        ratio = nx / no if no else (1.0 if nx == 0 else math.inf)
        return OutputMetrics(numel=self.n, nonfinite=0, mismatches=self.mismatches, max_abs=self.max_abs,
                             rel_l2=rel, cosine=cos, norm_ratio=ratio, unwritten=self.unwritten)


@dataclass
class SampleChecks:
    """One arm's checked calls: pooled figures per output and the first gross failures."""

    rtol: float
    atol: float
    calls: int = 0
    pools: dict[str, Pool] = field(default_factory=dict)

    def add(self, name: str, got: "torch.Tensor", expect: "torch.Tensor", sentinel: float | int | bool | None) -> list[str]:
        """Fold one call's samples of one output in; the gross problems of this call."""
        import torch

        x = got.to(torch.float64).cpu()
        o = expect.to(torch.float64).cpu()
        pool = self.pools.setdefault(name, Pool())
        k = int(x.numel())
        finite = torch.isfinite(x)
        nonfinite = int((~finite).sum())
        unwritten = 0
        if sentinel is not None and not isinstance(sentinel, bool):
            unwritten = int(((got.cpu() == sentinel) & (o != float(sentinel))).sum())
        diff = (x - o).abs()
        tol = self.atol + self.rtol * o.abs()
        mism = int((~(diff <= tol)).sum())
        gross = int((~(diff <= GROSS_TOLERANCE_FACTOR * tol)).sum())
        pool.n += k
        pool.nonfinite += nonfinite
        pool.unwritten += unwritten
        pool.mismatches += mism
        if nonfinite == 0 and k:
            pool.max_abs = max(pool.max_abs, float(diff.max()))
            pool.sq_diff += float((diff * diff).sum())
            pool.sq_oracle += float((o * o).sum())
            pool.sq_arm += float((x * x).sum())
            pool.dot += float((x * o).sum())
        problems = []
        if nonfinite:
            problems.append(f"{nonfinite} of {k} sampled elements of {name!r} are NaN/Inf (poison left: not written)")
        if unwritten:
            problems.append(f"{unwritten} of {k} sampled elements of {name!r} still hold the poison sentinel")
        if k and gross > GROSS_FRACTION * k and not nonfinite:
            problems.append(
                f"{gross} of {k} sampled elements of {name!r} are more than {GROSS_TOLERANCE_FACTOR:g}x the tolerance "
                "off this call's oracle: the output was not computed from this call's inputs"
            )
        return problems

    def metrics(self) -> dict[str, OutputMetrics]:
        return {name: pool.metrics() for name, pool in self.pools.items()}

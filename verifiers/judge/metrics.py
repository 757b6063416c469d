"""Error metrics of one output tensor against the oracle, computed in float64.

Every figure the parity rules use comes from here, for both arms, so the rules compare like
with like: allclose mismatch count, max abs error, relative L2 error, cosine, non-finite count.
Large outputs are reduced in chunks so the float64 copies never hold the whole tensor.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:  # pragma: no cover
    import torch

CHUNK = 1 << 24  # elements per float64 chunk (128 MiB)


class OutputMetrics(BaseModel):
    """One arm's output compared with the oracle output."""

    model_config = ConfigDict(ser_json_inf_nan="constants")  # inf/NaN survive a JSON round trip

    numel: int
    nonfinite: int  # NaN or Inf in the arm's output (poisoned = never written counts here)
    mismatches: int  # elements outside |x - o| <= atol + rtol * |o| (non-finite included)
    max_abs: float
    rel_l2: float  # ||x - o|| / ||o||
    cosine: float  # <x, o> / (||x|| ||o||); 0 when exactly one norm is 0, 1 when both are
    norm_ratio: float  # ||x|| / ||o||: a scaled output (2*y) shows here even when cosine is 1
    unwritten: int = 0  # integer/bool outputs: elements never written (poison in both runs)


class OracleStats(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")  # inf/NaN survive a JSON round trip

    numel: int
    std: float
    nonfinite: int
    max_abs: float


def _flat_pairs(x: "torch.Tensor", o: "torch.Tensor"):
    xf = x.detach().reshape(-1)
    of = o.detach().reshape(-1).to(x.device)
    for start in range(0, xf.numel(), CHUNK):
        yield xf[start : start + CHUNK], of[start : start + CHUNK]


def _wide(t: "torch.Tensor") -> "torch.Tensor":
    import torch

    if t.dtype.is_complex:
        return torch.view_as_real(t.to(torch.complex128)).reshape(-1)
    return t.to(torch.float64)


def output_metrics(x: "torch.Tensor", oracle: "torch.Tensor", rtol: float, atol: float) -> OutputMetrics:
    """Compare ``x`` with ``oracle`` (same shape; any dtypes) in float64."""
    import torch

    if tuple(x.shape) != tuple(oracle.shape):
        raise ValueError(f"output shape {tuple(x.shape)} != oracle shape {tuple(oracle.shape)}")
    numel = x.numel()
    nonfinite = mismatches = 0
    max_abs = 0.0
    dot = nx2 = no2 = nd2 = 0.0
    for xc, oc in _flat_pairs(x, oracle):
        xw, ow = _wide(xc), _wide(oc)
        finite = torch.isfinite(xw)
        nonfinite += int((~finite).sum().item())
        diff = (xw - ow).abs()
        ok = diff <= (atol + rtol * ow.abs())  # NaN compares False: counted as mismatch
        mismatches += int((~ok).sum().item())
        if bool(finite.all().item()):
            if diff.numel():
                max_abs = max(max_abs, float(diff.max().item()))
            dot += float((xw * ow).sum().item())
            nx2 += float((xw * xw).sum().item())
            no2 += float((ow * ow).sum().item())
            nd2 += float(((xw - ow) ** 2).sum().item())
        else:
            max_abs = math.inf
            nd2 = math.inf
    if nonfinite:
        return OutputMetrics(
            numel=numel, nonfinite=nonfinite, mismatches=mismatches, max_abs=math.inf,
            rel_l2=math.inf, cosine=0.0, norm_ratio=math.inf,
        )
    nx, no = math.sqrt(nx2), math.sqrt(no2)
    if no == 0.0:
        rel_l2 = 0.0 if nd2 == 0.0 else math.inf
        norm_ratio = 1.0 if nx == 0.0 else math.inf
    else:
        rel_l2 = math.sqrt(nd2) / no
        norm_ratio = nx / no
    if nx == 0.0 and no == 0.0:
        cosine = 1.0
    elif nx == 0.0 or no == 0.0:
        cosine = 0.0
    else:
        cosine = max(-1.0, min(1.0, dot / (nx * no)))
    return OutputMetrics(
        numel=numel, nonfinite=0, mismatches=mismatches, max_abs=max_abs,
        rel_l2=rel_l2, cosine=cosine, norm_ratio=norm_ratio,
    )


def oracle_stats(o: "torch.Tensor") -> OracleStats:
    """Spread of the oracle output (two passes, so a large mean cannot hide a tiny std)."""
    import torch

    n = o.numel()
    total = 0.0
    nonfinite = 0
    max_abs = 0.0
    for chunk, _ in _flat_pairs(o, o):
        w = _wide(chunk)
        finite = torch.isfinite(w)
        nonfinite += int((~finite).sum().item())
        w = torch.where(finite, w, torch.zeros_like(w))
        total += float(w.sum().item())
        if w.numel():
            max_abs = max(max_abs, float(w.abs().max().item()))
    mean = total / n if n else 0.0
    sq = 0.0
    for chunk, _ in _flat_pairs(o, o):
        w = _wide(chunk)
        w = torch.where(torch.isfinite(w), w, torch.full_like(w, mean))
        sq += float(((w - mean) ** 2).sum().item())
    std = math.sqrt(sq / n) if n else 0.0
    return OracleStats(numel=n, std=std, nonfinite=nonfinite, max_abs=max_abs)


def within_tolerance(a: "torch.Tensor", b: "torch.Tensor", atol: float, rtol: float) -> int:
    """Elements of ``a`` outside ``atol + rtol*|b|`` of ``b`` (NaN anywhere counts)."""
    count = 0
    for ac, bc in _flat_pairs(a, b):
        aw, bw = _wide(ac), _wide(bc)
        ok = (aw - bw).abs() <= (atol + rtol * bw.abs())
        count += int((~ok).sum().item())
    return count

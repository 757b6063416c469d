"""Parity figures of one output against the oracle (tests and the bench's direct path).

The verifier (``verifiers/``) owns the verdict; this only measures, with the same
definitions: allclose mismatches (non-finite counted), max abs error, relative L2,
cosine, NaN/Inf count. float64, reduced in chunks so a 512 MiB C never needs a
whole float64 copy.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch

CHUNK = 1 << 24


def parity_figures(out: "torch.Tensor", ref: "torch.Tensor", rtol: float = 1e-2, atol: float = 1e-2) -> dict:
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        raise ValueError(f"parity_figures: output {tuple(out.shape)} vs oracle {tuple(ref.shape)}")
    xf, yf = out.reshape(-1), ref.reshape(-1).to(out.device)
    n = xf.numel()
    mismatches = nonfinite = 0
    max_abs = dot = nx2 = ny2 = nd2 = sy = sy2 = 0.0
    for s in range(0, n, CHUNK):
        x, y = xf[s : s + CHUNK].double(), yf[s : s + CHUNK].double()
        finite = torch.isfinite(x)
        nonfinite += int((~finite).sum())
        x = torch.where(finite, x, torch.zeros_like(x))
        d = x - y
        bad = (d.abs() > atol + rtol * y.abs()) | ~finite
        mismatches += int(bad.sum())
        max_abs = max(max_abs, float(d.abs().max()))
        dot += float((x * y).sum())
        nx2 += float((x * x).sum())
        ny2 += float((y * y).sum())
        nd2 += float((d * d).sum())
        sy += float(y.sum())
        sy2 += float((y * y).sum())
    mean = sy / max(1, n)
    return {
        "elements": n,
        "mismatches": mismatches,
        "mismatch_fraction": mismatches / max(1, n),
        "max_abs": math.inf if nonfinite else max_abs,
        "rel_l2": math.sqrt(nd2 / ny2) if ny2 else math.inf,
        "cosine": dot / math.sqrt(nx2 * ny2) if nx2 and ny2 else 0.0,
        "nonfinite": nonfinite,
        "ref_std": math.sqrt(max(0.0, sy2 / max(1, n) - mean * mean)),
    }

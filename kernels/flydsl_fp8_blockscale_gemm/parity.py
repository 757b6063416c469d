"""Parity figures of one output against the oracle (used by tests and the bench's direct path).

The verifier (``verifiers/``) owns the verdict; this only measures, with the same
definitions: allclose mismatches, max abs error, relative L2, cosine, NaN/Inf count.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch


def parity_figures(out: "torch.Tensor", ref: "torch.Tensor", rtol: float = 1e-2, atol: float = 1e-2) -> dict:
    import torch

    x, y = out.double(), ref.double()
    finite = torch.isfinite(x)
    nonfinite = int((~finite).sum())
    x = torch.where(finite, x, torch.zeros_like(x))
    bad = ~torch.isclose(x, y, rtol=rtol, atol=atol) | ~finite
    diff = x - y
    ref_norm = float(y.norm())
    denom = float(x.norm()) * ref_norm
    return {
        "elements": y.numel(),
        "mismatches": int(bad.sum()),
        "mismatch_fraction": float(bad.sum()) / max(1, y.numel()),
        "max_abs": float(diff.abs().max()) if y.numel() else 0.0,
        "rel_l2": float(diff.norm()) / ref_norm if ref_norm else float("inf"),
        "cosine": float((x * y).sum()) / denom if denom else 0.0,
        "nonfinite": nonfinite,
        "ref_std": float(y.std()) if y.numel() > 1 else 0.0,
    }

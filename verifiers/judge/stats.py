"""Statistics of the A/B comparison: per-round ratios, bootstrap interval, verdict.

Pure functions over lists of floats; nothing here touches a device.
"""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Literal

Verdict = Literal["FASTER", "SLOWER", "NO_DIFFERENCE"]


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def quartiles(values: Sequence[float]) -> tuple[float, float]:
    if len(values) < 2:
        v = float(values[0]) if values else float("nan")
        return v, v
    q = statistics.quantiles(values, n=4, method="inclusive")
    return float(q[0]), float(q[2])


def bootstrap_median_ci(
    values: Sequence[float], n_boot: int = 4000, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of ``values`` (resampled with replacement)."""
    import numpy as np

    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        raise ValueError("bootstrap of an empty sample")
    if data.size == 1:
        return float(data[0]), float(data[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, data.size, size=(n_boot, data.size))
    medians = np.median(data[idx], axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(medians, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def aa_spread(ci_low: float, ci_high: float) -> float:
    """How far an A/A interval strays from 1 (0 when it is exactly 1)."""
    return max(ci_high - 1.0, 1.0 - ci_low, 0.0)


def decide(ci_low: float, ci_high: float, noise_floor: float) -> Verdict:
    """FASTER only when the whole interval clears 1 + floor; SLOWER symmetric."""
    if ci_low > 1.0 + noise_floor:
        return "FASTER"
    if ci_high < 1.0 - noise_floor:
        return "SLOWER"
    return "NO_DIFFERENCE"

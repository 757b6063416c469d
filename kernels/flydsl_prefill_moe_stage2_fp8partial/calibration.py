"""Choose the partial scale ``s`` from the partial magnitude histogram.

Rule (card, procedure step 4): put the large partials mid-range in e4m3, so that
neither the top saturates nor the bottom flushes to zero. Concretely, the chosen
percentile of ``|P|`` (default: the maximum, percentile 100) is mapped to
``target`` = 224, half of the largest finite e4m3 value 448:

    s = target / percentile(|P|, q)

which leaves one binade of headroom above the calibration maximum for unseen data, while
e4m3's relative precision is the same anywhere in its normal range [2^-6, 448], so the
bottom of the distribution loses nothing by the headroom until values fall under
``2^-6 / s`` (subnormal, fewer mantissa bits) or under ``2^-10 / s`` (flushed to zero).
``power_of_two=True`` rounds ``s`` down to a power of two (the percentile then lands in
[112, 224]) so that ``x * s * (1/s) == x`` exactly in fp32.

The report gives, for the chosen ``s``, the fraction of partials that saturate (would
exceed 448, clamped), that flush to zero (non-zero values that round to 0), and that
land in the subnormal range, plus a log2 histogram of ``|P|``. ``s`` is rounded to
float32 first: the reported fractions are those of the exact scale the kernels use.

``calibrate_for_dims`` draws a calibration batch with the problem's input generator on a
dedicated seed (never one of the verification seeds), like an offline calibration run on
the model's own distribution; the verifier's inputs then test that the calibrated
constant generalises.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.fp8_format import (
    E4M3_MAX,
    E4M3_MIN_NORMAL,
    as_f32,
    check_scale,
    quantize_e4m3,
)
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.naming import scale_hex

if TYPE_CHECKING:  # pragma: no cover
    import torch

DEFAULT_TARGET = E4M3_MAX / 2  # 224
DEFAULT_PERCENTILE = 100.0
CALIBRATION_SEED = 0xCA11B  # disjoint from the verifier's seeds (0..3 and secret ones)
CALIBRATION_TOKENS = 2048
_SAMPLE_LIMIT = 1 << 24  # quantile() needs a bounded sample; the fractions use every value


class Fp8Fractions(BaseModel):
    """What a scale does to a set of partials when stored in e4m3."""

    model_config = ConfigDict(frozen=True)

    scale: float
    count: int
    nonzero: int
    saturated: float = Field(description="fraction of partials with |P*s| > 448 (clamped on store)")
    flushed: float = Field(description="fraction of non-zero partials that round to 0 in e4m3")
    subnormal: float = Field(description="fraction of partials with 0 < |P*s| < 2^-6 (fewer mantissa bits)")
    rel_rms_error: float = Field(description="||e4m3(P*s)/s - P|| / ||P|| over the whole set")


class CalibrationReport(BaseModel):
    """The chosen scale and the evidence for it."""

    model_config = ConfigDict(frozen=True)

    scale: float = Field(description="float32 value of s given to producer and reducer")
    scale_hex: str = Field(description="IEEE float32 bits of s; the tag in the kernel names")
    inverse: float = Field(description="1/s as the reducer applies it")
    percentile: float
    percentile_value: float = Field(description="|P| at the chosen percentile")
    amax: float
    target: float = Field(description="e4m3 value the percentile is mapped to (before power-of-two rounding)")
    power_of_two: bool
    mapped_amax: float = Field(description="amax * s: where the largest partial lands (<= 448 means no saturation)")
    fractions: Fp8Fractions
    log2_histogram: dict[int, int] = Field(description="count of |P| in [2^b, 2^(b+1)) per exponent b; zeros omitted")
    source: str = ""


def fp8_fractions(partials: "torch.Tensor", scale: float) -> Fp8Fractions:
    """Saturated / flushed / subnormal fractions and the round-trip error of ``s``."""
    import torch

    s = check_scale(scale)
    x = partials.float().flatten()
    n = x.numel()
    if n == 0:
        raise ValueError("cannot judge a scale on an empty set of partials")
    y = (x * s).abs()
    nonzero = x != 0
    q = quantize_e4m3(x, s).float()
    nnz = int(nonzero.sum())
    err = (q / s - x).norm() / x.norm().clamp_min(torch.finfo(torch.float32).tiny)
    return Fp8Fractions(
        scale=s,
        count=n,
        nonzero=nnz,
        saturated=float((y > E4M3_MAX).sum()) / n,
        flushed=float(((q == 0) & nonzero).sum()) / max(nnz, 1),
        subnormal=float(((y < E4M3_MIN_NORMAL) & nonzero).sum()) / max(nnz, 1),
        rel_rms_error=float(err),
    )


def log2_histogram(partials: "torch.Tensor") -> dict[int, int]:
    import torch

    a = partials.float().abs().flatten()
    a = a[a > 0]
    if a.numel() == 0:
        return {}
    exps = torch.floor(torch.log2(a)).long()
    lo = int(exps.min())
    counts = torch.bincount(exps - lo)
    return {lo + i: int(c) for i, c in enumerate(counts.tolist()) if c}


def _percentile(a: "torch.Tensor", q: float) -> float:
    import torch

    if q >= 100.0:
        return float(a.max())
    if a.numel() > _SAMPLE_LIMIT:  # evenly strided sample: deterministic, unbiased for iid data
        a = a[:: math.ceil(a.numel() / _SAMPLE_LIMIT)]
    return float(torch.quantile(a.double(), q / 100.0))


def choose_scale(
    partials: "torch.Tensor",
    *,
    percentile: float = DEFAULT_PERCENTILE,
    target: float = DEFAULT_TARGET,
    power_of_two: bool = False,
    source: str = "",
) -> CalibrationReport:
    """Pick ``s`` so that ``percentile(|P|)`` lands on ``target`` in e4m3."""
    if not 0.0 < percentile <= 100.0:
        raise ValueError(f"percentile must be in (0, 100], got {percentile}")
    if not 0.0 < target <= E4M3_MAX:
        raise ValueError(f"target must be in (0, {E4M3_MAX}], got {target}")
    a = partials.float().abs().flatten()
    if a.numel() == 0 or not bool(a.isfinite().all()):
        raise ValueError("partials must be non-empty and finite to calibrate a scale")
    amax = float(a.max())
    pv = _percentile(a, percentile)
    if pv <= 0.0:
        raise ValueError(f"the {percentile}th percentile of |partials| is 0: nothing to calibrate on")
    s = target / pv
    if power_of_two:
        s = 2.0 ** math.floor(math.log2(s))
    s = check_scale(as_f32(s))
    return CalibrationReport(
        scale=s,
        scale_hex=scale_hex(s),
        inverse=as_f32(1.0 / s),
        percentile=percentile,
        percentile_value=pv,
        amax=amax,
        target=target,
        power_of_two=power_of_two,
        mapped_amax=amax * s,
        fractions=fp8_fractions(partials, s),
        log2_histogram=log2_histogram(partials),
        source=source,
    )


def calibrate_for_dims(
    dims: Mapping[str, int],
    *,
    device: Any = None,
    seed: int = CALIBRATION_SEED,
    tokens: int = CALIBRATION_TOKENS,
    percentile: float = DEFAULT_PERCENTILE,
    target: float = DEFAULT_TARGET,
    power_of_two: bool = False,
) -> CalibrationReport:
    """Calibrate on a fresh draw of the problem's distribution (``tokens`` tokens, same N,
    K, E, top_k) with the dedicated calibration seed.

    The draw has ``tokens`` tokens whatever the problem's M: the largest |partial| of a
    small draw is a noisy statistic, and a scale fitted to it clamps the top of another
    small draw past 448 (24 tokens: 23 of 1000 seeds clamped; 2048 tokens: none)."""
    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import oracle

    d = oracle.check_dims(dims)
    cal_dims = {**d, "M": tokens}
    inputs = oracle.make_inputs(cal_dims, seed, device)
    partials = oracle.stage2_partials(inputs)
    return choose_scale(
        partials,
        percentile=percentile,
        target=target,
        power_of_two=power_of_two,
        source=f"calibration draw seed={seed:#x} dims={cal_dims} device={partials.device}",
    )


@functools.lru_cache(maxsize=32)
def _cached_scale(key: tuple, device: str) -> CalibrationReport:
    dims = dict(key)
    return calibrate_for_dims(dims, device=device)


def scale_for(dims: Mapping[str, int], device: Any = None) -> CalibrationReport:
    """The calibrated report the arms use for ``dims`` (cached per dims and device type).

    The calibration depends only on N, K, E and top_k (M is not used).
    """
    import torch

    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import oracle

    d = oracle.check_dims(dims)
    key = tuple(sorted({**d, "M": CALIBRATION_TOKENS}.items()))
    dev = torch.device(device if device is not None else "cpu")
    return _cached_scale(key, str(dev))

"""The card's decision guide in code: which FlyDSL core (and config) a shape gets.

``config_for(M, N, K)`` follows the card's shape classes (``skills/flydsl_fp8_blockscale_gemm``,
``shape_classes``): narrow-N / deep-K (``N <= 2048`` and ``K >= 4096``, e.g. 4096x2048x7168 and
16384x1536x7168) -> the 8-wave ping-pong core with the ``cluster`` schedule
(``flydsl_8wave``, BLOCK_M=128, BLOCK_N=256); every other shape (wide-N, K-light, the rest)
-> the 4-wave core at ``t64x256x128 wpe2`` (``flydsl_gemm.config_4wave``). The 8-wave core
needs ``N % 256 == 0``; a narrow-N shape that misses it falls back to the 4-wave core.
``build`` compiles the picked core (ROCm, gfx950).
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .flydsl_8wave import BLOCK_N, CARD_CONFIG_8WAVE, EightWaveConfig
from .flydsl_gemm import BlockscaleConfig, config_4wave

if TYPE_CHECKING:  # pragma: no cover
    import torch

NARROW_N_MAX = 2048  # the card's narrow_n_deep_k class: N <= 2048 ...
DEEP_K_MIN = 4096  # ... and K >= 4096


def is_narrow_n_deep_k(N: int, K: int) -> bool:
    return N <= NARROW_N_MAX and K >= DEEP_K_MIN


def config_for(M: int, N: int, K: int, **overrides: Any) -> BlockscaleConfig | EightWaveConfig:
    """The card's core and config for ``(M, N, K)``; ``overrides`` set fields of the picked
    config (a field the picked core lacks raises TypeError)."""
    if is_narrow_n_deep_k(N, K) and N % BLOCK_N == 0:
        return replace(CARD_CONFIG_8WAVE, **overrides) if overrides else CARD_CONFIG_8WAVE
    return config_4wave(M, N, K, **overrides)


def build(inputs: dict[str, "torch.Tensor"], outputs: dict[str, "torch.Tensor"]):
    """Candidate contract: the core ``config_for`` picks for the inputs' shape, compiled once."""
    M, K = inputs["a"].shape
    N = inputs["b_shuffled"].shape[0]
    cfg = config_for(M, N, K)
    if isinstance(cfg, EightWaveConfig):
        from . import flydsl_8wave

        return flydsl_8wave.build(inputs, outputs, cfg)
    from . import flydsl_gemm

    return flydsl_gemm.build(inputs, outputs, cfg)

"""A deliberately wrong candidate: the reducer unscales with a different ``s`` than the
producer stored with -- the card's "reducer-only environment override" bug.

Both kernels are honest about the scale they were built with: each one's name carries
its own ``s`` tag (``moe2_gemm_pf8_s<hex(s)>`` vs ``moe_reduce_infp8_s<hex(s')>``), which
is exactly how the problem's signature check sees the mismatch.

- ``build``: reducer scale ``2 * s`` -> every output is halved. Cosine is blind to it (a
  scaled output keeps cosine 1.0 to the baseline's direction); the relative-L2 bound and
  the norm ratio catch it, and so does the scale-tag check.
- ``build_subtle``: reducer scale ``s * 1.004`` -> outputs shrink by 0.4 %, inside every
  parity bound (the fp8 round-trip alone costs ~2.7 % relative L2). Only the scale-tag
  check catches it: the reason a runtime signature with the scale is required.

Used by tests and as a negative control for the verifier
(``--candidate skill_kernels.flydsl_prefill_moe_stage2_fp8partial.mismatched_scale:build``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.segment import Stage2Launch
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.triton_arms import build_stage2, calibrated_scale

if TYPE_CHECKING:  # pragma: no cover
    import torch

Tensors = dict[str, "torch.Tensor"]
GROSS_FACTOR = 2.0
SUBTLE_FACTOR = 1.004


def build_with_factor(inputs: Tensors, outputs: Tensors, factor: float) -> Stage2Launch:
    s = calibrated_scale(inputs)
    return build_stage2(inputs, outputs, scale=s, reducer_scale=s * factor)


def build(inputs: Tensors, outputs: Tensors) -> Stage2Launch:
    """Producer stores with ``s``; reducer unscales with ``2 s``."""
    return build_with_factor(inputs, outputs, GROSS_FACTOR)


def build_subtle(inputs: Tensors, outputs: Tensors) -> Stage2Launch:
    """Producer stores with ``s``; reducer unscales with ``1.004 s`` (parity cannot tell)."""
    return build_with_factor(inputs, outputs, SUBTLE_FACTOR)

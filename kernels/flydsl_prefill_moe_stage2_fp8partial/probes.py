"""Capability probes for this card's prerequisites (``skill-server reverify`` finds ``PROBES``)."""
from __future__ import annotations

from skill_kernels.probe_common import result, search_flydsl


def moe_fp8_partial_store(ctx) -> dict:
    """A FlyDSL MoE stage-2 GEMM storing fp8 partials with a scalar scale, and its reducer."""
    version, searched, hits = search_flydsl(ctx.project_root, path_regex=None,
                                            text_regex=r"cshuffle_pf8|infp8|fp8_partial|partial_scale")
    if version is None:
        return result(False, "flydsl is not installed")
    if hits:
        return result(True, "an fp8 partial store is present in the FlyDSL sources", found=f"flydsl {version}",
                      evidence=hits)
    return result(False, f"no MoE fp8 partial store (cshuffle_pf8 / infp8 / a partial scale) in flydsl {version} "
                         f"({searched} files searched, plus any FlyDSL kernels checkout on the path)",
                  found=f"flydsl {version}")


PROBES = {"flydsl_moe_fp8_partial_store": moe_fp8_partial_store}

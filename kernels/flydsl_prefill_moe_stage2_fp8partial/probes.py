"""Capability probes for this card's prerequisites (``skill-server reverify`` finds ``PROBES``).

Met by the FlyDSL install itself or by the project's own reference kernels passing their
static gfx950 gates and their parity on gfx950 (emulated or a real device) in this run.
"""
from __future__ import annotations

from skill_kernels.probe_common import reference_kernel_evidence, result, search_flydsl


def moe_fp8_partial_store(ctx) -> dict:
    """A FlyDSL MoE stage-2 GEMM storing fp8 partials with a scalar scale, and its reducer."""
    version, searched, hits = search_flydsl(ctx.project_root, path_regex=None,
                                            text_regex=r"cshuffle_pf8|infp8|fp8_partial|partial_scale")
    if version is None:
        return result(False, "flydsl is not installed; `pip install flydsl==0.5.0`")
    if hits:
        return result(True, "an fp8 partial store is present in the FlyDSL sources", found=f"flydsl {version}",
                      evidence=hits)
    met, detail, evidence = reference_kernel_evidence(ctx)
    if met:
        return result(True, detail, found=f"flydsl {version} + kernels/flydsl_prefill_moe_stage2_fp8partial",
                      evidence=evidence)
    return result(False, f"no MoE fp8 partial store (cshuffle_pf8 / infp8 / a partial scale) in flydsl {version} "
                         f"({searched} files searched, plus any FlyDSL kernels checkout on the path); {detail}",
                  found=f"flydsl {version}")


PROBES = {"flydsl_moe_fp8_partial_store": moe_fp8_partial_store}

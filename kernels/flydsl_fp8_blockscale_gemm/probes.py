"""Capability probes for this card's prerequisites (``skill-server reverify`` finds ``PROBES``)."""
from __future__ import annotations

from skill_kernels.probe_common import result, search_flydsl


def software_blockscale_core(ctx) -> dict:
    """A FlyDSL fp8 block-scale GEMM with the software per-128-K promote."""
    version, searched, hits = search_flydsl(
        ctx.project_root,
        path_regex=r"block_?scale[^/]*\.py$",
        text_regex=r"def\s+\w*(block_?scale\w*gemm|gemm\w*block_?scale)\w*\s*\(",
    )
    if version is None:
        return result(False, "flydsl is not installed")
    if hits:
        return result(True, f"a block-scale GEMM is present in the FlyDSL sources ({len(hits)} file(s))",
                      found=f"flydsl {version}", evidence=hits)
    return result(False, f"no block-scale software-promote GEMM in flydsl {version} ({searched} files searched, "
                         "plus any FlyDSL kernels checkout on the path): the wheel ships no kernels",
                  found=f"flydsl {version}")


PROBES = {"flydsl_software_blockscale_core": software_blockscale_core}

"""Capability probes for this card's prerequisites (``skill-server reverify`` finds ``PROBES``).

``flydsl_software_blockscale_core`` is met by the project's own reference kernel when it passes
its static gfx950 gates and its parity on gfx950 (the emulator, or a real device) in this run
(``probe_common.reference_kernel_evidence``). A block-scale GEMM file found in the FlyDSL
install or a FlyDSL checkout on the path is reported as present but unchecked (met ``None``):
upstream removed its software-promote core (#966) and its newer block-scale mode (#1081) most
likely feeds E8M0 scales to the MFMA, which a file name cannot tell apart.
"""
from __future__ import annotations

from skill_kernels.probe_common import reference_kernel_evidence, result, search_flydsl


def software_blockscale_core(ctx) -> dict:
    """A FlyDSL fp8 block-scale GEMM with the software per-128-K promote."""
    version, searched, hits = search_flydsl(
        ctx.project_root,
        path_regex=r"block_?scale[^/]*\.py$",
        text_regex=r"def\s+\w*(block_?scale\w*gemm|gemm\w*block_?scale)\w*\s*\(",
    )
    if version is None:
        return result(False, "flydsl is not installed; `pip install flydsl==0.5.0`")
    met, detail, evidence = reference_kernel_evidence(ctx)
    if met:
        return result(True, detail, found=f"flydsl {version} + kernels/flydsl_fp8_blockscale_gemm", evidence=evidence)
    if hits:
        # a name is not behaviour: upstream removed its software-promote core (#966) and its newer
        # block-scale mode (#1081) most likely feeds E8M0 scales to the MFMA, so a file found
        # here is "present, unchecked", never "met"
        return result(None, f"a block-scale GEMM is present in the FlyDSL sources ({len(hits)} file(s)), but whether it "
                            "promotes in fp32 software or feeds E8M0 scales to the MFMA is not checked here (check it "
                            f"for E8M0 before use); {detail}", found=f"flydsl {version}", evidence=hits)
    return result(False, f"no block-scale software-promote GEMM in flydsl {version} ({searched} files searched, "
                         f"plus any FlyDSL kernels checkout on the path): the wheel ships no kernels; {detail}",
                  found=f"flydsl {version}")


PROBES = {"flydsl_software_blockscale_core": software_blockscale_core}

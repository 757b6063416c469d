"""Capability probes for this card's prerequisites (``skill-server reverify`` finds ``PROBES``)."""
from __future__ import annotations

from skill_kernels.probe_common import result, search_flydsl


def gfx950_scaled_mfma(ctx) -> dict:
    """FlyDSL can compile for gfx950 here and exposes the scaled MFMA."""
    from verifiers.gfx950.env import toolchain_problem

    problem = toolchain_problem()
    if problem:
        return result(False, f"FlyDSL cannot compile for gfx950 here: {problem}")
    version, _, hits = search_flydsl(ctx.project_root, None, r"mfma_scale_f32_16x16x128_f8f6f4")
    if not hits:
        return result(False, f"flydsl {version} exposes no mfma_scale_f32_16x16x128_f8f6f4 op", found=f"flydsl {version}")
    compiled = []
    for rep in ctx.gate_reports:
        n = sum(c for name, c in (getattr(rep, "mfma", None) or {}).items() if "mfma_scale" in name)
        if n and getattr(rep, "status", None) != "SKIPPED":
            compiled.append(f"target {rep.target}: {n} v_mfma_scale instruction(s) in the compiled gfx950 ISA")
    how = "compiled here" if compiled else "toolchain and op present (no compile in this run)"
    return result(True, f"flydsl {version} compiles for gfx950 here and exposes the scaled MFMA ({how})",
                  found=f"flydsl {version}", evidence=compiled or hits)


PROBES = {"gfx950_scaled_mfma": gfx950_scaled_mfma}

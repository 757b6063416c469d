"""Capability probes for this card's prerequisites (``skill-server reverify`` finds ``PROBES``).

``gfx950_scaled_mfma`` means "this box can run the recipe": FlyDSL compiles for gfx950 here
and exposes the scaled MFMA, and the project's own kernel using it passed parity on a real
gfx950 device, or passed its static gates (with ``v_mfma_scale`` in the compiled ISA) and
its parity on the gfx950 emulator, in this run.
"""
from __future__ import annotations

from skill_kernels.probe_common import reference_kernel_evidence, result, search_flydsl


def gfx950_scaled_mfma(ctx) -> dict:
    """FlyDSL can compile for gfx950 here, exposes the scaled MFMA, and the kernel using it runs correctly."""
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
        if n and getattr(rep, "status", None) == "PASS" and not getattr(rep, "negative", False):
            compiled.append(f"target {rep.target}: {n} v_mfma_scale instruction(s) in the compiled gfx950 ISA")
    met, detail, evidence = reference_kernel_evidence(ctx)
    hardware = met and "on this gfx950 device" in detail
    if met and (compiled or hardware):
        return result(True, f"flydsl {version} compiles for gfx950 here and exposes the scaled MFMA; {detail}",
                      found=f"flydsl {version}", evidence=compiled + evidence)
    why = detail if not met else "no passing gate target compiled a v_mfma_scale instruction in this run"
    return result(False, f"flydsl {version} exposes the scaled MFMA, but {why}", found=f"flydsl {version}",
                  evidence=compiled or hits)


PROBES = {"gfx950_scaled_mfma": gfx950_scaled_mfma}

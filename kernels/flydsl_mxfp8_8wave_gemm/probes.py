"""Capability probes for this card's prerequisites (``skill-server reverify`` finds ``PROBES``).

``gfx950_scaled_mfma`` means "this box can run the recipe": FlyDSL compiles for gfx950 here
and exposes the scaled MFMA, and the card's own recipe kernel -- the 8-wave pipeline with the
``v_permlane16_swap`` (+ ``ds_bpermute``) swap-ab stores, arm ``flydsl_8wave`` -- passed parity
on a real gfx950 device, or passed its static gates (an ``8w_`` target with ``v_mfma_scale`` in
the compiled ISA) and its parity on the gfx950 emulator, in this run. A run of the 4-wave kernel
or of the direct-store ablation is no evidence for it: the capability is met because the
recipe's kernel runs, never by a sibling's.
"""
from __future__ import annotations

import re

from skill_kernels.probe_common import reference_kernel_evidence, result, search_flydsl
from verifiers.gfx950 import env

#: the recipe's arm and its gate targets (gfx950_targets: 8w_bm256_bn256_k2048, 8w_bm256_bn128_k1280)
RECIPE_ARMS = frozenset({"flydsl_8wave"})
RECIPE_GATES = r"^8w_bm256_bn(128|256)_k\d+$"


def gfx950_scaled_mfma(ctx) -> dict:
    """FlyDSL can compile for gfx950 here, exposes the scaled MFMA, and the recipe's kernel using it runs correctly."""
    problem = env.toolchain_problem()
    if problem:
        return result(False, f"FlyDSL cannot compile for gfx950 here: {problem}")
    version, _, hits = search_flydsl(ctx.project_root, None, r"mfma_scale_f32_16x16x128_f8f6f4")
    if not hits:
        return result(False, f"flydsl {version} exposes no mfma_scale_f32_16x16x128_f8f6f4 op", found=f"flydsl {version}")
    compiled = []
    for rep in ctx.gate_reports:
        n = sum(c for name, c in (getattr(rep, "mfma", None) or {}).items() if "mfma_scale" in name)
        if (n and getattr(rep, "status", None) == "PASS" and not getattr(rep, "negative", False)
                and re.search(RECIPE_GATES, str(getattr(rep, "target", "")))):
            compiled.append(f"target {rep.target}: {n} v_mfma_scale instruction(s) in the compiled gfx950 ISA")
    met, detail, evidence = reference_kernel_evidence(ctx, arms=set(RECIPE_ARMS), gate_targets=RECIPE_GATES)
    hardware = met and "on this gfx950 device" in detail
    if met and (compiled or hardware):
        return result(True, f"flydsl {version} compiles for gfx950 here and exposes the scaled MFMA; {detail}",
                      found=f"flydsl {version}", evidence=compiled + evidence)
    why = detail if not met else "no passing 8-wave gate target compiled a v_mfma_scale instruction in this run"
    return result(False, f"flydsl {version} exposes the scaled MFMA, but {why}", found=f"flydsl {version}",
                  evidence=compiled or hits)


PROBES = {"gfx950_scaled_mfma": gfx950_scaled_mfma}

"""Capability probes for this card's prerequisites (``skill-server reverify`` finds ``PROBES``).

``flydsl_moe_fp8_partial_store`` is "a FlyDSL stage-2 MoE GEMM whose epilogue stores the top-k
partials as fp8 with one compile-time scale, and a reducer that reads them". It is met by the
FlyDSL install itself (a ``cshuffle_pf8`` GEMM epilogue in its sources or a FlyDSL checkout on
the path) or by the project's own **fused** kernel: the FlyDSL GEMM of
``flydsl_stage2_gemm`` (problem arm ``flydsl_fp8``, with the FlyDSL ``infp8`` reduce) passing
its static gfx950 gate targets ``gemm_cshuffle_pf8_*`` and its parity on gfx950 (emulated or
a real device) in this run. The project's other FlyDSL kernels of this card (the ``infp8``
reduce behind a Triton GEMM, the standalone store pass of ``flydsl_fp8_epilogue``) are not a
stage-2 GEMM and are no evidence for it.
"""
from __future__ import annotations

from skill_kernels.probe_common import reference_kernel_evidence, result, search_flydsl

FUSED_ARM = "flydsl_fp8"  # problem arm: fused FlyDSL GEMM (cshuffle_pf8) + FlyDSL infp8 reduce
FUSED_GATES = r"^gemm_cshuffle_pf8_"
FOLDER = "flydsl_prefill_moe_stage2_fp8partial"


def fused_arm_runs_the_flydsl_gemm() -> bool:
    """Every emulated arm standing for ``FUSED_ARM`` compiles a FlyDSL stage-2 GEMM (role
    ``gemm``) and a reducer: the arm's evidence is the fused kernel, not a Triton GEMM."""
    from verifiers.gfx950.targets import load_targets

    arms = [a for a in load_targets(FOLDER).emulated if a.arm == FUSED_ARM and a.expect_parity]
    return bool(arms) and all({"gemm", "reduce"} <= set(a.kernels) and a.kernels["gemm"].config.get("kernel") == "gemm"
                              for a in arms)


def moe_fp8_partial_store(ctx) -> dict:
    """A FlyDSL MoE stage-2 GEMM storing fp8 partials with a scalar scale, and its reducer."""
    version, searched, hits = search_flydsl(ctx.project_root, path_regex=None, text_regex=r"cshuffle_pf8")
    if version is None:
        return result(False, "flydsl is not installed; `pip install flydsl==0.5.0`")
    if hits:
        return result(True, "a cshuffle_pf8 GEMM epilogue is present in the FlyDSL sources", found=f"flydsl {version}",
                      evidence=hits)
    if not fused_arm_runs_the_flydsl_gemm():
        return result(False, f"arm {FUSED_ARM} of kernels/{FOLDER} is not the fused FlyDSL stage-2 GEMM "
                             "(its emulated arms compile no 'gemm' kernel)", found=f"flydsl {version}")
    met, detail, evidence = reference_kernel_evidence(ctx, arms={FUSED_ARM}, gate_targets=FUSED_GATES)
    if met:
        return result(True, detail, found=f"flydsl {version} + kernels/{FOLDER}/flydsl_stage2_gemm.py",
                      evidence=evidence)
    return result(False, f"no MoE stage-2 GEMM with an fp8 partial-store epilogue (cshuffle_pf8) in flydsl {version} "
                         f"({searched} files searched, plus any FlyDSL kernels checkout on the path); {detail}",
                  found=f"flydsl {version}")


PROBES = {"flydsl_moe_fp8_partial_store": moe_fp8_partial_store}

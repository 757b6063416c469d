"""Static gates over compiled gfx950 kernels.

``GateSpec`` states a card's static claims (which instructions must / must not appear, how
the scaled MFMA may be used, resource budgets); ``run_gates(artifacts, spec)`` checks one
compile against it and returns a ``TargetGates`` with per-gate PASS / FAIL / SKIPPED and the
evidence (offending instruction lines, counts, figures). ``check_kernel(folder)`` compiles
every target a folder declares (cached) and gates each one; it is what
``skill-server check-kernel`` and re-verification call.

Gate names (stable: used in ``CompileTarget.expect_fail`` and in reports):
``compiled``, ``required``, ``forbidden``, ``required_ir``, ``forbidden_ir``, ``scaled_mfma``,
``fp32_promote``, ``promote_cluster``, ``scratch``, ``vgpr``, ``agpr``, ``lds``, ``occupancy``.

A stage that could not run (flydsl or ld.lld missing) yields a SKIPPED report with the
reason, never a PASS.
"""
from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from verifiers.gfx950 import isa as _isa

if TYPE_CHECKING:  # pragma: no cover
    from verifiers.gfx950.compile import CompileArtifacts
    from verifiers.gfx950.isa import KernelArtifacts

GateStatus = Literal["PASS", "FAIL", "SKIPPED"]
GATE_NAMES = (
    "compiled",
    "required",
    "forbidden",
    "required_ir",
    "forbidden_ir",
    "scaled_mfma",
    "fp32_promote",
    "promote_cluster",
    "scratch",
    "vgpr",
    "agpr",
    "lds",
    "occupancy",
)


class GateSpec(BaseModel):
    """The static claims one compile target must satisfy.

    required: ISA regexes (``re.search`` over instruction lines, comments stripped) that must
      each match at least one instruction, e.g. ``r"v_mfma_f32_16x16x128_f8f6f4"`` or an fp8
      conversion ``r"v_cvt_(scalef32_)?pk_f32_fp8"``.
    forbidden: ISA regexes that must match no instruction (e.g. ``r"v_mfma_f32_16x16x32_fp8"``).
    required_ir / forbidden_ir: the same over the LLVM IR lines (``21_llvm_ir.ll``).
    scaled_mfma: how ``v_mfma_scale_*`` may be used:
      'forbidden' - must not appear at all;
      'pinned'    - may appear only with both scale operands pinned to 1.0 (E8M0 0x7F,
                    i32 0x7F7F7F7F) in the IR call (the software block-scale contract);
      'real'      - must appear with real (non-constant) scale operands (mxfp8 kernels);
      'any'       - not checked.
    require_fp32_promote: the fp8 MFMA results must be scaled in fp32 software, per K
      block: in the IR every fp8 MFMA chain starts from a zero accumulator, accumulates at
      most ``promote_max_chain`` MFMAs (1 for a 16x16x128 MFMA and a 128-K scale block),
      and its result flows (through shuffles / extracts / bitcasts) into an f32 ``fmul`` or
      ``llvm.fma``; and in the ISA the fp32 FMAs write at least 2 values per fp8 MFMA
      (a 16x16 MFMA leaves 4 per lane; an epilogue-only scale leaves far fewer).
    promote_max_chain: see require_fp32_promote.
    promote_cluster: fp8 MFMAs one wave issues per K iteration (None: unchecked). The ISA's
      fp8 MFMAs, in program order, are split into groups of that many; no fp32 promote
      instruction (``v_[pk_]fma/fmac/mul_f32``) may lie between the first and the last MFMA
      of a group (the ``cluster`` schedule: every promote after the iteration's last MFMA),
      and the MFMA count must be a whole number of groups.
    max_scratch_bytes: private segment bytes allowed (0: no spills, no stack).
    max_vgpr / max_agpr: architected VGPR / AccVGPR budgets (None: unchecked).
    max_lds_bytes: static LDS per workgroup budget (None: unchecked).
    min_waves_per_simd: occupancy floor from the gfx950 formula (None: report only).
    waves_per_workgroup: used for the LDS occupancy limit when the ISA metadata lacks
      the workgroup size (None: read from the metadata).
    kernel: regex selecting which kernels of the compiled module are gated (None: all).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    required: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    required_ir: tuple[str, ...] = ()
    forbidden_ir: tuple[str, ...] = ()
    scaled_mfma: Literal["forbidden", "pinned", "real", "any"] = "any"
    require_fp32_promote: bool = False
    promote_max_chain: int = 1
    promote_cluster: int | None = None
    max_scratch_bytes: int = 0
    max_vgpr: int | None = None
    max_agpr: int | None = None
    max_lds_bytes: int | None = None
    min_waves_per_simd: int | None = None
    waves_per_workgroup: int | None = None
    kernel: str | None = None


class GateResult(BaseModel):
    """One gate's verdict, with the evidence that decided it."""

    name: str
    status: GateStatus
    detail: str
    evidence: list[str] = []


class Occupancy(BaseModel):
    """Waves per SIMD on gfx950 (CDNA4) from the register file and LDS limits.

    by_registers = min(8, 512 // roundup8(accum_offset + agpr))
    by_lds       = floor(160 KiB / lds_bytes) * waves_per_workgroup / 4   (None without LDS)
    waves_per_simd = min of the two.
    """

    kernel: str
    unified_vgprs: int
    by_registers: int
    by_lds: float | None
    waves_per_workgroup: int | None
    waves_per_simd: float


class TargetGates(BaseModel):
    """All gates of one compile target.

    status: PASS when every gate passed; FAIL when any failed; SKIPPED when the compile
      could not be attempted (flydsl / ld.lld missing) - never counts as a pass.
    negative: the target is a deliberately wrong variant (NEGATIVE_TARGETS); for those
      ``holds`` is True when every gate in ``expect_fail`` failed (or, with an empty
      ``expect_fail``, any gate failed) - the gates caught the defect.
    """

    folder: str
    target: str
    description: str = ""
    config: dict = {}
    status: GateStatus
    reason: str | None = None
    negative: bool = False
    expect_fail: list[str] = []
    holds: bool | None = None
    gates: list[GateResult] = []
    resources: list[dict] = []  # KernelResources.model_dump() per gated kernel
    occupancy: list[Occupancy] = []
    mfma: dict[str, int] = {}
    compile_seconds: float | None = None
    cache_hit: bool = False
    flydsl_version: str | None = None
    artifacts_dir: str | None = None

    def gate(self, name: str) -> GateResult:
        for g in self.gates:
            if g.name == name:
                return g
        raise KeyError(f"report {self.target!r} has no gate {name!r}; has {[g.name for g in self.gates]}")

    @property
    def failed(self) -> list[str]:
        return [g.name for g in self.gates if g.status == "FAIL"]

    @property
    def ok(self) -> bool:
        """True when the report is what the folder promises: a positive target PASSes, a
        negative target FAILs the expected gates. SKIPPED is never ok."""
        if self.status == "SKIPPED":
            return False
        return bool(self.holds) if self.negative else self.status == "PASS"


LDS_PER_CU = 160 * 1024  # gfx950
REGS_PER_SIMD_LANE = 512  # unified VGPR + AGPR file per SIMD lane (wave64)
MAX_WAVES_PER_SIMD = 8


def occupancy(res: _isa.KernelResources, waves_per_workgroup: int | None = None) -> Occupancy:
    """Waves per SIMD on gfx950 from registers and LDS (see ``Occupancy``)."""
    unified = res.accum_offset + res.agpr if res.agpr else max(res.accum_offset, res.next_free_vgpr)
    granule = max(8, math.ceil(unified / 8) * 8)
    by_regs = min(MAX_WAVES_PER_SIMD, REGS_PER_SIMD_LANE // granule)
    wpw = waves_per_workgroup
    if wpw is None and res.workgroup_size:
        wpw = max(1, math.ceil(res.workgroup_size / res.wavefront_size))
    by_lds = None
    if res.lds_bytes and wpw:
        by_lds = (LDS_PER_CU // res.lds_bytes) * wpw / 4
    waves = float(by_regs) if by_lds is None else min(float(by_regs), by_lds)
    return Occupancy(
        kernel=res.kernel,
        unified_vgprs=unified,
        by_registers=by_regs,
        by_lds=by_lds,
        waves_per_workgroup=wpw,
        waves_per_simd=waves,
    )


def _result(name: str, ok: bool, detail: str, evidence: list[str] | None = None) -> GateResult:
    return GateResult(name=name, status="PASS" if ok else "FAIL", detail=detail, evidence=evidence or [])


def _gate_kernel(k: "KernelArtifacts", spec: GateSpec) -> list[GateResult]:
    """All gates for one kernel (names are the module's GATE_NAMES)."""
    body = _isa.kernel_body(k.isa, k.kernel) or k.isa
    ir = k.llvm_ir
    res = k.resources
    out: list[GateResult] = []
    tag = f"[{k.kernel}] "

    # required / forbidden instruction patterns
    if spec.required:
        missing = [rx for rx in spec.required if not _isa.grep(body, rx)]
        counts = [f"{rx}: {len(_isa.grep(body, rx))} lines" for rx in spec.required]
        out.append(_result("required", not missing, tag + (f"missing {missing}" if missing else "all present"), counts))
    if spec.forbidden:
        hits = [f"{rx} -> {line}" for rx in spec.forbidden for line in _isa.first(_isa.grep(body, rx), 5)]
        out.append(_result("forbidden", not hits, tag + (f"{len(hits)} forbidden lines" if hits else "none found"), hits))
    if spec.required_ir or spec.forbidden_ir:
        if not ir:
            out.append(GateResult(name="required_ir", status="FAIL", detail=tag + "no LLVM IR captured"))
        else:
            ir_lines = ir.splitlines()
            miss = [rx for rx in spec.required_ir if not any(re.search(rx, ln) for ln in ir_lines)]
            if spec.required_ir:
                out.append(_result("required_ir", not miss, tag + (f"missing {miss}" if miss else "all present")))
            if spec.forbidden_ir:
                bad = [ln.strip()[:200] for rx in spec.forbidden_ir for ln in ir_lines if re.search(rx, ln)]
                out.append(_result("forbidden_ir", not bad, tag + f"{len(bad)} forbidden IR lines", _isa.first(bad, 5)))

    # scaled MFMA use
    isa_scaled = _isa.grep(body, _isa.SCALED_MFMA.pattern)
    calls = _isa.scaled_mfma_calls(ir) if ir else _isa.ScaledMfmaSummary()
    scaled = calls.scaled
    summary = (
        f"ISA v_mfma_scale_*: {len(isa_scaled)}; IR mfma.scale calls: {len(calls.calls)} "
        f"({len(calls.unscaled)} with both scales 0 = unscaled MFMA)"
    )
    kinds = sorted({(c.scale_a_kind, c.scale_b_kind) for c in scaled})
    if spec.scaled_mfma == "any":
        out.append(_result("scaled_mfma", True, tag + "not checked; " + summary))
    elif spec.scaled_mfma == "forbidden":
        out.append(_result("scaled_mfma", not isa_scaled, tag + summary, _isa.first(isa_scaled, 5)))
    elif spec.scaled_mfma == "pinned":
        if isa_scaled and not ir:
            out.append(GateResult(
                name="scaled_mfma", status="FAIL", detail=tag + summary + "; no IR to prove the scales are pinned",
                evidence=_isa.first(isa_scaled, 5)))
        else:
            bad = [c for c in scaled if c.scale_a_kind != "pinned" or c.scale_b_kind != "pinned"]
            ev = [f"scale_a={c.scale_a} ({c.scale_a_kind}), scale_b={c.scale_b} ({c.scale_b_kind}): {c.line[:220]}"
                  for c in _isa.first(bad, 5)]
            detail = summary + (f"; {len(bad)} calls with non-1.0 scale operands {kinds}" if bad else
                                "; every scaled call pinned to E8M0 1.0 (0x7F7F7F7F)" if scaled else "")
            out.append(_result("scaled_mfma", not bad, tag + detail, ev))
    else:  # real
        real = [c for c in scaled if c.scale_a_kind == "real" and c.scale_b_kind == "real"]
        out.append(_result(
            "scaled_mfma", bool(real) and bool(isa_scaled),
            tag + summary + f"; {len(real)} calls with both scale operands real", [c.line[:220] for c in real[:3]]))

    # software fp32 promote
    if spec.require_fp32_promote:
        if not ir:
            out.append(GateResult(name="fp32_promote", status="FAIL", detail=tag + "no LLVM IR captured"))
        else:
            p = _isa.promote_summary(ir, body)
            max_chain = "unbounded (loop-carried accumulator)" if p.max_chain >= 10**9 else str(p.max_chain)
            # a finite chain depth means the chain is rooted at a constant (zero) accumulator
            ok = (
                p.fp8_mfma > 0
                and p.max_chain <= spec.promote_max_chain
                and p.promoted_chains > 0
                and not p.unpromoted
                and p.isa_fp8_mfma > 0
                and p.isa_fma_values >= 2 * p.isa_fp8_mfma
            )
            detail = (
                f"IR: {p.fp8_mfma} fp8 MFMA calls, {p.chain_starts} from a zero accumulator, longest chain "
                f"{max_chain} (allowed {spec.promote_max_chain}), {p.promoted_chains} chain results reach an "
                f"fp32 fmul/fma; ISA: {p.isa_fp8_mfma} fp8 MFMAs, {p.isa_fma_values} fp32 FMA values "
                f"(need >= {2 * p.isa_fp8_mfma})"
            )
            out.append(_result("fp32_promote", ok, tag + detail, p.unpromoted))

    if spec.promote_cluster is not None:
        c = _isa.promote_clusters(body, spec.promote_cluster)
        whole = c.fp8_mfma > 0 and c.fp8_mfma % spec.promote_cluster == 0
        detail = (f"{c.fp8_mfma} fp8 MFMAs = {c.iterations} K iterations of {spec.promote_cluster}"
                  + ("" if whole else " (not a whole number of iterations)")
                  + f"; {c.interleaved_count} fp32 promote instructions between MFMAs of one iteration")
        out.append(_result("promote_cluster", whole and not c.interleaved_count, tag + detail, c.interleaved))

    # resources
    scratch = _isa.scratch_instructions(body)
    ok = res.scratch_bytes <= spec.max_scratch_bytes and (spec.max_scratch_bytes > 0 or not scratch)
    out.append(_result(
        "scratch", ok,
        tag + f"private segment {res.scratch_bytes} B (max {spec.max_scratch_bytes}), vgpr spills {res.vgpr_spill}, "
        f"sgpr spills {res.sgpr_spill}, {len(scratch)} scratch instructions",
        _isa.first(scratch, 8)))
    if spec.max_vgpr is not None:
        out.append(_result("vgpr", res.vgpr <= spec.max_vgpr, tag + f"{res.vgpr} VGPRs (max {spec.max_vgpr})"))
    if spec.max_agpr is not None:
        out.append(_result("agpr", res.agpr <= spec.max_agpr, tag + f"{res.agpr} AGPRs (max {spec.max_agpr})"))
    if spec.max_lds_bytes is not None:
        out.append(_result(
            "lds", res.lds_bytes <= spec.max_lds_bytes, tag + f"{res.lds_bytes} B static LDS (max {spec.max_lds_bytes})"))
    occ = occupancy(res, spec.waves_per_workgroup)
    occ_txt = (
        f"{occ.waves_per_simd:g} waves/SIMD (registers: {occ.by_registers} from {occ.unified_vgprs} unified VGPRs; "
        f"LDS: {'unlimited' if occ.by_lds is None else f'{occ.by_lds:g}'})"
    )
    if spec.min_waves_per_simd is not None:
        out.append(_result(
            "occupancy", occ.waves_per_simd >= spec.min_waves_per_simd,
            tag + occ_txt + f", need >= {spec.min_waves_per_simd}"))
    else:
        out.append(GateResult(name="occupancy", status="PASS", detail=tag + occ_txt + " (reported, no floor)"))
    return out


def _merge(results: list[GateResult]) -> list[GateResult]:
    """One result per gate name across kernels: FAIL if any kernel failed."""
    merged: dict[str, GateResult] = {}
    for r in results:
        if r.name not in merged:
            merged[r.name] = r.model_copy(deep=True)
            continue
        m = merged[r.name]
        m.detail += " | " + r.detail
        m.evidence += r.evidence
        if r.status == "FAIL":
            m.status = "FAIL"
    return sorted(merged.values(), key=lambda g: GATE_NAMES.index(g.name) if g.name in GATE_NAMES else 99)


def run_gates(artifacts: "CompileArtifacts", spec: GateSpec) -> TargetGates:
    """Check one compile (``compile.CompileArtifacts``) against ``spec``."""
    base = dict(
        folder=artifacts.folder,
        target=artifacts.target,
        compile_seconds=artifacts.compile_seconds,
        cache_hit=artifacts.cache_hit,
        flydsl_version=artifacts.flydsl_version,
        artifacts_dir=artifacts.artifacts_dir,
    )
    if artifacts.status == "skipped":
        return TargetGates(**base, status="SKIPPED", reason=artifacts.reason,
                          gates=[GateResult(name="compiled", status="SKIPPED", detail=artifacts.reason or "")])
    if artifacts.status == "error":
        return TargetGates(**base, status="FAIL", reason="compile failed",
                          gates=[GateResult(name="compiled", status="FAIL", detail=(artifacts.reason or "")[-3000:])])
    kernels = artifacts.kernels
    if spec.kernel:
        kernels = [k for k in kernels if re.search(spec.kernel, k.kernel)]
    if not kernels:
        names = [k.kernel for k in artifacts.kernels]
        return TargetGates(**base, status="FAIL", reason=f"no kernel matches {spec.kernel!r} in {names}",
                          gates=[GateResult(name="compiled", status="FAIL", detail=f"kernels: {names}")])
    results = [GateResult(name="compiled", status="PASS", detail=f"{len(kernels)} kernel(s): {[k.kernel for k in kernels]}")]
    for k in kernels:
        results += _gate_kernel(k, spec)
    gates = _merge(results)
    mfma: dict[str, int] = {}
    for k in kernels:
        for name, n in _isa.mfma_kinds(_isa.kernel_body(k.isa, k.kernel) or k.isa).items():
            mfma[name] = mfma.get(name, 0) + n
    status = "FAIL" if any(g.status == "FAIL" for g in gates) else "PASS"
    return TargetGates(
        **base,
        status=status,
        gates=gates,
        resources=[k.resources.model_dump() for k in kernels],
        occupancy=[occupancy(k.resources, spec.waves_per_workgroup) for k in kernels],
        mfma=mfma,
    )

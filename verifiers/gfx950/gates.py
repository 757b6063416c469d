"""Static gates over compiled gfx950 kernels.

``GateSpec`` states a card's static claims (which instructions must / must not appear, how
the scaled MFMA may be used, resource budgets); ``run_gates(artifacts, spec)`` checks one
compile against it and returns a ``GateReport`` with per-gate PASS / FAIL / SKIPPED and the
evidence (offending instruction lines, counts, figures). ``check_kernel(folder)`` compiles
every target a folder declares (cached) and gates each one; it is what
``skill-server check-kernel`` and re-verification call.

Gate names (stable: used in ``CompileTarget.expect_fail`` and in reports):
``compiled``, ``required``, ``forbidden``, ``required_ir``, ``forbidden_ir``, ``scaled_mfma``,
``fp32_promote``, ``scratch``, ``vgpr``, ``agpr``, ``lds``, ``occupancy``.

A stage that could not run (flydsl or ld.lld missing) yields a SKIPPED report with the
reason, never a PASS.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

GateStatus = Literal["PASS", "FAIL", "SKIPPED"]
GATE_NAMES = (
    "compiled",
    "required",
    "forbidden",
    "required_ir",
    "forbidden_ir",
    "scaled_mfma",
    "fp32_promote",
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
    require_fp32_promote: the fp8 MFMA results must be scaled in fp32 software: every
      fp8 MFMA call result in the IR flows into an fp32 multiply / fma (through
      extract/shuffle/bitcast), and the ISA holds fp32 fma/mul instructions.
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


class GateReport(BaseModel):
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


def run_gates(artifacts, spec: GateSpec) -> GateReport:  # noqa: ANN001 - CompileArtifacts
    """Check one compile (``compile.CompileArtifacts``) against ``spec``."""
    raise NotImplementedError


def check_kernel(
    folder: str,
    target: str | None = None,
    use_cache: bool = True,
    *,
    include_negative: bool = False,
) -> list[GateReport]:
    """Compile (cached, in a subprocess) and gate the targets of ``kernels/<folder>``.

    target: one target name (positive or negative); None: every TARGETS entry, plus the
      NEGATIVE_TARGETS when ``include_negative``.
    Returns one GateReport per target; a missing flydsl / ld.lld yields SKIPPED reports.
    Raises NoTargetsError when the folder has no gfx950_targets.py, KeyError for an unknown
    target name.
    """
    raise NotImplementedError

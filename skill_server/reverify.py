"""Re-verification: check each card's claims on this box and record what holds.

Per card, in order:
1. prerequisites: installed package versions (``importlib.metadata`` against the card's
   PEP 440 specifier) and capabilities through the probe registry ``PROBES`` (code that
   looks at the box; an unknown capability cannot be confirmed and counts as missing);
2. static gates: where FlyDSL and an ld.lld for gfx950 are present and the card's kernel
   folder declares compile targets, ``verifiers.gfx950.gates.check_kernel``;
3. verifier: on a GPU, ``verifiers.api.verify`` for the card's ``verifier.shapes`` with
   the platform's baseline and reference arms; on a box without a GPU the stage is not
   applicable (the reason says so) - never a pass;
4. claims: on a platform the card makes performance claims for (its generation is in
   ``match.gens``), each shape must measure FASTER, at or above
   ``expects.isolated_speedup_min``, and not clearly below the card's recorded figure
   for that shape (validation artifacts beside the card).

The per-card status (CONFIRMED / DRIFTED / FAILED / PREREQUISITE_MISSING /
NOT_APPLICABLE_HERE) is defined in ``claims.py``. Heavy imports (torch, flydsl) happen only
inside the stage that needs them.
"""
from __future__ import annotations

import importlib.util
import os
import platform as _platform
import re
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from . import is_embedded
from .artifacts import parse_artifact
from .cards import Card, ParsedCard, Prerequisite
from .claims import ReverifyStatus, worst
from .ledger import PlatformInfo, ResultRecord, parse_shape_text, shape_text
from .vocabulary import VocabularyError, vocabulary

StageStatus = Literal["PASS", "FAIL", "MISSING", "SKIPPED", "NOT_APPLICABLE", "CONFIRMED", "DRIFTED"]
DRIFT_TOLERANCE = 0.05  # relative; a card's expects.noise_floor widens it
LIBRARIES = ("torch", "triton", "flydsl", "numpy", "pydantic", "mcp", "gpu-skill-server")


# ============================================================================ models
class PrerequisiteCheck(BaseModel):
    kind: Literal["package", "capability"]
    name: str
    required: str | None = Field(None, description="the card's version specifier")
    met: bool | None = Field(description="None: could not be checked (counts as not met)")
    found: str | None = Field(None, description="installed version, or what the probe found")
    detail: str
    evidence: list[str] = Field(default_factory=list)
    fallback: str | None = None
    fallback_present: bool | None = Field(None, description="the fallback's project files exist here")


class StageResult(BaseModel):
    name: Literal["prerequisites", "gates", "verifier", "claims"]
    status: StageStatus
    reason: str
    detail: list[dict[str, Any]] = Field(default_factory=list)


class ShapeOutcome(BaseModel):
    shape: str
    verdict: str | None = None
    speedup: float | None = None
    interval: tuple[float, float] | None = None
    floor: float | None = None
    recorded_speedup: float | None = Field(None, description="the card's figure for this shape, when it has one")
    holds: bool | None = Field(None, description="None: not compared on this platform")
    reason: str = ""


class CardReverification(BaseModel):
    card_id: str
    platform: str
    status: ReverifyStatus
    reason: str
    prerequisites: list[PrerequisiteCheck] = Field(default_factory=list)
    stages: list[StageResult] = Field(default_factory=list)
    shapes: list[ShapeOutcome] = Field(default_factory=list)


class ReverifyReport(BaseModel):
    platform: PlatformInfo
    git_rev: str | None = None
    started_at: datetime
    finished_at: datetime
    cards: list[CardReverification]
    ledger: str | None = Field(None, description="where the statuses were recorded; None: not recorded")

    def table(self) -> str:
        rows = [("card", "platform", "status", "reason")]
        rows += [(c.card_id, c.platform, c.status, _short(c.reason, 90)) for c in self.cards]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        return "\n".join(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}" for r in rows)


class ReverifyProgress(BaseModel):
    index: int
    total: int
    card_id: str
    stage: str
    message: str


ProgressFn = Callable[[ReverifyProgress], None]


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


# ============================================================================ probes
@dataclass
class ProbeContext:
    project_root: Path
    card: Card
    prerequisite: Prerequisite
    gate_reports: list[Any] = field(default_factory=list)  # verifiers.gfx950.gates.GateReport


@dataclass
class ProbeResult:
    met: bool | None
    detail: str
    found: str | None = None
    evidence: list[str] = field(default_factory=list)


Probe = Callable[[ProbeContext], ProbeResult]


@lru_cache(maxsize=1)
def _flydsl_sources() -> tuple[str | None, tuple[Path, ...]]:
    """The installed flydsl's version and Python files (from its distribution record)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("flydsl")
    except PackageNotFoundError:
        return None, ()
    files = tuple(Path(dist.locate_file(f)) for f in (dist.files or ()) if str(f).endswith(".py"))
    return dist.version, files


def _flydsl_checkout_kernels(project_root: Path) -> list[Path]:
    """A FlyDSL source checkout's ``kernels`` package on the import path (the cards advise
    people to put one there); the project's own ``kernels/`` folder is not one."""
    try:
        spec = importlib.util.find_spec("kernels")
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    own = (project_root / "kernels").resolve()
    return [Path(p) for p in (spec.submodule_search_locations or []) if Path(p).resolve() != own]


def search_flydsl(project_root: Path, path_regex: str | None, text_regex: str | None,
                  extra_roots: Iterable[Path] = ()) -> tuple[str | None, int, list[str]]:
    """Search the installed flydsl (and any FlyDSL ``kernels`` checkout on the path) for
    files whose path matches ``path_regex`` or whose text matches ``text_regex``.
    Returns (flydsl version, files searched, hits as 'path: why')."""
    version, files = _flydsl_sources()
    candidates = list(files)
    for root in [*_flydsl_checkout_kernels(project_root), *extra_roots]:
        candidates += sorted(Path(root).rglob("*.py"))
    prx = re.compile(path_regex, re.IGNORECASE) if path_regex else None
    trx = re.compile(text_regex, re.IGNORECASE) if text_regex else None
    hits: list[str] = []
    for path in candidates:
        if prx and prx.search(path.as_posix()):
            hits.append(f"{path}: file name")
            continue
        if trx:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")[:2_000_000]
            except OSError:
                continue
            m = trx.search(text)
            if m:
                hits.append(f"{path}: {m.group(0)!r}")
    return version, len(candidates), hits


def _fallback_paths(text: str | None, project_root: Path) -> tuple[list[str], bool | None]:
    if not text:
        return [], None
    paths = re.findall(r"(?:kernels|verifiers|skill_kernels)/[\w./-]*", text)
    if not paths:
        return [], None
    return paths, all((project_root / p.rstrip("/.")).exists() for p in paths)


def probe_software_blockscale_core(ctx: ProbeContext) -> ProbeResult:
    """A FlyDSL fp8 block-scale GEMM with the software per-128-K promote."""
    version, searched, hits = search_flydsl(
        ctx.project_root,
        path_regex=r"block_?scale[^/]*\.py$",
        text_regex=r"def\s+\w*(block_?scale\w*gemm|gemm\w*block_?scale)\w*\s*\(",
    )
    if version is None:
        return ProbeResult(False, "flydsl is not installed")
    if hits:
        return ProbeResult(True, f"a block-scale GEMM is present in the FlyDSL sources ({len(hits)} file(s))",
                           found=f"flydsl {version}", evidence=hits[:10])
    return ProbeResult(False, f"no block-scale software-promote GEMM in flydsl {version} ({searched} files searched, "
                              "plus any FlyDSL kernels checkout on the path): the wheel ships no kernels",
                       found=f"flydsl {version}")


def probe_moe_fp8_partial_store(ctx: ProbeContext) -> ProbeResult:
    """A FlyDSL MoE stage-2 GEMM storing fp8 partials with a scalar scale, and its reducer."""
    version, searched, hits = search_flydsl(
        ctx.project_root, path_regex=None,
        text_regex=r"cshuffle_pf8|infp8|fp8_partial|partial_scale",
    )
    if version is None:
        return ProbeResult(False, "flydsl is not installed")
    if hits:
        return ProbeResult(True, "an fp8 partial store is present in the FlyDSL sources", found=f"flydsl {version}",
                           evidence=hits[:10])
    return ProbeResult(False, f"no MoE fp8 partial store (cshuffle_pf8 / infp8 / a partial scale) in flydsl {version} "
                              f"({searched} files searched, plus any FlyDSL kernels checkout on the path)",
                       found=f"flydsl {version}")


def probe_gfx950_scaled_mfma(ctx: ProbeContext) -> ProbeResult:
    """FlyDSL can compile for gfx950 here and exposes the scaled MFMA."""
    try:
        from verifiers.gfx950.env import toolchain_problem
    except ImportError as exc:  # pragma: no cover - the repo ships verifiers
        return ProbeResult(None, f"cannot check: {exc}")
    problem = toolchain_problem()
    if problem:
        return ProbeResult(False, f"FlyDSL cannot compile for gfx950 here: {problem}")
    version, _, hits = search_flydsl(ctx.project_root, None, r"mfma_scale_f32_16x16x128_f8f6f4")
    if not hits:
        return ProbeResult(False, f"flydsl {version} exposes no mfma_scale_f32_16x16x128_f8f6f4 op", found=f"flydsl {version}")
    compiled = []
    for rep in ctx.gate_reports:
        n = sum(c for name, c in (getattr(rep, "mfma", None) or {}).items() if "mfma_scale" in name)
        if n and getattr(rep, "status", None) != "SKIPPED":
            compiled.append(f"target {rep.target}: {n} v_mfma_scale instruction(s) in the compiled gfx950 ISA")
    how = "compiled here" if compiled else "toolchain and op present (no compile in this run)"
    return ProbeResult(True, f"flydsl {version} compiles for gfx950 here and exposes the scaled MFMA ({how})",
                       found=f"flydsl {version}", evidence=(compiled or hits)[:10])


PROBES: dict[str, Probe] = {
    "flydsl_software_blockscale_core": probe_software_blockscale_core,
    "gfx950_scaled_mfma": probe_gfx950_scaled_mfma,
    "flydsl_moe_fp8_partial_store": probe_moe_fp8_partial_store,
}


# ===================================================================== prerequisites
def _version_satisfies(version: str, spec: str) -> bool | None:
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - packaging ships with pip almost everywhere
        return _simple_satisfies(version, spec)
    try:
        return Version(version) in SpecifierSet(spec, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return None


def _simple_satisfies(version: str, spec: str) -> bool | None:
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", v)[:4])

    ops = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, "==": lambda a, b: a == b,
           ">": lambda a, b: a > b, "<": lambda a, b: a < b, "!=": lambda a, b: a != b}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        m = re.fullmatch(r"(>=|<=|==|!=|>|<)\s*([\w.]+)", part)
        if not m:
            return None
        if not ops[m.group(1)](key(version), key(m.group(2))):
            return False
    return True


def check_prerequisite(prereq: Prerequisite, ctx: ProbeContext, probes: dict[str, Probe]) -> PrerequisiteCheck:
    fallback_paths, fallback_present = _fallback_paths(prereq.fallback, ctx.project_root)
    base = dict(kind=prereq.kind, name=prereq.name, required=prereq.version, fallback=prereq.fallback,
                fallback_present=fallback_present)
    if prereq.kind == "package":
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version(prereq.name)
        except PackageNotFoundError:
            return PrerequisiteCheck(met=False, detail=f"package {prereq.name} is not installed", **base)
        if not prereq.version:
            return PrerequisiteCheck(met=True, found=found, detail=f"{prereq.name} {found} installed", **base)
        ok = _version_satisfies(found, prereq.version)
        if ok is None:
            return PrerequisiteCheck(met=None, found=found, detail=f"cannot compare {found} with {prereq.version!r}", **base)
        return PrerequisiteCheck(met=ok, found=found, **base,
                                 detail=f"{prereq.name} {found} {'satisfies' if ok else 'does not satisfy'} {prereq.version}")
    probe = probes.get(prereq.name)
    if probe is None:
        return PrerequisiteCheck(met=None, **base, detail=f"no probe registered for capability {prereq.name!r} "
                                 "(skill_server/reverify.py PROBES): it cannot be checked, so it is not confirmed")
    ctx.prerequisite = prereq
    try:
        res = probe(ctx)
    except Exception as exc:  # a probe bug must not abort the run
        return PrerequisiteCheck(met=None, **base, detail=f"probe {prereq.name} raised {type(exc).__name__}: {exc}")
    detail = res.detail
    if not res.met and prereq.fallback:
        have = {True: "present", False: "MISSING", None: "not a project path"}[fallback_present]
        detail += f"; fallback: {prereq.fallback} ({have})"
    return PrerequisiteCheck(met=res.met, found=res.found, detail=detail, evidence=res.evidence, **base)


# ============================================================================ platform
def detect_platform() -> PlatformInfo:
    """What this box is: runtime, device, generation, library versions. torch is
    imported (to ask for the GPU) only when GPU device files exist."""
    from importlib.metadata import PackageNotFoundError, version

    libs: dict[str, str] = {}
    for name in LIBRARIES:
        try:
            libs[name] = version(name)
        except PackageNotFoundError:
            pass
    runtime, device, gen = "cpu", f"cpu ({_platform.machine() or 'unknown'})", _platform.machine() or None
    if _gpu_device_nodes() and importlib.util.find_spec("torch") is not None:
        import torch

        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            device = props.name
            if getattr(torch.version, "hip", None):
                runtime, gen = "rocm", str(getattr(props, "gcnArchName", "")).split(":")[0] or None
                libs["rocm"] = str(torch.version.hip)
            else:
                major, minor = torch.cuda.get_device_capability(0)
                runtime, gen = "cuda", f"sm_{major}{minor}"
                libs["cuda"] = str(torch.version.cuda)
    if runtime != "cpu" and gen is not None:
        try:
            gen = vocabulary().generation(gen)
        except VocabularyError:
            gen = None  # keyed by device name instead
    return PlatformInfo(device=device, generation=gen, runtime=runtime, libraries=libs)


def _gpu_device_nodes() -> list[str]:
    """Device files a CUDA or ROCm GPU brings (/dev/nvidia0, /dev/kfd, WSL's /dev/dxg).
    None of them: no GPU, and torch (seconds to import) need not be asked."""
    import glob

    return glob.glob("/dev/nvidia[0-9]*") + [p for p in ("/dev/kfd", "/dev/dxg") if os.path.exists(p)]


def git_revision(project_root: Path) -> str | None:
    if is_embedded(project_root):  # the cards inside an installed wheel: no repository of their own
        return None
    try:
        out = subprocess.run(["git", "-C", str(project_root), "describe", "--always", "--dirty", "--abbrev=40"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    rev = out.stdout.strip()
    return rev if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?", rev) else None


# ============================================================================== stages
GateRunner = Callable[[str], list[Any]]
VerifierRunner = Callable[..., Any]


def default_gate_runner(folder: str) -> list[Any]:
    from verifiers.gfx950.gates import check_kernel

    return check_kernel(folder)


def default_verifier_runner(problem: str, candidate: str, baseline: str, shapes: list[str],
                            progress: Callable[[str], None] | None, options: Any = None) -> Any:
    """``verifiers.api.verify`` with the card's reference arm as the candidate."""
    from verifiers.api import verify

    def forward(done: int, total: int, message: str) -> None:
        if progress is not None:
            progress(f"{100 * done // max(total, 1)}% {message}")

    return verify(problem, f"arm:{candidate}", baseline, shapes, options, forward)


def run_gate_stage(card: Card, project_root: Path, runner: GateRunner | None) -> tuple[StageResult, list[Any]]:
    folder = card.verifier.problem if card.verifier else card.id
    if runner is None:
        return StageResult(name="gates", status="SKIPPED", reason="static gates not requested in this run"), []
    if not (project_root / "kernels" / folder / "gfx950_targets.py").is_file():
        return StageResult(name="gates", status="NOT_APPLICABLE",
                           reason=f"kernels/{folder} declares no gfx950 compile targets (gfx950_targets.py)"), []
    if runner is default_gate_runner:
        try:
            from verifiers.gfx950.env import toolchain_problem
        except ImportError as exc:  # pragma: no cover
            return StageResult(name="gates", status="SKIPPED", reason=f"gfx950 gates unavailable: {exc}"), []
        problem = toolchain_problem()
        if problem:
            return StageResult(name="gates", status="SKIPPED", reason=f"FlyDSL cannot compile for gfx950 here: {problem}"), []
    try:
        reports = list(runner(folder))
    except NotImplementedError:
        return StageResult(name="gates", status="SKIPPED", reason="the static gfx950 gates are not implemented in this build"), []
    except LookupError as exc:  # NoTargetsError
        return StageResult(name="gates", status="NOT_APPLICABLE", reason=str(exc)), []
    except Exception as exc:  # infrastructure, not the card: never a pass, never a card failure
        return StageResult(name="gates", status="SKIPPED", reason=f"the gate run raised {type(exc).__name__}: {exc}"), []
    detail = [{"target": getattr(r, "target", "?"), "status": getattr(r, "status", "?"),
               "failed": list(getattr(r, "failed", []) or []), "reason": getattr(r, "reason", None)} for r in reports]
    failed = [r for r in reports if getattr(r, "status", None) == "FAIL" and not getattr(r, "ok", False)]
    if failed:
        what = "; ".join(f"{r.target}: {', '.join(r.failed) or r.reason or 'failed'}" for r in failed)
        return StageResult(name="gates", status="FAIL", reason=f"static gfx950 gates failed in kernels/{folder}: {what}",
                           detail=detail), reports
    if not reports or all(getattr(r, "status", None) == "SKIPPED" for r in reports):
        why = next((r.reason for r in reports if getattr(r, "reason", None)), "no report")
        return StageResult(name="gates", status="SKIPPED", reason=f"gates skipped: {why}", detail=detail), reports
    return StageResult(name="gates", status="PASS", detail=detail,
                       reason=f"{sum(1 for r in reports if r.status == 'PASS')} gfx950 target(s) in kernels/{folder} pass"), reports


def _as_dict(obj: Any) -> Any:
    return obj.model_dump(mode="json") if hasattr(obj, "model_dump") else obj


LEDGER_VERDICTS = ("FASTER", "SLOWER", "NO_DIFFERENCE", "FAIL")


def _parity_summary(parity: dict[str, Any] | None) -> dict[str, float | int | str]:
    """Worst figures of the candidate over every parity case and output (and the
    baseline arm's, for comparison), from ``verifiers.parity.ParityResult``."""
    if not parity:
        return {}
    out: dict[str, float | int | str] = {"status": str(parity.get("status"))}
    cands = [o["candidate"] for c in parity.get("cases", []) for o in c.get("outputs", [])]
    bases = [o["baseline"] for c in parity.get("cases", []) for o in c.get("outputs", [])]
    for prefix, rows in (("", cands), ("baseline_", bases)):
        if rows:
            out[f"{prefix}min_cosine"] = min(r["cosine"] for r in rows)
            out[f"{prefix}max_abs"] = max(r["max_abs"] for r in rows)
            out[f"{prefix}max_rel_l2"] = max(r["rel_l2"] for r in rows)
            out[f"{prefix}mismatches"] = sum(r["mismatches"] for r in rows)
    out["cases"] = len(parity.get("cases", []))
    return {k: v for k, v in out.items() if not (isinstance(v, float) and v != v)}  # drop NaN


def shape_results_from_report(report: Any) -> list[dict[str, Any]]:
    """One dict per shape of a ``verifiers.report.VerificationReport`` (model or its JSON):
    shape, hidden, verdict, speedup, interval, baseline_ms, candidate_ms (timing arm A is
    the baseline), parity (worst figures), parity_passed, stages (name -> status) and
    problems (the reasons of failed / errored stages)."""
    data = _as_dict(report)
    if not isinstance(data, dict) or "shape_reports" not in data:
        raise ValueError("not a verifier report: expected the JSON of verifiers.report.VerificationReport "
                         "(with 'shape_reports')")
    out = []
    for sr in data["shape_reports"]:
        timing = sr.get("timing") or {}
        ab = timing.get("ab") or {}
        parity = sr.get("parity")
        stages = {name: st.get("status", "?") for name, st in (sr.get("stages") or {}).items()}
        problems = [f"{name}: {st.get('reason') or st.get('status')}" for name, st in (sr.get("stages") or {}).items()
                    if st.get("status") in ("FAIL", "ERROR")]
        lo, hi = ab.get("ci_low"), ab.get("ci_high")
        out.append({
            "shape": sr.get("shape"),
            "hidden": bool(sr.get("hidden")),
            "verdict": sr.get("verdict"),
            "speedup": ab.get("speedup"),
            "interval": (lo, hi) if lo and hi else None,
            "baseline_ms": ab.get("median_a_ms"),
            "candidate_ms": ab.get("median_b_ms"),
            "parity": _parity_summary(parity),
            "parity_passed": (parity.get("status") == "PASS") if parity else None,
            "stages": stages,
            "problems": problems,
        })
    return out


def platform_from_report(report: Any) -> PlatformInfo | None:
    """The platform a verifier report's provenance names, if it names one."""
    data = _as_dict(report)
    prov = data.get("provenance") if isinstance(data, dict) else None
    if not prov or prov.get("platform") not in ("cuda", "rocm", "cpu"):
        return None
    runtime = prov["platform"]
    props = prov.get("device_properties") or {}
    gen: str | None = None
    if runtime == "rocm":
        gen = str(props.get("gcnArchName", "")).split(":")[0] or None
    elif runtime == "cuda" and props.get("capability"):
        gen = "sm_" + str(props["capability"]).replace(".", "")
    if gen is not None:
        try:
            gen = vocabulary().generation(gen)
        except VocabularyError:
            gen = None
    if runtime == "cpu":
        gen = _platform.machine() or None
    libs = {name: str(prov[key]) for name, key in (("torch", "torch_version"), ("triton", "triton_version"),
                                                   ("flydsl", "flydsl_version"), ("cuda", "cuda_runtime"),
                                                   ("rocm", "hip_runtime")) if prov.get(key)}
    return PlatformInfo(device=prov.get("device_name") or runtime, generation=gen, runtime=runtime, libraries=libs)


def git_rev_from_report(report: Any) -> str | None:
    prov = (_as_dict(report) or {}).get("provenance") or {}
    rev = prov.get("git_revision")
    if not rev or not re.fullmatch(r"[0-9a-f]{7,40}", str(rev)):
        return None
    return f"{rev}-dirty" if prov.get("git_dirty") else str(rev)


def record_from_row(row: dict[str, Any], card_id: str, baseline: str, candidate: str, recorded_by: str,
                    platform: PlatformInfo, source: str, git_rev: str | None = None,
                    report_path: str | None = None) -> dict[str, Any] | str:
    """A ledger record dict for one shape row, or why the row cannot be one (hidden
    shapes carry no timing; an INCONCLUSIVE run timed nothing)."""
    if row["hidden"]:
        return "hidden shape: parity only, no timing to record"
    verdict = row["verdict"]
    if verdict == "ERROR":
        verdict = "FAIL"  # the harness or the problem could not decide: stored as a failure with its stages
    if verdict not in LEDGER_VERDICTS:
        return f"verdict {row['verdict']}: nothing was timed"
    rec: dict[str, Any] = {
        "card_id": card_id, "shape": row["shape"], "verdict": verdict, "speedup": row["speedup"],
        "interval": list(row["interval"]) if row["interval"] else None,
        "baseline": {"name": baseline, "time_ms": row["baseline_ms"]},
        "candidate": {"name": candidate, "time_ms": row["candidate_ms"]},
        "parity": row["parity"], "stages": row["stages"], "parity_passed": row["parity_passed"],
        "platform": platform.model_dump(mode="json"), "git_rev": git_rev, "recorded_by": recorded_by,
        "source": source, "report_path": report_path,
        "notes": "; ".join(row["problems"])[:4000] or None,
    }
    if verdict == "FAIL":
        rec["speedup"] = rec["interval"] = None  # a failed run's timing is not a result
        rec["baseline"]["time_ms"] = rec["candidate"]["time_ms"] = None
    return {k: v for k, v in rec.items() if v is not None}


def records_from_report(report: Any, card_id: str, baseline: str, candidate: str, recorded_by: str,
                        platform: PlatformInfo, git_rev: str | None = None,
                        report_path: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Ledger record dicts (validate with ``ledger.validate_record``) from a verifier
    report, and the rows left out with the reason."""
    records, skipped = [], []
    for row in shape_results_from_report(report):
        rec = record_from_row(row, card_id, baseline, candidate, recorded_by, platform, "verifier_report",
                              git_rev, report_path)
        if isinstance(rec, str):
            skipped.append(f"{row['shape']}: {rec}")
        else:
            records.append(rec)
    return records, skipped


def recorded_speedups(parsed: ParsedCard) -> dict[str, float]:
    """The card's numeric per-shape figures from its validation artifacts (shape text -> speedup)."""
    out: dict[str, float] = {}
    for path in sorted(parsed.folder.glob("*.y*ml")):
        artifact, _ = parse_artifact(path)
        if artifact is None:
            continue
        for m in artifact.measurements:
            if m.speedup and m.shape and m.scope in ("isolated", "segment"):
                out.setdefault(shape_text(dict(m.shape)), float(m.speedup))
    return out


# ============================================================================ reverifier
@dataclass
class Reverifier:
    project_root: Path
    platform: PlatformInfo
    recorded_by: str
    git_rev: str | None = None
    probes: dict[str, Probe] = field(default_factory=lambda: dict(PROBES))
    gate_runner: GateRunner | None = default_gate_runner
    verifier_runner: VerifierRunner | None = default_verifier_runner
    # smoke runs (bench/reverify_h200.py --smoke): other shapes per card, the CPU arms, quick options
    shapes_override: dict[str, list[str]] | None = None
    verifier_on_cpu: bool = False
    verifier_options: Any = None

    def run(self, cards: list[ParsedCard], progress: ProgressFn | None = None
            ) -> list[tuple[CardReverification, list[ResultRecord]]]:
        out = []
        for i, parsed in enumerate(cards, start=1):
            def say(stage: str, message: str, _i: int = i, _id: str = parsed.card.id) -> None:
                if progress is not None:
                    progress(ReverifyProgress(index=_i, total=len(cards), card_id=_id, stage=stage, message=message))
            out.append(self.reverify_card(parsed, say))
        return out

    def reverify_card(self, parsed: ParsedCard, say: Callable[[str, str], None] = lambda s, m: None
                      ) -> tuple[CardReverification, list[ResultRecord]]:
        card = parsed.card
        stages: list[StageResult] = []

        say("gates", "static gfx950 gates")
        gate_stage, reports = run_gate_stage(card, self.project_root, self.gate_runner)
        stages.append(gate_stage)
        say("gates", f"{gate_stage.status}: {_short(gate_stage.reason, 100)}")

        say("prerequisites", f"{len(card.prerequisites)} prerequisite(s)")
        ctx = ProbeContext(project_root=self.project_root, card=card, prerequisite=None, gate_reports=reports)  # type: ignore[arg-type]
        checks = [check_prerequisite(p, ctx, self.probes) for p in card.prerequisites]
        missing = [c for c in checks if c.met is not True]
        stages.insert(0, StageResult(
            name="prerequisites", status="MISSING" if missing else "PASS",
            reason=("; ".join(f"{c.name}: {c.detail}" for c in missing) if missing
                    else f"all {len(checks)} prerequisite(s) met" if checks else "the card declares no prerequisites")))
        say("prerequisites", stages[0].status)

        say("verifier", "verifier")
        verifier_stage, shapes, records = self._verifier_stage(parsed, lambda m: say("verifier", m))
        stages.append(verifier_stage)
        say("verifier", f"{verifier_stage.status}: {_short(verifier_stage.reason, 100)}")

        claims_stage = self._claims_stage(parsed, verifier_stage, shapes)
        stages.append(claims_stage)

        status, reason = decide(stages)
        result = CardReverification(card_id=card.id, platform=self.platform.key, status=status, reason=reason,
                                    prerequisites=checks, stages=stages, shapes=shapes)
        say("done", status)
        return result, records

    # -- verifier ----------------------------------------------------------------------
    def _verifier_stage(self, parsed: ParsedCard, say: Callable[[str], None]
                        ) -> tuple[StageResult, list[ShapeOutcome], list[ResultRecord]]:
        card = parsed.card
        vb = card.verifier
        if vb is None:
            return StageResult(name="verifier", status="NOT_APPLICABLE", reason="the card has no verifier binding"), [], []
        rt = self.platform.runtime
        shapes = list((self.shapes_override or {}).get(card.id, vb.shapes))
        if rt == "cpu" and not self.verifier_on_cpu:
            return StageResult(name="verifier", status="NOT_APPLICABLE",
                               reason=f"no GPU on this box (runtime cpu): the card's verifier shapes "
                                      f"({', '.join(shapes) or 'none'}) run on a cuda or rocm GPU"), [], []
        baseline, candidate = vb.baseline.get(rt), vb.reference.get(rt)
        if not baseline or not candidate:
            return StageResult(name="verifier", status="NOT_APPLICABLE",
                               reason=f"the verifier binding names no baseline/reference arm for runtime {rt}"), [], []
        if not shapes:
            return StageResult(name="verifier", status="NOT_APPLICABLE", reason="the verifier binding lists no shapes"), [], []
        if self.verifier_runner is None:
            return StageResult(name="verifier", status="SKIPPED", reason="verifier not requested in this run"), [], []
        try:
            extra = {"options": self.verifier_options} if self.verifier_options is not None else {}
            report = self.verifier_runner(vb.problem, candidate, baseline, shapes, say, **extra)
        except ImportError as exc:
            return StageResult(name="verifier", status="SKIPPED",
                               reason=f"the verifier is not available in this build: {exc}"), [], []
        except Exception as exc:
            return StageResult(name="verifier", status="FAIL",
                               reason=f"the verifier could not run {vb.problem} ({candidate} vs {baseline}): "
                                      f"{type(exc).__name__}: {exc}"), [], []
        try:
            rows = shape_results_from_report(report)
        except (ValueError, KeyError, TypeError) as exc:
            return StageResult(name="verifier", status="FAIL", reason=f"unreadable verifier report: {exc}"), [], []
        outcomes, records, problems, not_stored = [], [], [], []
        by_shape: dict[str, dict[str, Any]] = {}
        for row in rows:
            if row["hidden"]:  # parity-only shapes: a failure there fails the card, nothing to time
                if row["verdict"] in ("FAIL", "ERROR"):
                    problems.append(f"hidden shape {row['shape']}: {row['verdict']} ({'; '.join(row['problems']) or 'parity'})")
                continue
            try:
                by_shape[shape_text(parse_shape_text(row["shape"]))] = row
            except (ValueError, TypeError):
                by_shape[str(row["shape"])] = row
        for s in shapes:
            key = shape_text(parse_shape_text(s))
            row = by_shape.get(key)
            if row is None:
                problems.append(f"no result for shape {s}")
                outcomes.append(ShapeOutcome(shape=key, reason="the verifier returned no result for this shape"))
                continue
            verdict = row["verdict"]
            outcomes.append(ShapeOutcome(shape=key, verdict=verdict, speedup=row["speedup"], interval=row["interval"]))
            if verdict in ("FAIL", "ERROR"):
                problems.append(f"{s}: {verdict} ({'; '.join(row['problems']) or 'parity'})")
            rec = record_from_row({**row, "shape": key}, card.id, baseline, candidate, self.recorded_by,
                                  self.platform, "reverify", self.git_rev)
            if isinstance(rec, str):
                not_stored.append(f"{s}: {rec}")
                continue
            try:
                records.append(ResultRecord.model_validate(rec))
            except ValidationError as exc:  # the row itself stays in the re-verification detail
                not_stored.append(f"{s}: " + "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors()))
        detail = [o.model_dump(mode="json") for o in outcomes]
        tail = f"; result rows not stored in the ledger ({'; '.join(not_stored)})" if not_stored else ""
        if problems:
            return StageResult(name="verifier", status="FAIL", reason="; ".join(problems) + tail,
                               detail=detail), outcomes, records
        return StageResult(name="verifier", status="PASS", detail=detail,
                           reason=f"parity held on {len(outcomes)} shape(s): {candidate} vs {baseline}{tail}"
                           ), outcomes, records

    # -- claims ------------------------------------------------------------------------
    def _claims_stage(self, parsed: ParsedCard, verifier: StageResult, shapes: list[ShapeOutcome]) -> StageResult:
        card = parsed.card
        if verifier.status != "PASS":
            return StageResult(name="claims", status="NOT_APPLICABLE",
                               reason=f"not compared: the verifier stage is {verifier.status}")
        gens = card.match.gens
        gen = self.platform.generation
        claimed = "*" in gens or (gen is not None and any(_same_gen(gen, g) for g in gens))
        floor = card.expects.isolated_speedup_min
        if not claimed:
            for o in shapes:
                o.reason = "recorded, not compared: the card claims performance on " + ", ".join(gens)
            return StageResult(name="claims", status="NOT_APPLICABLE",
                               reason=f"the card's performance claims are for {', '.join(gens)}; measured on "
                                      f"{self.platform.key}: recorded, not compared")
        recorded = recorded_speedups(parsed)
        tol = max(DRIFT_TOLERANCE, card.expects.noise_floor or 0.0)
        drifted, untimed = [], []
        for o in shapes:
            o.floor = floor
            if o.verdict == "INCONCLUSIVE":
                o.reason = "not compared: nothing was timed"
                untimed.append(o.shape)
                continue
            o.recorded_speedup = recorded.get(o.shape)
            reasons = []
            if o.verdict != "FASTER":
                reasons.append(f"verdict {o.verdict}, the card claims a speedup")
            if o.speedup is None or o.speedup < floor:
                reasons.append(f"speedup {o.speedup} below the card's floor {floor}")
            if o.recorded_speedup and o.speedup:
                best = o.interval[1] if o.interval else o.speedup
                if best < o.recorded_speedup * (1 - tol):
                    reasons.append(f"{best:.3f}x is more than {tol:.0%} below the card's {o.recorded_speedup}x")
            o.holds = not reasons
            o.reason = "; ".join(reasons) or f"{o.speedup}x >= floor {floor}"
            if reasons:
                drifted.append(f"{o.shape}: {o.reason}")
        if drifted:
            return StageResult(name="claims", status="DRIFTED", reason="; ".join(drifted))
        if untimed:
            return StageResult(name="claims", status="NOT_APPLICABLE",
                               reason=f"timing inconclusive (nothing timed) on {', '.join(untimed)}: the speedup "
                                      "claims could not be compared")
        return StageResult(name="claims", status="CONFIRMED",
                           reason=f"{len(shapes)} shape(s) FASTER at >= {floor}x on {self.platform.key}")


def _same_gen(a: str, b: str) -> bool:
    try:
        return vocabulary().generation(a) == vocabulary().generation(b)
    except VocabularyError:
        return a == b


def decide(stages: list[StageResult]) -> tuple[ReverifyStatus, str]:
    """The card's status from its stages (precedence as documented in ``claims.py``)."""
    by = {s.name: s for s in stages}
    failed = [s for s in stages if s.status == "FAIL"]
    if failed:
        return "FAILED", "; ".join(f"{s.name}: {s.reason}" for s in failed)
    claims = by.get("claims")
    if claims and claims.status == "DRIFTED":
        return "DRIFTED", claims.reason
    pre = by.get("prerequisites")
    if pre and pre.status == "MISSING":
        return "PREREQUISITE_MISSING", pre.reason
    if claims and claims.status == "CONFIRMED":
        gates = by.get("gates")
        note = f"; static gates not run: {gates.reason}" if gates and gates.status == "SKIPPED" else ""
        return "CONFIRMED", claims.reason + note
    untested = [s for s in stages if s.status in ("NOT_APPLICABLE", "SKIPPED") and s.name in ("verifier", "claims")]
    reason = "; ".join(f"{s.name}: {s.reason}" for s in untested) or "the claims could not be tested here"
    return "NOT_APPLICABLE_HERE", reason


def default_recorded_by() -> str:
    name = os.environ.get("SKILL_SERVER_USER")
    if not name:
        try:
            import getpass

            name = getpass.getuser()
        except (OSError, KeyError):
            name = "unknown"
    return f"{name} (reverify)"


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


__all__ = ["PROBES", "CardReverification", "Reverifier", "ReverifyProgress", "ReverifyReport", "decide",
           "detect_platform", "worst"]

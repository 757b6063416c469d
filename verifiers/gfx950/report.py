"""Render TargetGates for people (text) and tools (JSON), and the ``check-kernel`` command.

``check_kernel_command`` is what ``skill-server check-kernel CARD [--target NAME] [--json]``
calls; it returns the process exit code:

* 0: every report is what the folder promises (targets PASS, negative targets caught);
* 1: some target FAILed (or a negative target slipped through its gates);
* 2: bad input (unknown card folder / target name), with the message on stderr;
* 3: SKIPPED (flydsl or ld.lld missing): never reported as a pass.
"""
from __future__ import annotations

import json
import sys
from typing import TextIO

from verifiers.gfx950.check import check_kernel
from verifiers.gfx950.gates import TargetGates
from verifiers.gfx950.targets import NoTargetsError

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_SKIPPED = 0, 1, 2, 3


def render_text(reports: list[TargetGates], *, verbose: bool = False) -> str:
    """One block per target: verdict, resources, occupancy, then each gate."""
    lines: list[str] = []
    for r in reports:
        verdict = r.status
        if r.negative:
            verdict += f" (negative target: {'caught' if r.holds else 'NOT caught'}; expected to fail {r.expect_fail})"
        cached = "cache hit" if r.cache_hit else "compiled"
        secs = f"{r.compile_seconds:.1f} s" if r.compile_seconds is not None else "-"
        lines.append(f"{r.folder} :: {r.target}  {verdict}  [{cached}, compile {secs}]")
        if r.description:
            lines.append(f"  {r.description}")
        if r.reason:
            lines.append(f"  reason: {r.reason}")
        for res in r.resources:
            lines.append(
                f"  {res['kernel']}: vgpr {res['vgpr']}, agpr {res['agpr']}, accum_offset {res['accum_offset']}, "
                f"sgpr {res['sgpr']}, scratch {res['scratch_bytes']} B, LDS {res['lds_bytes']} B, "
                f"spills v{res['vgpr_spill']}/s{res['sgpr_spill']}"
            )
        for occ in r.occupancy:
            lds = "-" if occ.by_lds is None else f"{occ.by_lds:g}"
            lines.append(
                f"  occupancy {occ.waves_per_simd:g} waves/SIMD (registers {occ.by_registers}, LDS {lds})"
            )
        if r.mfma:
            lines.append("  mfma: " + ", ".join(f"{k} x{v}" for k, v in r.mfma.items()))
        for g in r.gates:
            lines.append(f"  [{g.status:7}] {g.name}: {g.detail}")
            if verbose or g.status == "FAIL":
                lines.extend(f"            {e}" for e in g.evidence[:8])
        lines.append("")
    return "\n".join(lines)


def render_json(reports: list[TargetGates]) -> str:
    return json.dumps([r.model_dump(mode="json") for r in reports], indent=1)


def exit_code(reports: list[TargetGates]) -> int:
    if any(r.status == "SKIPPED" for r in reports):
        return EXIT_SKIPPED
    return EXIT_OK if all(r.ok for r in reports) else EXIT_FAIL


def check_kernel_command(
    card: str,
    target: str | None = None,
    *,
    as_json: bool = False,
    include_negative: bool = False,
    use_cache: bool = True,
    verbose: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Gate the FlyDSL kernels of ``kernels/<card>/`` (the folder is named after the card
    id) and print the reports; returns the exit code (see the module docstring)."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        reports = check_kernel(card, target, use_cache, include_negative=include_negative)
    except NoTargetsError as exc:
        print(f"check-kernel: {exc}", file=err)
        return EXIT_USAGE
    except KeyError as exc:
        print(f"check-kernel: {exc.args[0] if exc.args else exc}", file=err)
        return EXIT_USAGE
    except ModuleNotFoundError as exc:
        print(f"check-kernel: no kernel folder for card {card!r} ({exc})", file=err)
        return EXIT_USAGE
    print(render_json(reports) if as_json else render_text(reports, verbose=verbose), file=out)
    return exit_code(reports)

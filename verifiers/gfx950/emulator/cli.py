"""``skill-server check-kernel CARD --emulate``: run the card's emulated FlyDSL arms.

Every arm in ``EMULATED_ARMS`` of ``kernels/<folder>/gfx950_targets.py`` runs on the gfx950
emulator at its small shape and is checked against the problem's oracle and parity
rules: positive arms must pass with no hazard, the deliberately wrong ones must fail.
Exit codes follow check-kernel: 0 all as expected, 1 an arm not as expected (or a hazard),
2 unknown card / no emulated arms, 3 skipped (toolchain missing). Evidence is emulated
parity only: never an MI355X result.
"""
from __future__ import annotations

import io
import json
import sys
import time
from typing import TextIO

from verifiers.gfx950 import env
from verifiers.gfx950.emulator.errors import EmulatorError
from verifiers.gfx950.emulator.flydsl_arm import run_emulated_parity
from verifiers.gfx950.report import check_kernel_command
from verifiers.gfx950.targets import NoTargetsError, load_targets

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_SKIPPED = 0, 1, 2, 3


def emulate_command(folder: str, *, as_json: bool = False, arm: str | None = None, full: bool = False,
                    dims: dict[str, int] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``full``: the ``FULL_EMULATED_ARMS`` (the problem's real shapes) instead of the small
    ones; ``dims``: run each arm at these dims instead (a cheaper run of the same kernels)."""

    out, err = out or sys.stdout, err or sys.stderr
    try:
        targets = load_targets(folder)
    except (NoTargetsError, ModuleNotFoundError) as exc:
        print(f"check-kernel --emulate: {exc}", file=err)
        return EXIT_USAGE
    arms = [a.name for a in (targets.full if full else targets.emulated)]
    if full and not arms:
        print(f"check-kernel --emulate --full: kernels/{folder}/gfx950_targets.py declares no FULL_EMULATED_ARMS "
              "(arms at the problem's real shapes)", file=err)
        return EXIT_USAGE
    if arm is not None:
        if arm not in arms:
            print(f"check-kernel --emulate: no emulated arm {arm!r} in kernels/{folder}; available: {arms}", file=err)
            return EXIT_USAGE
        arms = [arm]
    if not arms:
        print(f"check-kernel --emulate: kernels/{folder}/gfx950_targets.py declares no EMULATED_ARMS", file=err)
        return EXIT_USAGE
    problem = env.toolchain_problem()
    if problem:
        print(f"check-kernel --emulate: SKIPPED: {problem}", file=err)
        return EXIT_SKIPPED
    results, errors = [], {}
    t0 = time.perf_counter()
    for name in arms:
        try:
            results.append(run_emulated_parity(folder, name) if dims is None else
                           run_emulated_parity(folder, name, dims=dims))
        except EmulatorError as exc:
            errors[name] = str(exc)
    seconds = time.perf_counter() - t0
    bad = [r for r in results if not r.as_expected or r.hazards]
    if as_json:
        print(json.dumps({"folder": folder, "platform": "gfx950-emulated", "full": full, "seconds": round(seconds, 1),
                          "arms": [r.model_dump(mode="json") for r in results], "errors": errors}, indent=1), file=out)
    else:
        what = "at the problem's real shapes " if full else ""
        print(f"emulated parity {what}(platform gfx950-emulated, CPU; not an MI355X result) for kernels/{folder}:",
              file=out)
        for r in results:
            verdict = "as expected" if r.as_expected and not r.hazards else "NOT AS EXPECTED"
            want = "pass" if r.expect_parity else "fail"
            cos, rel = _worst(r.metrics)
            base_cos, base_rel = _worst(r.baseline_metrics)
            hz = ", ".join(sorted({h.kind for h in r.hazards})) or "none"
            print(f"  {r.emulated_arm:<22} arm {r.problem_arm:<20} must {want}: parity "
                  f"{'held' if r.parity_holds else 'failed'}, cosine {cos:.6f}, rel-L2 {rel:.4g} (baseline "
                  f"{r.baseline}: {base_cos:.6f}, {base_rel:.4g}), hazards {hz}, "
                  f"{sum(x.instructions for x in r.launches)} instructions in {r.emulate_seconds:.1f} s  -> {verdict}",
                  file=out)
            if full:  # minutes per arm: where they went, launch by launch
                for x in r.launches:
                    print(f"      {x.kernel}: {x.workgroups} workgroups, {x.instructions} wave-instructions, "
                          f"{x.seconds:.1f} s", file=out)
            for f in r.failures[:3] if r.expect_parity else []:
                print(f"      {f}", file=out)
        for name, msg in errors.items():
            print(f"  {name:<22} ERROR: {msg}", file=out)
        print(f"  {len(arms)} arm(s) at {', '.join(sorted({_shape(r.dims) for r in results})) or '-'} in {seconds:.1f} s "
              "(compile, emulation, oracle and baseline)", file=out)
    return EXIT_FAIL if bad or errors else EXIT_OK


def _worst(metrics: dict[str, dict]) -> tuple[float, float]:
    """The lowest cosine and the highest relative L2 error over an arm's outputs (NaN: none)."""
    if not metrics:
        return float("nan"), float("nan")
    return min(m["cosine"] for m in metrics.values()), max(m["rel_l2"] for m in metrics.values())


def _shape(dims: dict[str, int]) -> str:
    return "x".join(str(v) for v in dims.values())


def check_kernel_and_emulate(folder: str, target: str | None = None, *, as_json: bool = False, full: bool = False,
                             dims: dict[str, int] | None = None, out: TextIO | None = None, err: TextIO | None = None,
                             **gate_kwargs) -> int:
    """The static gates (``check_kernel_command``), then every emulated arm; one JSON
    document ``{"gates": ..., "emulation": ...}`` with ``as_json``. Exit code: the worse."""

    out, err = out or sys.stdout, err or sys.stderr
    if not as_json:
        rc = check_kernel_command(folder, target, as_json=False, out=out, err=err, **gate_kwargs)
        if rc not in (EXIT_OK, EXIT_FAIL):
            return rc
        print(file=out)
        return max(rc, emulate_command(folder, as_json=False, full=full, dims=dims, out=out, err=err))
    gates, emulation = io.StringIO(), io.StringIO()
    rc = check_kernel_command(folder, target, as_json=True, out=gates, err=err, **gate_kwargs)
    if rc not in (EXIT_OK, EXIT_FAIL):
        return rc
    erc = emulate_command(folder, as_json=True, full=full, dims=dims, out=emulation, err=err)
    doc = {"gates": json.loads(gates.getvalue())}
    text = emulation.getvalue().strip()
    doc["emulation"] = json.loads(text) if text else None
    print(json.dumps(doc, indent=1), file=out)
    return max(rc, erc)

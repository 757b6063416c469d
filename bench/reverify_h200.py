"""Re-verify every card on the GPU box and record the statuses in a fresh ledger.

    python bench/reverify_h200.py [--out bench/results] [--card ID] [--no-gates] [--ledger PATH]
    python bench/reverify_h200.py --smoke          # CPU, TRITON_INTERPRET=1, smoke shapes

This is ``skill-server reverify`` run end to end against the real verifier
(``verifiers.api.verify``) with the cards' own verifier bindings: per card the
prerequisites (package versions, capability probes), the static gfx950 gates where FlyDSL
and ld.lld are present, the verifier on this GPU for the card's ``verifier.shapes`` with the
platform's baseline and reference arms, and the comparison with the card's claims. On the
H200 (sm_90) the cards' performance claims (gfx950) are recorded but not judged, so a card
ends NOT_APPLICABLE_HERE at best there; FAILED means parity, a gate or the card's own
binding failed.

``--smoke`` runs the same path on CPU: the Triton interpreter, each problem's smallest smoke
shape, the CPU arms, quick verifier options, no gates and no runtime-signature stage (the CPU
profiler cannot see interpreted Triton kernels). It checks the plumbing (binding -> verifier ->
report -> ledger), not the kernels' speed.

Writes ``reverify.json`` (the report), ``reverify.md`` (tables) and the ledger
(``reverify_ledger.sqlite`` unless --ledger) under ``--out``; prints the status table last.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="CPU, TRITON_INTERPRET=1, smoke shapes, quick options")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="output directory")
    ap.add_argument("--card", default=None, help="one card (default: all)")
    ap.add_argument("--no-gates", action="store_true", help="skip the static gfx950 gates")
    ap.add_argument("--ledger", default=None, help="ledger file (default: OUT/reverify_ledger.sqlite, fresh)")
    return ap.parse_args(argv)


def smoke_shapes(card_ids: list[str]) -> dict[str, list[str]]:
    from verifiers.problem import load_problem

    from skill_server.service.facade import SkillService

    svc = SkillService(REPO / "skills")
    out: dict[str, list[str]] = {}
    for cid in card_ids:
        vb = svc.card(cid).card.verifier
        if vb is None:
            continue
        problem = load_problem(vb.problem)
        if problem.smoke_shapes:
            import math

            small = min(problem.smoke_shapes, key=lambda d: math.prod(d[n] for n in problem.dim_names))
            out[cid] = [",".join(f"{n}={small[n]}" for n in problem.dim_names)]
    return out


def markdown(report) -> str:  # noqa: ANN001 - ReverifyRun
    lines = [f"# Re-verification on {report.platform.key} ({report.platform.device})", "",
             f"git {report.git_rev or 'unknown'}; {report.started_at:%Y-%m-%d %H:%M} -> {report.finished_at:%H:%M} UTC; "
             f"libraries: {', '.join(f'{k} {v}' for k, v in sorted(report.platform.libraries.items()))}", "",
             "| card | status | reason |", "|---|---|---|"]
    lines += [f"| {c.card_id} | {c.status} | {c.reason.replace('|', '/')[:400]} |" for c in report.cards]
    for c in report.cards:
        lines += ["", f"## {c.card_id}: {c.status}", "", "| stage | status | reason |", "|---|---|---|"]
        lines += [f"| {s.name} | {s.status} | {s.reason.replace('|', '/')[:400]} |" for s in c.stages]
        if c.shapes:
            lines += ["", "| shape | verdict | speedup | interval | floor | card's figure | holds |", "|---|---|---|---|---|---|---|"]
            for o in c.shapes:
                iv = f"{o.interval[0]:.4g}-{o.interval[1]:.4g}" if o.interval else "-"
                lines.append(f"| {o.shape} | {o.verdict} | {o.speedup if o.speedup is not None else '-'} | {iv} | "
                             f"{o.floor or '-'} | {o.recorded_speedup or '-'} | {o.holds} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton (the verifier's workers inherit it)
    sys.path.insert(0, str(REPO))
    from skill_server.service.facade import SkillService

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ledger = Path(args.ledger) if args.ledger else out / "reverify_ledger.sqlite"
    if not args.ledger:
        for suffix in ("", "-wal", "-shm"):
            Path(str(ledger) + suffix).unlink(missing_ok=True)
    svc = SkillService(REPO / "skills", ledger_path=ledger)
    cards = [args.card] if args.card else sorted(svc.catalog.cards)
    smoke: dict = {}
    if args.smoke:
        from verifiers.options import VerifyOptions

        from skill_server.ledger.results import PlatformInfo
        from verifiers.provenance import detect_platform

        plat = detect_platform()
        smoke = dict(platform=PlatformInfo(**{**plat.model_dump(), "runtime": "cpu"}), verifier_on_cpu=True,
                     shapes_override=smoke_shapes(cards),
                     verifier_options=VerifyOptions(rounds=5, block_ms=1.0, warmup_ms=25.0, bootstrap_samples=200,
                                                    hidden_shapes=False, secret_seed=False, seeds=[0],
                                                    time_limit_s=120.0, device="cpu",
                                                    # the CPU profiler cannot see interpreted Triton kernels
                                                    profile=False))

    def progress(ev) -> None:  # noqa: ANN001
        print(f"[{ev.index}/{ev.total}] {ev.card_id}: {ev.stage}: {ev.message}", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    report = svc.reverify(card_id=args.card, progress=progress, gates=not (args.no_gates or args.smoke),
                          recorded_by="bench/reverify_h200.py" + (" --smoke" if args.smoke else ""), **smoke)
    (out / "reverify.json").write_text(report.model_dump_json(indent=2))
    (out / "reverify.md").write_text(markdown(report))
    print(f"\nwrote {out / 'reverify.json'}, {out / 'reverify.md'}; ledger {ledger}; {time.perf_counter() - t0:.0f}s")
    print(report.table())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How long a newcomer's CPU verification takes, and where the time goes.

For every card: ``skill-server verify CARD --candidate arm:<the card's CPU reference arm>
--shape <the problem's smallest smoke shape> --rounds 5 --no-record`` (the card's binding
picks the baseline), timed from outside; each progress line the CLI prints is time-stamped,
so the run splits into phases:

  start      interpreter, imports, the judge template, the judge loading torch and the problem
  probe      the candidate's import probe
  refs       the baseline's parity references (no candidate process)
  solo       the baseline alone: warm-up, timer floor, A/A control rounds
  parity     the candidate's process start and its parity cases (hidden shapes interleaved)
  timing     the A/B rounds (with the candidate's warm-up)
  profile    profiling both arms (signature, segment)
  end        the report, integrity re-hash, exit

Usage: ``python bench/cpu_smoke_verify.py [--out bench/results/cpu_smoke_verify.md] [--card ID]``.
Honest figures only: the machine's load average is written beside them.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from skill_server.service.facade import SkillService  # noqa: E402
from verifiers.problem import load_problem  # noqa: E402

PHASES = (("probe", "probing the candidate"), ("refs", "baseline references"), ("solo", "baseline alone"),
          ("parity", "starting the candidate"), ("timing", "A/B rounds"), ("profile", "profiling both arms"),
          ("end", "done:"))


def smoke_case(card_id: str) -> tuple[str, str]:
    """(candidate, shape): the card's CPU reference arm at its problem's smallest smoke shape."""
    vb = SkillService(check_interval=3600.0).card(card_id).card.verifier
    problem = load_problem(vb.problem)
    small = min(problem.smoke_shapes, key=lambda d: math.prod(d[n] for n in problem.dim_names))
    return f"arm:{vb.reference['cpu']}", ",".join(f"{n}={small[n]}" for n in problem.dim_names)


def run_card(card_id: str) -> dict:
    candidate, shape = smoke_case(card_id)
    with tempfile.TemporaryDirectory() as tmp:
        report_path = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "skill_server.cli.entry", "verify", card_id, "--candidate", candidate,
               "--shape", shape, "--rounds", "5", "--no-record", "--report", str(report_path)]
        env = dict(os.environ, PYTHONPATH=str(REPO))
        t0 = time.monotonic()
        marks: dict[str, float] = {}
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp)
        assert proc.stderr is not None
        for line in proc.stderr:
            now = time.monotonic() - t0
            for name, words in PHASES:
                if words in line and name not in marks:
                    marks[name] = now
        out = proc.stdout.read() if proc.stdout else ""
        code = proc.wait()
        total = time.monotonic() - t0
        verdict = stages = None
        if report_path.is_file():
            report = json.loads(report_path.read_text())["report"]
            verdict = report["verdict"]
            stages = {n: s["status"] if s["status"] in ("PASS", "SKIPPED") and n != "signature"
                      else f"{s['status']}: {s['reason'][:240]}" for n, s in report["stages"].items()}
    marks["exit"] = total
    order = ["start"] + [n for n, _ in PHASES]
    starts = {"start": 0.0, **marks}
    phases = {}
    for i, name in enumerate(order):
        if name not in starts:
            continue
        later = [starts[n] for n in order[i + 1:] + ["exit"] if n in starts]
        phases[name] = round((later[0] if later else total) - starts[name], 1)
    return {"card": card_id, "candidate": candidate, "shape": shape, "command": " ".join(cmd[1:]).replace(str(report_path), "R.json"),
            "exit_code": code, "seconds": round(total, 1), "verdict": verdict, "stages": stages, "phases": phases,
            "tail": out.strip().splitlines()[:1]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "cpu_smoke_verify.md"))
    ap.add_argument("--card", action="append", help="one card (repeatable; default: every card with a binding)")
    args = ap.parse_args()
    cards = args.card or sorted(c for c, p in SkillService(check_interval=3600.0).catalog.cards.items()
                                if p.card.verifier is not None)
    load_before = os.getloadavg()
    rows = [run_card(c) for c in cards]
    load_after = os.getloadavg()
    lines = [
        "# CPU smoke verification: time per card and where it goes",
        "",
        f"- date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        f"- machine: {platform.node()}, {os.cpu_count()} CPU cores, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}",
        f"- load average (1/5/15 min) before: {load_before[0]:.1f}/{load_before[1]:.1f}/{load_before[2]:.1f}, "
        f"after: {load_after[0]:.1f}/{load_after[1]:.1f}/{load_after[2]:.1f} (the box is shared: other work ran)",
        "- command per card: `python -m skill_server.cli.entry verify CARD --candidate arm:<reference arm for cpu> "
        "--shape <smallest smoke shape> --rounds 5 --no-record` (the card's binding picks the baseline)",
        "- produced by: `python bench/cpu_smoke_verify.py`",
        "",
        "| card | candidate | shape | seconds | verdict | " + " | ".join(["start"] + [n for n, _ in PHASES]) + " |",
        "|---|---|---|---|---|" + "---|" * (1 + len(PHASES)),
    ]
    for r in rows:
        cells = [str(r["phases"].get(n, "-")) for n in ["start"] + [n for n, _ in PHASES]]
        lines.append(f"| {r['card']} | {r['candidate']} | {r['shape']} | {r['seconds']} | {r['verdict']} "
                     f"(exit {r['exit_code']}) | " + " | ".join(cells) + " |")
    lines += ["", "Stages per card:", ""]
    lines += [f"- {r['card']}: {r['stages']}" for r in rows]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    (Path(args.out).with_suffix(".json")).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

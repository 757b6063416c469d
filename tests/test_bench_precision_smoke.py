"""The precision bench (issue 23) runs on CPU: ``bench/verifier_precision.py --smoke``.

Each part is cut at a 10 s budget (the first A/A and the first attack always run) and the CLI record is
left out, so CI checks the path -- floor loop, an A/A verdict at default options, an attack
candidate, the tables with the goals beside the figures -- in about a minute on a quiet
two-core box; the full smoke (both parts to the end: power candidates, the twin, the CLI's
verified record) is ``python bench/verifier_precision.py --smoke``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_precision_bench_runs_on_cpu(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    got = subprocess.run([sys.executable, str(ROOT / "bench" / "verifier_precision.py"), "--smoke", "--budget-s", "10", "--no-cli",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=400, env=env, cwd=ROOT)
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-3000:]
    summary = (tmp_path / "summary.md").read_text()
    assert "floor: one-process events loop" in summary and "A/A half-width median / max" in summary, summary
    part1 = json.loads((tmp_path / "part1.json").read_text())
    part2 = json.loads((tmp_path / "part2.json").read_text())
    assert any(r.get("mode") == "one" and "half_width" in r for r in part1["floor"]), part1["floor"]
    aa = [r for r in part1["rows"] if r["group"] == "aa"]
    assert aa and aa[0]["verdict"] in ("NO_DIFFERENCE", "INCONCLUSIVE"), aa
    attack = [r for r in part2["rows"] if r["group"] == "attack"]
    assert attack and attack[0]["verdict"] != "FASTER", attack

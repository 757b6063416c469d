"""Helpers for the verifier's tests.

``LocalJudge`` runs the judge's parity stage in the test process against real arm
processes forked by a real zygote (the same code ``verifiers.judge.process`` runs, without the
judge's process start-up per case), so the many parity cheats cost a fork each.
``verify_fixture`` runs the whole pipeline (runner, judge process, arms) on the CPU
fixture problem with options sized for a loaded two-core box.
"""
from __future__ import annotations

import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from process_owner import started_by_this_session

from verifiers.judge import parity
from verifiers.arms.handle import ArmHandle, Zygote
from verifiers.hw.device import Flusher, open_device
from verifiers.options import VerifyOptions
from verifiers.problem import Problem, load_problem
from verifiers.judge.session import Arm, Session

if TYPE_CHECKING:
    from verifiers.report import VerificationReport

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parent.parent
PROBLEM_FILE = str(FIXTURES / "cpu_matmul_problem.py")
HIDDEN_FILE = str(FIXTURES / "cpu_matmul_hidden.py")


def candidate(name: str, function: str = "build") -> str:
    return f"{FIXTURES / 'candidates' / name}.py:{function}"


def fast_options(**kw: Any) -> VerifyOptions:
    """Timing options that finish in seconds on CPU; verdict assertions stay robust."""
    base = dict(rounds=5, block_ms=8.0, flush_bytes=1 << 20, floor_calls=10, bootstrap_samples=400,
                seeds=[0, 1], time_limit_s=240)
    base.update(kw)
    return VerifyOptions(**base)


def verify_decided(*args: Any, **kw: Any) -> "VerificationReport":
    """``verify`` once more when the first run's timing gave no verdict because the box could
    not time (on a loaded two-core CI box an A/A can disagree with itself): that answer is
    the verifier being honest about the box, not the behaviour under test. A second
    undecided run is returned as it is, so a verifier that never decides still fails."""
    from verifiers.api import verify

    report = verify(*args, **kw)
    undecided = [s.timing.inconclusive for s in report.shape_reports
                 if not s.hidden and s.timing is not None and s.timing.inconclusive]
    if report.verdict != "INCONCLUSIVE" or not undecided:
        return report
    print(f"verify_decided: the box could not time ({undecided[0][:200]}); running once more")
    return verify(*args, **kw)


PARITY_ONLY = dict(timing=False, profile=False, seeds=[0], secret_seed=False, hidden_shapes=False, time_limit_s=120)


class LocalJudge:
    def __init__(self, problem_file: str = PROBLEM_FILE) -> None:
        self.problem_file = problem_file
        self.problem = load_problem(problem_file)
        self.device = open_device("cpu")
        self.tmp = Path(tempfile.mkdtemp(prefix="verifier-test-"))
        self.zygote = Zygote(self.tmp / "zygote", profile=False, triton=False, sys_path=[p for p in sys.path if p])
        self.zygote.wait_ready(120)
        self.arms: list[Arm] = []
        self.base = self.arm({"kind": "arm", "target": "torch_mm", "function": None}, trusted=True)

    def arm(self, builder: dict[str, Any], trusted: bool) -> Arm:
        prefix = Path(tempfile.mkdtemp(dir=self.tmp))
        handle = ArmHandle(builder.get("function") or builder["target"], "baseline" if trusted else "candidate",
                           self.zygote, prefix, write_bytecode=False)
        handle.request({"op": "hello", "role": "candidate", "sys_path": [p for p in sys.path if p],
                        "problem": self.problem_file, "builder": builder, "device": "cpu", "profile": False,
                        "cpu_threads": 1}, 120)
        arm = Arm(handle, handle.label, trusted)
        self.arms.append(arm)
        return arm

    def parity(self, name: str, problem: Problem | None = None, seeds: tuple[int, ...] = (0, 1),
               secret: int | None = None, rules: parity.ParityRules | None = None,
               dims: dict[str, int] | None = None) -> parity.ParityResult:
        problem = problem or self.problem
        rules = rules or parity.rules_from(problem.parity)
        dims = dims or {"M": 64, "N": 48, "K": 32}
        label = "x".join(str(dims[n]) for n in problem.dim_names)
        file, _, function = candidate(name).rpartition(":")
        cand = self.arm({"kind": "file", "target": file, "function": function}, trusted=False)
        session = Session(problem, dims, self.device, Flusher(self.device, 1 << 16), VerifyOptions(),
                          random.Random(1), time.monotonic() + 120)
        plans = parity.plan_for(problem, [label], list(seeds), secret, random.Random(2))
        refs = {p.key: parity.baseline_ref(session, self.base, p, rules) for p in plans}
        cases = [parity.candidate_case(session, cand, p, refs[p.key], rules, 0.02) for p in plans]
        cand.handle.close()
        return parity.summarize(cases, rules)

    def close(self) -> None:
        for arm in self.arms:
            arm.handle.close()
        self.zygote.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def failures(result: parity.ParityResult) -> str:
    return " | ".join(f for c in result.cases for f in c.failures)


def verifier_processes() -> list[str]:
    """Command lines of live processes started by this checkout's verifier (judge, zygote, its
    forks: they keep the judge's command line, which names the checkout) for this test session
    (tests/process_owner.py), so verifications of another checkout, or another pytest worker,
    running on the same box are not counted."""
    from verifiers.launch.judge_launch import template_pids
    from verifiers.launch.runner import REPO_ROOT

    out = []
    templates = {str(p) for p in template_pids()}  # warm, holding no job: the judges they fork count
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or entry.name in templates:
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if (("verifiers.judge.process" in cmd or "verifiers.arms.zygote" in cmd) and str(REPO_ROOT) in cmd.split()
                and started_by_this_session(int(entry.name))):
            out.append(f"{entry.name}: {cmd[:160]}")
    return out

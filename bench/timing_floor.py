"""The box's own timing floor: the same kernel timed without any verifier around it.

One process (or two, for the process ablation), the problem's own inputs and arm, a cache
flush before every call outside the timed window, ``rounds`` rounds in which two "arms" --
the same kernel on two buffer sets (or on one, ``same_buffers``) -- each run a block of
``calls`` calls in random order; per call a device event pair (GPU) or the process's CPU
time (CPU); per round the ratio of the two blocks' medians; a 95 % percentile bootstrap
(2000) of the median ratio. Its half-width is what the verifier's A/A is compared with.

    python bench/timing_floor.py --problem bench/problems/blockscale_cublas_aa.py --arm cublas_blockscale \
        --shape 4096x2048x7168 --runs 8 [--mode one|same|two] [--device cuda]

``two``: each "arm" is its own process with its own device context and buffers (no judge,
no verifier): a wide or biased result here is per-process bias of the box itself.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


def _dims(problem: Any, shape: str) -> dict[str, int]:
    return dict(zip(problem.dim_names, (int(x) for x in shape.split("x"))))


class Kernel:
    """One buffer set of the problem and its arm's launch, timed per call."""

    def __init__(self, problem: Any, arm: str, dims: dict[str, int], device: str, seed: int, flush_bytes: int) -> None:
        import torch

        self.gpu = device.startswith("cuda")
        if not self.gpu:
            torch.set_num_threads(1)  # as the verifier's CPU arms (VerifyOptions.cpu_threads)
        self.inputs = problem.make_inputs(dict(dims), seed, device)
        self.outputs = problem.make_outputs(dict(dims), device)
        self.launch = problem.resolve_builder(problem.arm(arm).build)(self.inputs, self.outputs)
        self.flush = torch.empty(max(1, flush_bytes // 4), dtype=torch.int32, device=device)
        self.n = 0
        if self.gpu:
            torch.cuda.synchronize()

    def block(self, calls: int) -> list[float]:
        import torch

        out = []
        if self.gpu:
            pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
            for s, e in pairs:
                self.n += 1
                self.flush.fill_(self.n & 0x7FFF)
                s.record()
                self.launch()
                e.record()
            torch.cuda.synchronize()
            return [s.elapsed_time(e) for s, e in pairs]
        for _ in range(calls):
            self.n += 1
            self.flush.fill_(self.n & 0x7FFF)
            t0 = time.process_time_ns()
            self.launch()
            out.append((time.process_time_ns() - t0) / 1e6)
        return out


def bootstrap(ratios: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def summarize(ratios: list[float], seconds: float) -> dict[str, Any]:
    lo, hi = bootstrap(ratios)
    return {"speedup": statistics.median(ratios), "ci_low": lo, "ci_high": hi, "half_width": (hi - lo) / 2,
            "rounds": len(ratios), "seconds": seconds}


def one_process(problem: Any, arm: str, dims: dict[str, int], device: str, rounds: int, calls: int, flush_bytes: int,
                same_buffers: bool, warm_calls: int = 50) -> dict[str, Any]:
    t0 = time.perf_counter()
    a = Kernel(problem, arm, dims, device, 1, flush_bytes)
    b = a if same_buffers else Kernel(problem, arm, dims, device, 2, flush_bytes)
    a.block(warm_calls)
    b.block(warm_calls)
    ratios = []
    for _ in range(rounds):
        first_a = random.random() < 0.5
        meds = {}
        for name, k in (("a", a), ("b", b)) if first_a else (("b", b), ("a", a)):
            meds[name] = statistics.median(k.block(calls))
        ratios.append(meds["a"] / meds["b"])
    return summarize(ratios, time.perf_counter() - t0)


def two_processes(args: argparse.Namespace) -> dict[str, Any]:
    """Two worker processes of this file, each with its own context and buffers; the driver
    asks one, then the other (random order per round) for a block and takes its median."""
    t0 = time.perf_counter()
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--problem", args.problem, "--arm", args.arm,
           "--shape", args.shape, "--device", args.device, "--calls", str(args.calls), "--flush-bytes",
           str(args.flush_bytes)]
    procs = [subprocess.Popen(cmd + ["--seed", str(i + 1)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              cwd=str(HERE)) for i in range(2)]
    try:
        for p in procs:
            if p.stdout.readline().strip() != "ready":  # type: ignore[union-attr]
                raise RuntimeError("a floor worker did not start")

        def ask(p: subprocess.Popen, what: str) -> float:
            p.stdin.write(what + "\n")  # type: ignore[union-attr]
            p.stdin.flush()  # type: ignore[union-attr]
            return float(p.stdout.readline())  # type: ignore[union-attr]

        for p in procs:
            ask(p, "warm")
        ratios = []
        for _ in range(args.rounds):
            order = [0, 1] if random.random() < 0.5 else [1, 0]
            meds = {i: ask(procs[i], "block") for i in order}
            ratios.append(meds[0] / meds[1])
    finally:
        for p in procs:
            try:
                p.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass
            p.wait(timeout=30)
    return summarize(ratios, time.perf_counter() - t0)


def worker(args: argparse.Namespace) -> int:
    from verifiers.problem import load_problem

    problem = load_problem(args.problem)
    k = Kernel(problem, args.arm, _dims(problem, args.shape), args.device, args.seed, args.flush_bytes)
    print("ready", flush=True)
    for line in sys.stdin:
        calls = 50 if line.strip() == "warm" else args.calls
        print(statistics.median(k.block(calls)), flush=True)
    return 0


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    from verifiers.problem import load_problem

    problem = load_problem(args.problem)
    dims = _dims(problem, args.shape)
    out = []
    for i in range(args.runs):
        if args.mode == "two":
            row = two_processes(args)
        else:
            row = one_process(problem, args.arm, dims, args.device, args.rounds, args.calls, args.flush_bytes,
                              same_buffers=args.mode == "same")
        row.update(run=i, mode=args.mode)
        out.append(row)
    return out


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problem", required=True)
    ap.add_argument("--arm", required=True)
    ap.add_argument("--shape", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--mode", choices=("one", "same", "two"), default="one")
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--flush-bytes", type=int, default=256 << 20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--worker", action="store_true")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.worker:
        return worker(args)
    print(json.dumps(measure(args), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Run one arm's calls on their own, for an external kernel tracer (rocprofv3).

    rocprofv3 --kernel-trace --output-format csv -d OUT -- \\
        python -m verifiers.arms.rocprof_run --problem NAME|FILE.py --arm baseline|ARM|FILE.py:FUNC --shape MxNxK

Sequence on the device: input set-up and ``build`` (any kernels), ``--warmup`` calls, then
``--calls`` iterations of [``verifier_cache_flush`` marker kernel (a Triton kernel that also
flushes the caches), ``launch()``, synchronise]. ``verifiers.judge.kernel_trace.from_rocprofv3_csv``
starts an iteration at each marker and leaves everything before the first one out, so
set-up, compile-time and poison-fill kernels never count as calls. Pass the CSV back with
``VerifyOptions.rocprof_trace`` / ``rocprof_baseline_trace``: it is the run's own claim
about its kernels (whoever ran the tracer controls the file), next to the judge's checks.
"""
from __future__ import annotations

import argparse
import sys

from verifiers.arms.candidate import load_candidate, parse_candidate
from verifiers.hw.device import open_device
from verifiers.judge import tensors
from verifiers.problem import load_problem


def _marker(device):
    """A flush kernel named ``verifier_cache_flush`` (a unique marker in a kernel trace)."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def verifier_cache_flush(buf, n, value, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(buf + offs, value, mask=offs < n)

    nbytes = device.default_flush_bytes()
    buf = torch.empty(max(1, nbytes // 4), dtype=torch.int32, device=device.torch_device)
    n = buf.numel()
    state = {"value": 0}

    def flush() -> None:
        state["value"] = (state["value"] + 1) & 0x7FFF
        verifier_cache_flush[(triton.cdiv(n, 4096),)](buf, n, state["value"], BLOCK=4096)

    return flush


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m verifiers.arms.rocprof_run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", required=True)
    ap.add_argument("--arm", default="baseline", help="baseline, an arm name, or FILE.py:FUNC / module:FUNC")
    ap.add_argument("--shape", required=True)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args(argv)
    problem = load_problem(args.problem)
    dims = problem.parse_shape(args.shape)
    device = open_device(args.device)
    if not device.is_gpu:
        print("rocprof_run needs a GPU (a kernel tracer has nothing to trace on CPU)", file=sys.stderr)
        return 2
    if args.arm == "baseline":
        arm = next(a for a in problem.arms.values() if a.role == "baseline" and device.platform in a.platforms)
        builder = problem.resolve_builder(arm.build)
    elif args.arm in problem.arms:
        builder = problem.resolve_builder(problem.arm(args.arm).build)
    else:
        builder = load_candidate(parse_candidate(args.arm), problem)
    flush = _marker(device)
    inputs = problem.make_inputs(dims, args.seed, device.torch_device)
    outputs = problem.make_outputs(dims, device.torch_device)
    tensors.poison(outputs, 0)
    launch = builder(inputs, outputs)
    for _ in range(args.warmup):
        launch()
    device.sync()
    for _ in range(args.calls):
        flush()  # marks the start of one iteration in the trace
        launch()
        device.sync()
    print(f"ran {args.calls} marked calls of {args.arm} at {args.shape}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

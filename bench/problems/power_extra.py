"""Power test problem: a baseline kernel and the same kernel plus calibrated extra device work.

Arms (each on CUDA/ROCm and CPU; the tensors' device picks the family):

- ``base``: on GPUs the cuBLAS fp8 block-scale GEMM of ``blockscale_cublas_aa.py`` (the A/A
  kernel of the precision bench); on CPU a float32 ``torch.mm``;
- ``extra_big`` / ``extra_small``: ``base`` followed, on the same stream, by extra work worth
  ``FRACTIONS[platform]`` of the base call: on GPUs ``torch.cuda._sleep`` cycles (one tiny
  kernel, no memory traffic), on CPU a busy loop on the process's CPU clock. Each process
  calibrates once per shape in ``build`` (untimed): the base call's median with the cache
  flushed before each call (as the verifier does), and the device's sleep rate.

``arm:extra_big`` against baseline ``base`` must be SLOWER at about ``1 / (1 + f)``; the mirror
(baseline ``extra_big``, candidate ``arm:base``) FASTER at about ``1 + f``.
"""
from __future__ import annotations

import time
from pathlib import Path

import torch

from verifiers.problem import ArmSpec, ParitySpec, Problem, load_problem

#: extra work as a fraction of the base call: the GPU goals are about 3 % and 1 %; on CPU the
#: verifier's declared floor is 5 %, so the smoke run uses fractions it can see
FRACTIONS = {"gpu": {"extra_big": 0.03, "extra_small": 0.01}, "cpu": {"extra_big": 0.30, "extra_small": 0.10}}
_GPU = load_problem(str(Path(__file__).with_name("blockscale_cublas_aa.py"))) if torch.cuda.is_available() else None
_CAL: dict[tuple, float] = {}  # (shape, what) -> figure, per process


def _gpu(t: torch.Tensor) -> bool:
    return t.device.type == "cuda"


def make_inputs(dims, seed, device):
    if torch.device(device).type == "cuda":
        return _GPU.make_inputs(dims, seed, device)
    g = torch.Generator().manual_seed(int(seed))
    return {"a": torch.randn(dims["M"], dims["K"], generator=g).to(device),
            "b": torch.randn(dims["K"], dims["N"], generator=g).to(device)}


def refresh_inputs(values, dims, seed):
    if _gpu(values["a"]):
        return _GPU.refresh_inputs(values, dims, seed)
    g = torch.Generator().manual_seed(int(seed))
    values["a"].copy_(torch.randn(values["a"].shape, generator=g))


def make_outputs(dims, device):
    if torch.device(device).type == "cuda":
        return _GPU.make_outputs(dims, device)
    return {"c": torch.empty(dims["M"], dims["N"], device=device)}


def oracle(inputs, dims):
    if inputs["a"].dtype == torch.float8_e4m3fn:
        return _GPU.oracle(inputs, dims)
    return {"c": (inputs["a"].double() @ inputs["b"].double()).float()}


def oracle_at(inputs, dims, index):
    if inputs["a"].dtype == torch.float8_e4m3fn:
        return _GPU.oracle_at(inputs, dims, index)
    idx = index["c"].long()
    rows, cols = idx // dims["N"], idx % dims["N"]
    return {"c": (inputs["a"].double()[rows] * inputs["b"].double()[:, cols].t()).sum(1).float()}


def build_base(inputs, outputs):
    if _gpu(inputs["a"]):
        return _GPU.arm("cublas_blockscale").build(inputs, outputs)
    a, b, c = inputs["a"], inputs["b"], outputs["c"]

    def launch():
        torch.mm(a, b, out=c)

    return launch


def _base_ms(launch, key, gpu: bool) -> float:
    """The base call's median, the cache flushed before each (256 MiB on GPUs) as the verifier does."""
    if key in _CAL:
        return _CAL[key]
    times = []
    if gpu:
        flush = torch.empty(64 << 20, dtype=torch.int32, device="cuda")
        for i in range(30):
            flush.fill_(i)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            launch()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        del flush
    else:
        for _ in range(30):
            t0 = time.process_time_ns()
            launch()
            times.append((time.process_time_ns() - t0) / 1e6)
    times = sorted(times[5:])
    _CAL[key] = times[len(times) // 2]
    return _CAL[key]


def _cycles_per_ms() -> float:
    if "cycles" not in _CAL:
        torch.cuda._sleep(1000)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(1_000_000)
        e.record()
        e.synchronize()
        _CAL["cycles"] = 1_000_000 / s.elapsed_time(e)
    return _CAL["cycles"]


def _with_extra(name: str):
    def build(inputs, outputs):
        base = build_base(inputs, outputs)
        gpu = _gpu(inputs["a"])
        frac = FRACTIONS["gpu" if gpu else "cpu"][name]
        key = (tuple(inputs["a"].shape), tuple(outputs["c"].shape), "base")
        extra_ms = frac * _base_ms(base, key, gpu)
        if gpu:
            cycles = max(1, int(extra_ms * _cycles_per_ms()))

            def launch():
                base()
                torch.cuda._sleep(cycles)
        else:
            extra_ns = int(extra_ms * 1e6)

            def launch():
                base()
                end = time.process_time_ns() + extra_ns
                while time.process_time_ns() < end:
                    pass
        launch.variant = f"base + extra work worth {frac:.0%} of the call ({extra_ms * 1e3:.1f} us)"
        return launch

    return build


PROBLEM = Problem(
    card_id="flydsl_fp8_blockscale_gemm",
    name="power_extra",
    dim_names=("M", "N", "K"),
    shapes=({"M": 4096, "N": 2048, "K": 7168},),
    make_inputs=make_inputs,
    make_outputs=make_outputs,
    oracle=oracle,
    parity=ParitySpec(mode="strict", rtol=1e-2, atol=1e-2, min_cosine=0.999),
    arms={
        "base": ArmSpec("base", build_base, "baseline", "cuBLAS block-scale GEMM (GPU) / torch.mm (CPU)",
                        platforms=("cuda", "cpu")),
        "extra_big": ArmSpec("extra_big", _with_extra("extra_big"), "ablation",
                             "base + extra work worth 3 % of the call (30 % on CPU)", platforms=("cuda", "cpu")),
        "extra_small": ArmSpec("extra_small", _with_extra("extra_small"), "ablation",
                               "base + extra work worth 1 % of the call (10 % on CPU)", platforms=("cuda", "cpu")),
    },
    static_inputs=("b", "b_scale"),
    refresh_inputs=refresh_inputs,
    oracle_at=oracle_at,
)

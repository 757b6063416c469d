"""Fallback problem for ``bench/verifier_quality_h200.py``: cuBLAS fp8 block-scale GEMM only.

Used when the card problem ``flydsl_fp8_blockscale_gemm`` (which has the same cuBLAS arm
among others) cannot be imported. fp8 e4m3 A ``[M, K]`` with fp32 scales per row per
128-K block, fp8 e4m3 B ``[N, K]`` with one fp32 scale per 128x128 block, bf16 out; the
oracle dequantises in float64. The arm is the call measured in
``notes/h200-measurements.md``: ``F.scaled_mm`` BlockWise1x128 x BlockWise128x128, with
B's scales padded along K/128 to a multiple of 4.
"""
from __future__ import annotations

import torch

from verifiers.problem import ArmSpec, ParitySpec, Problem, SignatureSpec

BLOCK = 128
E4M3_MAX = 448.0


def _quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, k = x.shape
    blocks = x.view(m, k // BLOCK, BLOCK)
    scale = blocks.abs().amax(dim=2).clamp_min(1e-12) / E4M3_MAX
    q = (blocks / scale[..., None]).to(torch.float8_e4m3fn).view(m, k)
    return q, scale.float()


def _quantize_blocks(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n, k = w.shape
    blocks = w.view(n // BLOCK, BLOCK, k // BLOCK, BLOCK)
    scale = blocks.abs().amax(dim=(1, 3)).clamp_min(1e-12) / E4M3_MAX
    q = (blocks / scale[:, None, :, None]).to(torch.float8_e4m3fn).view(n, k)
    return q, scale.float()


def make_inputs(dims, seed, device):
    g = torch.Generator(device=device).manual_seed(int(seed))
    m, n, k = dims["M"], dims["N"], dims["K"]
    a = torch.randn(m, k, generator=g, device=device) * torch.exp(0.5 * torch.randn(m, 1, generator=g, device=device))
    w = 0.02 * torch.randn(n, k, generator=g, device=device)
    a8, sa = _quantize_rows(a)
    w8, sw = _quantize_blocks(w)
    # a_scale is stored column-major (what scaled_mm wants), so the arm reads the input
    # buffer itself at call time: a copy made in build would go stale when the verifier
    # writes new values into the inputs between rounds
    return {"a": a8, "a_scale": sa.t().contiguous().t(), "b": w8, "b_scale": sw}


def refresh_inputs(values, dims, seed):
    """Fresh activations and their scales in place (the weights are static)."""
    a_buf = values["a"]
    g = torch.Generator(device=a_buf.device).manual_seed(int(seed))
    m, k = dims["M"], dims["K"]
    a = torch.randn(m, k, generator=g, device=a_buf.device) * torch.exp(0.5 * torch.randn(m, 1, generator=g, device=a_buf.device))
    a8, sa = _quantize_rows(a)
    a_buf.copy_(a8)
    values["a_scale"].copy_(sa)


def make_outputs(dims, device):
    return {"c": torch.empty(dims["M"], dims["N"], dtype=torch.bfloat16, device=device)}


def oracle(inputs, dims):
    a = inputs["a"].double() * inputs["a_scale"].double().repeat_interleave(BLOCK, dim=1)
    sw = inputs["b_scale"].double().repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)
    w = inputs["b"].double() * sw
    return {"c": (a @ w.t()).to(torch.bfloat16)}


def oracle_at(inputs, dims, index):
    """``c`` at flat indices: one float64 dot product per element (the verifier checks a
    sample of every timed call's output against it)."""
    idx = index["c"].long()
    rows, cols = idx // dims["N"], idx % dims["N"]
    kb = dims["K"] // BLOCK
    a = inputs["a"][rows].double().view(-1, kb, BLOCK) * inputs["a_scale"][rows].double()[:, :, None]
    w = inputs["b"][cols].double().view(-1, kb, BLOCK) * inputs["b_scale"][cols // BLOCK].double()[:, :, None]
    return {"c": (a * w).sum(dim=(1, 2)).to(torch.bfloat16)}


def build_cublas(inputs, outputs):
    import torch.nn.functional as F

    a, b, c = inputs["a"], inputs["b"], outputs["c"]
    scale_a = inputs["a_scale"]  # [M, K/128], column major (see make_inputs)
    sw = inputs["b_scale"]
    pad = -sw.shape[1] % 4
    scale_b = (F.pad(sw, (0, pad)) if pad else sw).contiguous().t()  # [round_up(K/128, 4), N/128]
    mat_b = b.t()

    def launch():
        c.copy_(F.scaled_mm(a, mat_b, scale_a, F.ScalingType.BlockWise1x128, scale_b,
                            F.ScalingType.BlockWise128x128, output_dtype=torch.bfloat16))

    return launch


PROBLEM = Problem(
    card_id="flydsl_fp8_blockscale_gemm",
    name="blockscale_cublas_aa",
    dim_names=("M", "N", "K"),
    shapes=({"M": 4096, "N": 2048, "K": 7168},),
    make_inputs=make_inputs,
    make_outputs=make_outputs,
    oracle=oracle,
    parity=ParitySpec(mode="strict", rtol=1e-2, atol=1e-2, min_cosine=0.999),
    arms={
        "cublas_blockscale": ArmSpec(
            "cublas_blockscale", build_cublas, "baseline", "cuBLAS block-scale GEMM via F.scaled_mm",
            platforms=("cuda",), signature=SignatureSpec(required=(r"sm90_xmma|cutlass|nvjet|gemm",)),
        ),
    },
    flops=lambda d: 2.0 * d["M"] * d["N"] * d["K"],
    min_bytes=lambda d: float(d["M"] * d["K"] + d["N"] * d["K"] + 2 * d["M"] * d["N"]),
    static_inputs=("b", "b_scale"),
    refresh_inputs=refresh_inputs,
    oracle_at=oracle_at,
)

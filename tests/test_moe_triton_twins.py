"""The Triton twins (stage-2 GEMM with bf16 / fp8 partial store, top-k reduce) run on CPU
in Triton's interpreter against the torch emulation and the fp32 oracle.

The kernels use only interpreter-safe builtins and pick the interpreter themselves for
CPU tensors, so these tests do not depend on TRITON_INTERPRET or on import order.
"""
from __future__ import annotations

from collections import namedtuple

import pytest
import torch

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import (
    fp8_format,
    naming,
    oracle,
    routing,
    triton_arms,
    triton_reduce,
    triton_stage2_gemm,
)
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.triton_stage2_gemm import GemmConfig

pytestmark = pytest.mark.triton_interpret
SMALL_CFG = GemmConfig(block_m=32, block_n=32, block_k=32, group_m=2)
DIMS = {"M": 20, "N": 80, "K": 48, "E": 8, "top_k": 2}  # ragged N and K for 32-wide tiles


def _e4m3_code_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Distance in representable steps between two e4m3 tensors of the same sign."""
    def ordinal(t):
        u = t.view(torch.uint8).to(torch.int32)
        return torch.where(u >= 128, -(u - 128), u)

    return (ordinal(a) - ordinal(b)).abs()


@pytest.fixture(scope="module")
def case():
    inputs = oracle.make_inputs(DIMS, 5)
    return inputs, oracle.stage2_partials(inputs)


def test_gemm_bf16_partials_match_torch_to_one_ulp(case):
    inputs, p = case
    part = torch.empty(DIMS["M"] * DIMS["top_k"], DIMS["N"], dtype=torch.bfloat16)
    launch, name = triton_stage2_gemm.launcher(inputs, part, None, SMALL_CFG)
    launch()
    assert name == "moe2_gemm_bf16"
    ref = p.to(torch.bfloat16)
    diff = (part.float() - ref.float()).abs()
    ulp = ref.float().abs() * 2.0**-7 + 1e-30
    assert bool((diff <= ulp).all())  # fp32 summation order may flip a rounding, never more
    assert int((part != ref).sum()) <= max(2, part.numel() // 500)


def test_gemm_fp8_partials_match_the_torch_quantizer(case):
    inputs, p = case
    s = 224.0 / float(p.abs().max())
    part = torch.empty(DIMS["M"] * DIMS["top_k"], DIMS["N"], dtype=torch.float8_e4m3fn)
    launch, name = triton_stage2_gemm.launcher(inputs, part, s, SMALL_CFG)
    launch()
    assert name == f"moe2_gemm_pf8_s{naming.scale_hex(s)}"
    ref = fp8_format.quantize_e4m3(p, s)
    dist = _e4m3_code_distance(part, ref)
    assert int(dist.max()) <= 1 and int((dist > 0).sum()) <= max(2, part.numel() // 1000)


def test_accumulator_rows_feed_a_store_epilogue_that_gives_the_same_partial(case):
    """The ablation arm's split: the GEMM writes raw fp32 rows in sorted order, a separate
    epilogue (FlyDSL on gfx950; its arithmetic emulated here) weights, scales, scatters."""
    inputs, p = case
    acc = torch.empty(inputs["sorted_ids"].numel(), DIMS["N"], dtype=torch.float32)
    launch, name = triton_stage2_gemm.launcher(inputs, acc, None, SMALL_CFG)
    launch()
    assert name == naming.GEMM_ACC
    n = DIMS["M"] * DIMS["top_k"]
    sid = inputs["sorted_ids"][: int(inputs["num_padded"])].long()
    valid = sid < n
    f = sid[valid]
    w = inputs["topk_weights"].reshape(-1)[f]
    unweighted = p[f] / w[:, None]
    assert torch.allclose(acc[: sid.numel()][valid], unweighted, rtol=1e-5, atol=1e-6)
    assert bool((acc[: sid.numel()][~valid] == 0).all())  # padding rows accumulate nothing
    s = 224.0 / float(p.abs().max())
    part = torch.empty(n, DIMS["N"], dtype=torch.float8_e4m3fn)
    part[f] = fp8_format.quantize_e4m3(acc[: sid.numel()][valid] * w[:, None], s)  # (acc * w) * s, as the kernel
    dist = _e4m3_code_distance(part, fp8_format.quantize_e4m3(p, s))
    assert int(dist.max()) <= 1 and int((dist > 0).sum()) <= max(2, part.numel() // 1000)


def test_fp8_store_rounding_is_exact_over_the_whole_e4m3_range():
    """One token row per slot with a2 = e_0, so the partial is w2[e, :, 0] * weight: the
    epilogue's rounding sees chosen values from flush-to-zero up to saturation."""
    M, N, K, E, top_k = 8, 512, 16, 2, 1
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, E, (M, top_k), generator=g, dtype=torch.int32)
    weights = torch.rand(M, top_k, generator=g) + 0.5
    sorted_ids, block_expert, num_padded = routing.align_blocks(ids, E)
    a2 = torch.zeros(M * top_k, K, dtype=torch.bfloat16)
    a2[:, 0] = 1.0
    mags = 2.0 ** (torch.rand(E, N, generator=g) * 24 - 18)  # with s = 16: |P * s| spans 2^-15 .. 2^11
    signs = torch.where(torch.rand(E, N, generator=g) < 0.5, -1.0, 1.0)
    w2 = torch.zeros(E, N, K, dtype=torch.bfloat16)
    w2[:, :, 0] = (mags * signs).to(torch.bfloat16)
    inputs = {"a2": a2, "w2": w2, "topk_ids": ids, "topk_weights": weights, "sorted_ids": sorted_ids,
              "block_expert": block_expert, "num_padded": num_padded}
    s = 16.0
    part = torch.empty(M * top_k, N, dtype=torch.float8_e4m3fn)
    launch, _ = triton_stage2_gemm.launcher(inputs, part, s, GemmConfig(block_m=16, block_n=128, block_k=16, group_m=1))
    launch()
    p = oracle.stage2_partials(inputs)
    ref = fp8_format.quantize_e4m3(p, s)
    assert torch.equal(part.view(torch.uint8), ref.view(torch.uint8))
    y = (p * s).abs()
    assert bool((y > 448).any()) and bool(((y > 0) & (y < 2.0**-10)).any()) and bool(((y > 2.0**-9) & (y < 2.0**-6)).any())


@pytest.mark.parametrize("fp8", [False, True])
def test_reduce_is_bit_exact_against_the_emulation(fp8):
    M, top_k, N = 5, 3, 200  # two column blocks of 128, the second ragged
    p = torch.randn(M * top_k, N, generator=torch.Generator().manual_seed(1)) * 3
    s = 37.25 if fp8 else None
    part = fp8_format.quantize_e4m3(p, s) if fp8 else p.to(torch.bfloat16)
    out = torch.empty(M, N, dtype=torch.bfloat16)
    launch, name = triton_reduce.launcher(part, out, top_k, s, block_n=128)
    launch()
    deq = fp8_format.dequantize_e4m3(part, s) if fp8 else part.float()
    assert torch.equal(out, oracle.reduce_partials(deq, top_k).to(torch.bfloat16))
    assert name == (naming.reduce_name(True, s) if fp8 else "moe_reduce_inbf16")


def test_reduce_rejects_a_missing_or_spurious_scale():
    out = torch.empty(2, 16, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="needs its scale"):
        triton_reduce.launcher(torch.zeros(4, 16, dtype=torch.float8_e4m3fn), out, 2, None)
    with pytest.raises(ValueError, match="needs its scale"):
        triton_reduce.launcher(torch.zeros(4, 16, dtype=torch.bfloat16), out, 2, 1.0)


def test_both_arms_pass_the_problems_parity_rules():
    from verifiers.judge.metrics import output_metrics
    from verifiers.judge.parity import output_eps, parity_failures, rules_from

    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.problem import PARITY, SMOKE_SHAPES

    dims = dict(SMOKE_SHAPES[0])
    inputs = oracle.make_inputs(dims, 0)
    ref = oracle.oracle(inputs, dims)["out"]
    rules = rules_from(PARITY)
    figures = {}
    for name, build in (("bf16", triton_arms.build_bf16), ("fp8", triton_arms.build_fp8)):
        outs = oracle.make_outputs(dims)
        outs["out"].fill_(float("nan"))
        build(inputs, outs)()
        figures[name] = output_metrics(outs["out"], ref, rules.rtol, rules.atol)
    assert figures["bf16"].nonfinite == 0 and figures["bf16"].rel_l2 < 0.005
    assert parity_failures(rules, figures["fp8"], figures["bf16"], output_eps(ref.to(torch.bfloat16))) == []
    assert figures["fp8"].rel_l2 > 3 * figures["bf16"].rel_l2  # the fp8 round trip is really there


def test_kernel_names_carry_the_variant_and_the_one_scale():
    inputs = oracle.make_inputs(DIMS, 0)
    base = triton_arms.build_bf16(inputs, oracle.make_outputs(DIMS))
    fp8 = triton_arms.build_fp8(inputs, oracle.make_outputs(DIMS))
    assert base.kernel_names == ("moe2_gemm_bf16", "moe_reduce_inbf16")
    tag = naming.scale_hex(fp8.producer_scale)
    assert fp8.kernel_names == (f"moe2_gemm_pf8_s{tag}", f"moe_reduce_infp8_s{tag}")
    assert fp8.producer_scale == fp8.reducer_scale == triton_arms.calibrated_scale(inputs)
    assert naming.check_scale_consistency(fp8.kernel_names) == []
    assert fp8.partial.dtype == torch.float8_e4m3fn and base.partial.dtype == torch.bfloat16


def test_the_repr_hook_names_kernels_from_their_constexprs():
    Proxy = namedtuple("Proxy", ["constants", "signature"])
    s = 0.0007
    gemm = triton_stage2_gemm._kernel_repr
    assert gemm(Proxy({"PF8": True, "S": s, "ACC_OUT": False}, {})) == "moe2_gemm_pf8_s3a378034"
    assert gemm(Proxy({"PF8": False, "S": 1.0, "ACC_OUT": False}, {})) == "moe2_gemm_bf16"
    assert gemm(Proxy({"PF8": False, "S": 1.0, "ACC_OUT": True}, {})) == "moe2_gemm_accf32"
    assert triton_reduce._kernel_repr(Proxy({"IN_FP8": True, "S": 2 * s}, {})) == "moe_reduce_infp8_s3ab78034"
    assert triton_reduce._kernel_repr(Proxy({"IN_FP8": False, "S": 1.0}, {})) == "moe_reduce_inbf16"


def test_a_cpu_profile_shows_the_kernel_names():
    from torch.profiler import ProfilerActivity, profile

    inputs = oracle.make_inputs(DIMS, 1)
    launch = triton_arms.build_fp8(inputs, oracle.make_outputs(DIMS))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        launch()
    names = {e.name for e in prof.events()}
    assert set(launch.kernel_names) <= names

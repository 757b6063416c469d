"""The MoE card's torch baseline arm (``torch_bf16``): the CPU baseline of the emulated run at a
real card shape (``gfx950_targets.FULL_EMULATED_ARMS``), where the interpreted Triton baseline
would take hours. It must be the bf16-partial baseline's arithmetic exactly, hold the problem's
parity against the oracle, keep the relative rules as strict as the Triton baseline does, and
show its own step names (never a kernel's) to the verifier's CPU signature and segment stages."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from verifiers.judge.metrics import output_metrics
from verifiers.judge.parity import output_eps, parity_failures, rules_from
from verifiers.problem import load_problem

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import naming, oracle
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.calibration import scale_for

NAME = "flydsl_prefill_moe_stage2_fp8partial"
PROBLEM = load_problem(NAME)
RULES = rules_from(PROBLEM.parity)
SHAPES = (*PROBLEM.smoke_shapes, *PROBLEM.cpu_hidden_shapes)
TORCH = (naming.TORCH_GEMM_BF16, naming.TORCH_REDUCE_BF16)


def _run(arm: str, inputs: dict, dims: dict) -> torch.Tensor:
    outputs = PROBLEM.make_outputs(dims, "cpu")
    outputs["out"].fill_(float("nan"))
    PROBLEM.resolve_builder(PROBLEM.arm(arm).build)(inputs, outputs)()
    return outputs["out"]


def _figures(out: torch.Tensor, ref: torch.Tensor):
    return output_metrics(out, ref, RULES.rtol, RULES.atol)


@pytest.mark.parametrize("dims", [dict(d) for d in SHAPES], ids=lambda d: "x".join(map(str, d.values())))
def test_the_torch_baseline_is_the_bf16_baseline_bit_for_bit_and_holds_parity(dims):
    """Bit for bit the baseline's rounding (``emulate_bf16_partial``: fp32 partial x router weight,
    bf16 store, fp32 sum in slot order, bf16 out; the Triton baseline matches it,
    test_moe_triton_twins), on both parity seeds it is checked on; parity against the oracle
    standing as its own baseline; and as the fp8 recipe's baseline the relative rules still
    take the recipe (calibrated s) and refuse a reducer unscaling with 2s."""
    for seed in PROBLEM.parity.seeds[:2]:
        inputs = PROBLEM.make_inputs(dims, seed, "cpu")
        ref = PROBLEM.oracle(inputs, dims)["out"]
        out = _run("torch_bf16", inputs, dims)
        assert torch.equal(out, oracle.emulate_bf16_partial(inputs)["out"]), (dims, seed)
        base = _figures(out, ref)
        eps = output_eps(out)
        assert base.nonfinite == 0 and parity_failures(RULES, base, base, eps, who="torch_bf16") == []
        scale = scale_for(dims).scale
        fp8 = _figures(oracle.emulate_fp8_partial(inputs, scale)["out"], ref)
        assert parity_failures(RULES, fp8, base, eps, who="fp8 recipe") == []
        wrong = _figures(oracle.emulate_fp8_partial(inputs, scale, reducer_scale=2 * scale)["out"], ref)
        assert parity_failures(RULES, wrong, base, eps, who="reducer 2s")


def test_the_torch_baseline_reads_the_sorted_blocks_at_every_call():
    """The routing is read at launch, from the blocks the kernels read: new values copied into the
    same buffers (as the verifier's rotating input sets do) give the new answer, not the old one."""
    dims = dict(PROBLEM.smoke_shapes[1])
    inputs = PROBLEM.make_inputs(dims, 0, "cpu")
    outputs = PROBLEM.make_outputs(dims, "cpu")
    launch = PROBLEM.resolve_builder(PROBLEM.arm("torch_bf16").build)(inputs, outputs)
    launch()
    assert torch.equal(outputs["out"], oracle.emulate_bf16_partial(inputs)["out"])
    other = PROBLEM.make_inputs(dims, 3, "cpu")
    assert not torch.equal(other["sorted_ids"], inputs["sorted_ids"])
    for k, v in other.items():
        inputs[k].copy_(v)
    launch()
    assert torch.equal(outputs["out"], oracle.emulate_bf16_partial(other)["out"])


def test_the_torch_baseline_is_cpu_only_and_names_its_steps_apart_from_every_kernel():
    arm = PROBLEM.arm("torch_bf16")
    assert arm.role == "baseline" and arm.platforms == ("cpu",)
    sig = arm.signature
    names = set(TORCH)
    assert all(any(re.search(p, n) for n in names) for p in sig.required) and sig.launches_per_iter == 2
    assert not any(re.search(p, n) for p in sig.forbidden for n in names)
    # the Triton baseline's kernels, an fp8 arm's, and each side swapped in alone are refused
    for kernels in (("moe2_gemm_bf16", "moe_reduce_inbf16"), ("moe2_gemm_pf8_s3a378034", "moe_reduce_infp8_s3a378034"),
                    ("moe2_gemm_bf16", TORCH[1]), (TORCH[0], "moe_reduce_inbf16")):
        ok = all(any(re.search(p, n) for n in kernels) for p in sig.required) and not any(
            re.search(p, n) for p in sig.forbidden for n in kernels)
        assert not ok, kernels
    # and no other arm's signature takes the torch steps for its kernels
    for other in PROBLEM.arms.values():
        if other.name != "torch_bf16":
            assert not all(any(re.search(p, n) for n in TORCH) for p in other.signature.required), other.name
    # the segment covers both steps (a filter missing one would drop it from the score)
    for n in TORCH:
        assert any(re.search(k, n) for k in PROBLEM.segment.kernels), n
    # the card keeps its bindings: the real kernels on every platform, the torch arm nowhere
    head = (Path(__file__).parent.parent / "skills" / NAME / "SKILL.md").read_text().split("\n---", 2)[0]
    assert "torch_bf16" not in head
    inputs = PROBLEM.make_inputs(dict(PROBLEM.smoke_shapes[0]), 0, "cpu")
    meta = {k: v.to("meta") for k, v in inputs.items()}
    with pytest.raises(RuntimeError, match="CPU stand-in for the baseline"):
        PROBLEM.resolve_builder(arm.build)(meta, PROBLEM.make_outputs(dict(PROBLEM.smoke_shapes[0]), "meta"))


@pytest.mark.slow
@pytest.mark.triton_interpret
def test_the_verifier_runs_the_torch_baseline_on_cpu_with_its_signature_and_segment():
    """Through the judge and arm processes: ``arm:triton_fp8`` against ``--baseline torch_bf16`` at
    the smallest smoke shape, parity and the profiled stages (no timing): parity holds, both
    arms' signatures PASS on the names their CPU traces show, the segment covers both steps."""
    from verifiers.api import verify
    from verifiers.options import VerifyOptions

    small = min(PROBLEM.smoke_shapes, key=lambda d: math.prod(d.values()))
    shape = "x".join(str(small[n]) for n in PROBLEM.dim_names)
    options = VerifyOptions(device="cpu", timing=False, hidden_shapes=False, secret_seed=False, seeds=[0])
    report = verify(NAME, "arm:triton_fp8", baseline="torch_bf16", shapes=[shape], options=options)
    assert report.baseline == "torch_bf16"
    [s] = report.shape_reports
    for stage in ("parity", "signature", "segment"):
        assert s.stages[stage].status == "PASS", (stage, s.stages[stage].reason)
    base = next(c for c in s.signature if c.arm == "baseline torch_bf16")
    assert sorted(k.name for k in base.kernels) == sorted(TORCH) and base.launches_per_iter and \
        set(base.launches_per_iter) == {2}

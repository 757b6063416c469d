"""The FlyDSL kernel's per-lane addressing, replayed on the CPU (``lane_model``) against
the real shuffled buffers and the scaled MFMA's register ABI, reproduces the oracle.

This checks the kernel's index functions, the scale/weight shuffles and the A/B swap
together (every block, wave, lane, K step, including the masked M tail); it does not
check FlyDSL's lowering, which needs the MI355X."""
from __future__ import annotations

import pytest
import torch

from skill_kernels.flydsl_mxfp8_8wave_gemm import flydsl_gemm as fg
from skill_kernels.flydsl_mxfp8_8wave_gemm import lane_model
from skill_kernels.flydsl_mxfp8_8wave_gemm.inputs import make_inputs, oracle

CASES = [
    ({"M": 64, "N": 64, "K": 256}, (4, 1)),  # one M group in a 256-row block: 3 waves masked
    ({"M": 192, "N": 256, "K": 384}, (2, 2)),  # tail block, odd K steps
    ({"M": 128, "N": 256, "K": 256}, (1, 4)),
]


@pytest.mark.parametrize("dims,grid", CASES, ids=lambda v: str(v))
def test_lane_model_matches_oracle(dims, grid):
    inputs = make_inputs(dims, seed=7)
    c = lane_model.run(inputs, fg.KernelConfig(*grid))
    assert not bool(torch.isnan(c.float()).any()), "some C element was never written"
    assert torch.equal(c, oracle(inputs, dims)["c"])


def test_lane_model_catches_wrong_scale_layout():
    dims = {"M": 128, "N": 128, "K": 256}
    inputs = make_inputs(dims, seed=3)
    # hand the kernel the quantiser's row-major scale bytes instead of the shuffled ones
    wrong = dict(inputs)
    wrong["a_scale_shuffled"] = inputs["a_scale_e8m0"].contiguous().view(-1).view(8, 128)
    c = lane_model.run(wrong, fg.KernelConfig(2, 2))
    assert not torch.equal(c, oracle(inputs, dims)["c"])


def test_lane_model_catches_unshuffled_weight():
    dims = {"M": 64, "N": 128, "K": 256}
    inputs = make_inputs(dims, seed=4)
    wrong = dict(inputs, b_shuffled=inputs["b"])
    c = lane_model.run(wrong, fg.KernelConfig(2, 2))
    assert not torch.equal(c, oracle(inputs, dims)["c"])

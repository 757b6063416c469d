"""The mxfp8 kernel rejects shapes it cannot compute, with a ValueError naming the rule,
before compiling anything (never pads)."""
from __future__ import annotations

import pytest
import torch

from skill_kernels.flydsl_mxfp8_8wave_gemm import flydsl_gemm as fg
from skill_kernels.flydsl_mxfp8_8wave_gemm.inputs import check_dims, make_outputs


@pytest.mark.parametrize(
    "m,n,k,rule",
    [
        (96, 128, 256, "M=96 must be a positive multiple of 64"),
        (0, 128, 256, "M=0"),
        (128, 128, 128, "K=128 must be a multiple of 128 and >= 256"),
        (128, 128, 320, "K=320"),
        (128, 192, 256, "N=192 must be a positive multiple of the block \\(128\\)"),
    ],
)
def test_check_shape_rejects(m, n, k, rule):
    with pytest.raises(ValueError, match=rule):
        fg.check_shape(m, n, k, fg.KernelConfig(2, 2))


def test_check_shape_rejects_offsets_past_32_bits():
    with pytest.raises(ValueError, match="C \\(2\\*M\\*N\\)"):
        fg.check_shape(65536, 32768, 256, fg.KernelConfig(2, 2))


def test_check_shape_lists_every_violation():
    with pytest.raises(ValueError) as exc:
        fg.check_shape(32, 100, 100, fg.KernelConfig(2, 2))
    text = str(exc.value)
    assert "M=32" in text and "K=100" in text and "N=100" in text and "never pads" in text


def test_check_shape_accepts_pr_shapes_and_m_tail():
    for m, n, k in [(1024, 5120, 2048), (4096, 8192, 1280), (64, 256, 256), (192, 128, 384)]:
        fg.check_shape(m, n, k, fg.pick_config(m, n))


def test_pick_config_divides_n():
    assert fg.pick_config(1024, 5120).block_n == 128
    assert fg.pick_config(64, 64).block_n == 64
    assert fg.pick_config(64, 320).block_n == 64


def test_kernel_config_rejects_bad_knobs():
    with pytest.raises(ValueError, match="not supported"):
        fg.KernelConfig(waves_m=2, waves_n=4)
    with pytest.raises(ValueError, match="scale_mode"):
        fg.KernelConfig(scale_mode="fp32")


def _operands(m, n, k):
    return {
        "a": torch.zeros(m, k, dtype=torch.float8_e4m3fn),
        "b_shuffled": torch.zeros(n, k, dtype=torch.float8_e4m3fn),
        "a_scale_shuffled": torch.zeros(k // 32, m, dtype=torch.uint8),
        "b_scale_shuffled": torch.zeros(k // 32, n, dtype=torch.uint8),
    }, {"c": torch.zeros(m, n, dtype=torch.bfloat16)}


def test_build_rejects_bad_shape_before_compiling():
    inputs, outputs = _operands(96, 128, 256)
    with pytest.raises(ValueError, match="M=96"):
        fg.build(inputs, outputs)


def test_build_rejects_inconsistent_operands():
    inputs, outputs = _operands(128, 128, 256)
    inputs["a_scale_shuffled"] = torch.zeros(4, 128, dtype=torch.uint8)
    with pytest.raises(ValueError, match="a_scale_shuffled"):
        fg.build(inputs, outputs)
    inputs, outputs = _operands(128, 128, 256)
    outputs["c"] = torch.zeros(128, 128, dtype=torch.float32)
    with pytest.raises(ValueError, match="c must be bf16"):
        fg.build(inputs, outputs)


def test_problem_dims_contract():
    with pytest.raises(ValueError, match="N=96 must be a positive multiple of 64"):
        check_dims({"M": 64, "N": 96, "K": 256})
    with pytest.raises(ValueError, match="missing 'K'"):
        make_outputs({"M": 64, "N": 64})

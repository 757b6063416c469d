"""The Triton twin against the oracle under TRITON_INTERPRET=1 (CPU), and its config picker.

The interpreter flag is read when a kernel is decorated, i.e. when ``triton_twin`` is
first imported, so the kernel runs in a fresh subprocess that sets it first: this
module's result does not depend on what other tests imported before it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from skill_kernels.flydsl_fp8_blockscale_gemm.twin_configs import (
    TwinConfig,
    classify_shape,
    pick_config,
    sweep_configs,
)

_SCRIPT = textwrap.dedent(
    """
    import json, os
    assert os.environ["TRITON_INTERPRET"] == "1"
    import torch
    from skill_kernels.flydsl_fp8_blockscale_gemm import triton_twin
    from skill_kernels.flydsl_fp8_blockscale_gemm.inputs import PERTURBATIONS, make_inputs, make_outputs
    from skill_kernels.flydsl_fp8_blockscale_gemm.oracle import oracle
    from skill_kernels.flydsl_fp8_blockscale_gemm.parity import parity_figures
    from skill_kernels.flydsl_fp8_blockscale_gemm.twin_configs import TwinConfig

    cases = [
        ("default", dict(M=128, N=256, K=512), None, None),
        ("m64_ragged_m", dict(M=200, N=256, K=384), dict(block_m=64, num_warps=4), None),
        ("split_n_ragged_n_tiles", dict(M=128, N=384, K=256), dict(block_m=128, split_n=2), None),
        ("tma_persistent", dict(M=256, N=256, K=256),
         dict(block_m=128, use_tma=True, persistent=True, flatten=True, group_m=2), None),
        ("sign_flip", dict(M=128, N=128, K=256), None, "a_sign_flip"),
    ]
    results = {}
    for name, dims, cfg, perturb in cases:
        x = make_inputs(dims, 7)
        if perturb:
            x = PERTURBATIONS[perturb](x)
        ref = oracle(x, dims)["c"]
        out = make_outputs(dims)
        out["c"].fill_(float("nan"))
        ptr = out["c"].data_ptr()
        launch = triton_twin.build(x, out, TwinConfig(**cfg) if cfg else None)
        out["c"].fill_(float("nan"))  # poison: launch itself must write every element
        launch()
        fig = parity_figures(out["c"], ref)
        fig["in_place"] = out["c"].data_ptr() == ptr
        fig["label"] = launch.config.label
        results[name] = fig
    print("RESULT" + json.dumps(results))
    """
)


@pytest.fixture(scope="module")
def interpreted_runs():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    return json.loads(line[len("RESULT"):])


@pytest.mark.triton_interpret
@pytest.mark.parametrize("case", ["default", "m64_ragged_m", "split_n_ragged_n_tiles", "tma_persistent", "sign_flip"])
def test_twin_matches_the_oracle_with_zero_mismatches(interpreted_runs, case):
    fig = interpreted_runs[case]
    assert fig["nonfinite"] == 0, fig  # every element written (buffer was NaN-poisoned)
    assert fig["mismatches"] == 0, fig
    assert fig["cosine"] > 0.99999 and fig["rel_l2"] < 5e-3, fig
    # rounded to nearest like a GPU's cast (the interpreter's truncates: rel-L2 4e-3, which the
    # verifier's precision rule against the exact torch baseline, 2.4e-4, fails)
    assert fig["rel_l2"] < 1e-4, fig
    assert fig["in_place"], fig


def test_build_refuses_cpu_tensors_without_the_interpreter():
    code = textwrap.dedent(
        """
        import os
        os.environ.pop("TRITON_INTERPRET", None)
        from skill_kernels.flydsl_fp8_blockscale_gemm import triton_twin
        from skill_kernels.flydsl_fp8_blockscale_gemm.inputs import make_inputs, make_outputs
        d = dict(M=128, N=128, K=128)
        try:
            triton_twin.build(make_inputs(d, 0), make_outputs(d))
        except ValueError as e:
            print("REFUSED", e)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert "REFUSED" in proc.stdout and "TRITON_INTERPRET=1" in proc.stdout, proc.stdout + proc.stderr[-2000:]


@pytest.mark.parametrize("shape,cls", [
    ((4096, 65536, 1536), "wide_n"),
    ((4096, 2048, 7168), "narrow_n_deep_k"),
    ((16384, 1536, 7168), "narrow_n_deep_k"),
    ((16384, 7168, 768), "k_light"),
    ((4096, 4096, 4096), "generic"),
])
def test_config_picker_classifies_the_card_shapes(shape, cls):
    assert classify_shape(*shape)[0] == cls
    choice = pick_config(*shape)
    assert choice.shape_class == cls and choice.reason
    cfg = choice.config
    # Hopper: exact bf16 MMAs on fp8->bf16 upcasts (its fp8 MMA accumulation is not
    # fp32-exact: measured on the H200); elsewhere the fp8 MMA with a 128-K promote
    assert cfg.use_tma and cfg.mma_dtype == "bf16" and cfg.block_k == 128
    rocm = pick_config(*shape, platform="rocm").config
    assert rocm.mma_dtype == "fp8" and rocm.block_k == 128
    assert 3 <= cfg.num_stages <= 4
    assert not (cfg.block_m == 128 and cfg.num_warps == 4)


def test_wide_n_walks_all_m_tiles_per_b_panel_when_a_fits_in_l2():
    cfg = pick_config(4096, 65536, 1536).config
    assert cfg.group_m * cfg.block_m >= 4096
    # an A too large for L2 falls back to the ordinary grouped order
    assert pick_config(65536, 65536, 7168).config.group_m == 8


def test_k_light_uses_a_shallow_pipeline_and_deep_k_a_deep_one():
    # by shape class where nothing was measured (the AMD pipeliner keeps its own 2 stages,
    # so read the class choice off the interpreter platform); on Hopper the measured winner
    assert pick_config(16384, 7168, 768, "cpu").config.num_stages == 3
    assert pick_config(4096, 2048, 7168, "cpu").config.num_stages == 4
    hopper = {pick_config(*s).config.label for s in [(16384, 7168, 768), (4096, 2048, 7168)]}
    assert hopper == {"m128n256k128_w8s3_g8_tma_bf16mma"}


def test_platform_specific_choices():
    assert not pick_config(4096, 2048, 7168, "rocm").config.use_tma
    assert pick_config(4096, 2048, 7168, "rocm").config.num_stages == 2
    assert not pick_config(128, 256, 512, "cpu").config.use_tma
    assert pick_config(32, 256, 512).config.block_m == 64


def test_sweep_starts_with_the_pick_and_has_no_duplicates():
    for shape in [(4096, 65536, 1536), (16384, 7168, 768), (4096, 2048, 7168)]:
        configs = sweep_configs(*shape)
        assert configs[0] == pick_config(*shape).config
        labels = [c.label for c in configs]
        assert len(labels) == len(set(labels)) and 4 <= len(labels) <= 16
        assert any(c.tile_n == 256 for c in configs)  # the card's tile_n=256 lever is swept
        # the exact bf16 configs and the fp8 ones whose speed shows what exactness costs
        assert {c.mma_dtype for c in configs} == {"bf16", "fp8"}
        assert {c.block_k for c in configs if c.mma_dtype == "fp8"} == {32, 64, 128}
        rocm = sweep_configs(*shape, platform="rocm")
        assert any(c.block_m == 64 and c.num_stages == 3 for c in rocm)
    assert all(not c.use_tma for c in sweep_configs(4096, 2048, 7168, "rocm"))
    assert len(sweep_configs(4096, 2048, 7168, limit=3)) == 3


def test_invalid_configs_are_refused():
    with pytest.raises(ValueError, match="spills"):
        TwinConfig(block_m=128, num_warps=4)
    with pytest.raises(ValueError, match="block_n=128"):
        TwinConfig(block_m=128, block_n=64, split_n=2)
    with pytest.raises(ValueError):
        TwinConfig(block_m=128, block_k=96)  # MMA K steps must tile the 128-K scale block
    with pytest.raises(ValueError, match="persistent"):
        TwinConfig(block_m=128, flatten=True)
    with pytest.raises(ValueError, match="multiples of 128"):
        pick_config(128, 100, 256)

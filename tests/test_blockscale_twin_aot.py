"""The Triton twin compiles for sm_90 (Hopper) without spills: checked here, no GPU needed.

Triton's NVIDIA pipeline and the ptxas it bundles run on any machine; the resources of
the cubin (registers, local memory = spills, shared memory) are what the H200 will run.
Runs in a subprocess without TRITON_INTERPRET, whatever this process has set.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

_SCRIPT = textwrap.dedent(
    """
    import json
    from skill_kernels.flydsl_fp8_blockscale_gemm.twin_aot import report
    from skill_kernels.flydsl_fp8_blockscale_gemm.twin_configs import TwinConfig, pick_config
    shapes = [(4096, 65536, 1536), (4096, 2048, 7168), (16384, 1536, 7168), (16384, 7168, 768)]
    configs = {pick_config(*s).config.model_copy(update={"group_m": 8}) for s in shapes}
    configs.add(TwinConfig(block_m=64, num_warps=4, num_stages=3, use_tma=True))
    configs.add(TwinConfig(block_m=128, num_warps=8, num_stages=4, use_tma=True))
    configs.add(TwinConfig(block_m=128, split_n=2, num_stages=3, use_tma=True))
    configs.add(TwinConfig(block_m=64, num_warps=4, num_stages=5, block_k=32, use_tma=True))
    print("RESULT" + json.dumps({c.label: report(c).as_dict() for c in configs}))
    """
)


def _have_nvidia_tools() -> bool:
    import triton

    return os.path.exists(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump"))


@pytest.fixture(scope="module")
def sm90_reports():
    if not _have_nvidia_tools():
        pytest.skip("this Triton build ships no NVIDIA tools (ptxas/cuobjdump)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    return json.loads(line[len("RESULT"):])


@pytest.mark.slow
def test_every_picked_config_compiles_for_sm90_without_spills(sm90_reports):
    assert len(sm90_reports) >= 4
    for label, r in sm90_reports.items():
        assert r["spill_bytes"] == 0, (label, r)
        assert r["registers"] <= 255 and r["ctas_per_sm"] >= 1, (label, r)
        # fp8 wgmma is K=32 per instruction; the Hopper default upcasts to bf16 (K=16)
        k = "k16" if label.endswith("bf16mma") else "k32"
        assert r["mma"] and all(s.startswith("m64n") and s.endswith(k) for s in r["mma"]), (label, r)


@pytest.mark.slow
def test_block_m_64_fits_several_ctas_per_sm(sm90_reports):
    m64 = sm90_reports["m64n128k128_w4s3_g8_tma"]
    m128 = sm90_reports["m128n128k128_w8s4_g8_tma"]
    assert m64["ctas_per_sm"] >= 2, m64  # the other CTAs hide one CTA's promote
    assert m128["shared_bytes"] > m64["shared_bytes"]

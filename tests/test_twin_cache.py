"""The twin's cache-dependent program order follows the device's caches: the H200's
measured config stays the H200 default; MI355X's XCD layout counts its shared MALL."""
from __future__ import annotations

import pytest

from skill_kernels.flydsl_fp8_blockscale_gemm.problem import SHAPES
from skill_kernels.flydsl_fp8_blockscale_gemm.twin_configs import (
    H200_CACHE,
    MiB,
    device_cache,
    pick_config,
    sweep_configs,
)

CARD_SHAPES = [(s["M"], s["N"], s["K"]) for s in SHAPES]
# wide-N with a 56 MiB A: beyond the H200's L2 budget, inside MI355X's MALL budget
BIG_A = (8192, 65536, 7168)


@pytest.mark.parametrize("shape", CARD_SHAPES)
def test_the_h200_reporting_its_l2_gets_the_measured_exact_config(shape):
    reported = device_cache("cuda", 60 * MiB, None, "NVIDIA H200")
    assert pick_config(*shape, cache=reported).config == pick_config(*shape).config
    assert pick_config(*shape, cache=H200_CACHE).config.mma_dtype == "bf16"
    assert sweep_configs(*shape, cache=reported) == sweep_configs(*shape)


def test_mi355x_counts_its_shared_mall_not_one_xcds_l2():
    cache = device_cache("rocm", 4 * MiB, "gfx950:sramecc+:xnack-", "AMD Instinct MI355X")
    assert (cache.l2_domains, cache.shared_bytes) == (8, 256 * MiB)
    rocm = pick_config(*BIG_A, platform="rocm", cache=cache)
    assert rocm.config.group_m == BIG_A[0] // 128  # every M tile per B panel: A stays in the MALL
    assert "256 MiB shared MALL" in rocm.reason
    assert pick_config(*BIG_A, platform="cuda", cache=H200_CACHE).config.group_m == 8  # 56 MiB A > the H200 budget


def test_an_amd_part_of_unknown_layout_trusts_only_its_reported_l2():
    cache = device_cache("rocm", 4 * MiB, "gfx90a:sramecc+:xnack-", "AMD Instinct MI250X")
    assert cache.shared_bytes == 4 * MiB and "reported by AMD Instinct MI250X" in cache.source
    choice = pick_config(4096, 65536, 1536, platform="rocm", cache=cache)  # A is 6 MiB > 0.4 x 4 MiB
    assert choice.config.group_m == 8 and "does not fit in the 4 MiB L2" in choice.reason


def test_other_gpus_use_their_reported_l2_and_the_cpu_the_h200_default():
    h100 = device_cache("cuda", 50 * MiB, None, "NVIDIA H100")
    assert h100.shared_bytes == 50 * MiB
    assert pick_config(4096, 65536, 1536, cache=h100).config.group_m == 4096 // 128
    small = device_cache("cuda", 6 * MiB, None, "a small GPU")
    assert pick_config(4096, 65536, 1536, cache=small).config.group_m == 8
    assert device_cache("cpu", 123) == device_cache("cuda", None) == device_cache("rocm", 0) == H200_CACHE


def test_the_twin_builder_reads_the_cache_of_its_device():
    import torch

    from skill_kernels.flydsl_fp8_blockscale_gemm.triton_twin import _device_cache

    assert _device_cache(torch.device("cpu"), "cpu") == H200_CACHE

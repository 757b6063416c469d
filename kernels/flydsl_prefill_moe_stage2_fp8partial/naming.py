"""Kernel names that carry the partial format and the partial scale.

The runtime-signature gate reads kernel names off the profiler, so the names are the
evidence that the optimised arm really ran, and with which scale:

=====================  ===============================  ================================
side                   bf16 partial (baseline)           fp8 partial, scale ``s``
=====================  ===============================  ================================
stage-2 GEMM (Triton)  ``moe2_gemm_bf16``                ``moe2_gemm_pf8_s<hex>``
stage-2 GEMM (Fly)     ``moe2_gemm_bf16``                ``moe2_gemm_cshuffle_pf8_s<hex>``
                                                         (or ``moe2_gemm_accf32`` feeding:)
store epilogue (Fly)   ``moe2_store_bf16``               ``moe2_store_pf8_s<hex>``
top-k reduce           ``moe_reduce_inbf16``             ``moe_reduce_infp8_s<hex>``
=====================  ===============================  ================================

The torch stand-in for the baseline on CPU (``torch_arms``) runs no kernel: its two steps are
``record_function`` ranges named ``moe2_gemm_bf16_torch`` and ``moe_reduce_inbf16_torch``, which
the segment patterns cover and the anchored kernel names above never match.

``<hex>`` is the 8-digit lower-case IEEE float32 bit pattern of ``s`` (0.0007 ->
``3a378034``). Names are derived from the very compile-time values a kernel is
specialised on (Triton: the ``repr`` hook reads the constexpr ``S``; FlyDSL: the kernel
name and the ``Constexpr`` scale come from one argument), so a name cannot disagree with
the scale baked into the code. ``check_scale_consistency`` then demands that every fp8
producer and every fp8 reducer in a trace carry the same ``<hex>``: a reducer-only
override of the scale shows up as two different tags even when parity cannot see it.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.fp8_format import f32_bits, f32_from_bits

GEMM_BF16 = "moe2_gemm_bf16"
GEMM_ACC = "moe2_gemm_accf32"  # raw fp32 accumulator rows for a separate store epilogue
STORE_BF16 = "moe2_store_bf16"
REDUCE_BF16 = "moe_reduce_inbf16"
TORCH_GEMM_BF16 = "moe2_gemm_bf16_torch"  # the torch baseline's steps (CPU ranges, not kernels)
TORCH_REDUCE_BF16 = "moe_reduce_inbf16_torch"

# regexes the problem's runtime signatures use (re.search over kernel names)
GEMM_ANY = r"moe2_(gemm|store)"
REDUCE_ANY = r"moe_reduce"
GEMM_PF8 = r"moe2_\w*pf8_s[0-9a-f]{8}"
GEMM_CSHUFFLE_PF8 = r"^moe2_gemm_cshuffle_pf8_s[0-9a-f]{8}$"  # the fused FlyDSL GEMM (flydsl_stage2_gemm)
REDUCE_INFP8 = r"moe_reduce_infp8_s[0-9a-f]{8}"
_TAG = re.compile(r"(pf8|infp8)_s([0-9a-f]{8})(?![0-9a-f])")


def scale_hex(scale: float) -> str:
    """``s`` as its float32 bit pattern, 8 lower-case hex digits."""
    return f"{f32_bits(scale):08x}"


def scale_from_hex(tag: str) -> float:
    return f32_from_bits(int(tag, 16))


def gemm_name(pf8: bool, scale: float | None = None, *, flavour: str = "") -> str:
    """Name of the stage-2 GEMM (or store epilogue) kernel for one variant.

    flavour: an infix for the datapath that produced the store, e.g. ``"cshuffle"``.
    """
    if not pf8:
        return GEMM_BF16
    if scale is None:
        raise ValueError("the fp8-partial GEMM name needs its scale")
    mid = f"{flavour}_" if flavour else ""
    return f"moe2_gemm_{mid}pf8_s{scale_hex(scale)}"


def store_name(pf8: bool, scale: float | None = None) -> str:
    """Name of the standalone partial-store epilogue kernel (FlyDSL) for one variant."""
    if not pf8:
        return "moe2_store_bf16"
    if scale is None:
        raise ValueError("the fp8-partial store name needs its scale")
    return f"moe2_store_pf8_s{scale_hex(scale)}"


def reduce_name(in_fp8: bool, scale: float | None = None) -> str:
    """Name of the top-k reduce kernel for one variant."""
    if not in_fp8:
        return REDUCE_BF16
    if scale is None:
        raise ValueError("the fp8-partial reduce name needs its scale")
    return f"moe_reduce_infp8_s{scale_hex(scale)}"


def scale_tags(names: Iterable[str]) -> dict[str, dict[str, str]]:
    """``{"producer": {name: hex}, "reducer": {name: hex}}`` for every fp8 kernel name."""
    out: dict[str, dict[str, str]] = {"producer": {}, "reducer": {}}
    for name in names:
        m = _TAG.search(name)
        if m:
            out["reducer" if m.group(1) == "infp8" else "producer"][name] = m.group(2)
    return out


def check_scale_consistency(names: Iterable[str]) -> list[str]:
    """Problems with the scales a trace's fp8 kernels carry ([] when consistent).

    Fails when: a reducer reads fp8 with no fp8 producer in the trace (or the reverse),
    or the producers' and reducers' scale tags are not one single value.
    """
    tags = scale_tags(names)
    producers, reducers = tags["producer"], tags["reducer"]
    errors: list[str] = []
    if reducers and not producers:
        errors.append(f"fp8 reducer(s) {sorted(reducers)} ran without any fp8-partial producer")
    if producers and not reducers:
        errors.append(f"fp8-partial producer(s) {sorted(producers)} ran without any infp8 reducer")
    values = set(producers.values()) | set(reducers.values())
    if len(values) > 1:
        detail = ", ".join(f"{n}: s={scale_from_hex(h):.7g}" for n, h in sorted({**producers, **reducers}.items()))
        errors.append(f"producer/reducer partial scales differ ({detail}); one scale must feed both sides")
    return errors

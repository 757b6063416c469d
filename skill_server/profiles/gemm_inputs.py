"""What a GEMM op's recorded inputs say: (M, N, K), operand dtype and operand scale format.

With ``record_shapes=True`` every CPU op carries ``Input Dims`` (one list per argument,
``[]`` for scalars) and ``Input type``. Only ops whose argument layout is known give a
shape; anything else gives None rather than a guess:

| op | A (M x K) | B |
|---|---|---|
| ``aten::mm``, ``aten::_scaled_mm`` | arg 0 ``[M, K]`` | arg 1 ``[K, N]`` |
| ``aten::addmm``, ``aten::_addmm_activation`` | arg 1 ``[M, K]`` | arg 2 ``[K, N]`` |
| ``aten::matmul`` | arg 0 ``[..., M, K]`` (leading dims fold into M) | arg 1 ``[K, N]`` (2-D only) |
| ``aten::linear`` | arg 0 ``[..., M, K]`` | arg 1 ``[N, K]`` (the weight) |
| ``*gemm_aXwY*`` custom ops (aiter style, e.g. ``aiter::gemm_a8w8_blockscale``) | arg 0 ``[M, K]`` | arg 1 ``[N, K]`` |

Batched products (``bmm``, a batched right operand) have no single (M, N, K) and give None.
The K of both operands must agree, or the op gives None.

Scale format (quantised A only: fp8 / fp4 / int8 / uint8). The first two tensor arguments
after A and B that are fp32 or e8m0/uint8 are taken as the A and B scales, and a format is
named only when exactly one of these fits their dims exactly (either orientation):

| format | A scale | B scale | scale dtype |
|---|---|---|---|
| ``fp32_block`` | ``[M, ceil(K/128)]`` | ``[ceil(N/128), ceil(K/128)]`` | fp32 |
| ``ue8m0_1x32`` | ``[M, ceil(K/32)]`` | ``[N, ceil(K/32)]`` | e8m0 / uint8 |
| ``per_row`` | ``[M, 1]`` or ``[M]`` | ``[1, N]``, ``[N, 1]`` or ``[N]`` | fp32 |
| ``per_tensor`` | ``[]`` or ``[1]`` | ``[]`` or ``[1]`` | fp32 |

Pre-shuffled or packed scale layouts fit none of these and give None: the same kernel name
can carry fp32 block scales or ue8m0 ones with opposite recipes, so a guess is never made.
"""
from __future__ import annotations

import math
import re
from typing import Any

from skill_server.hotspot import GemmShape

# torch's "Input type" strings -> the dtype names the cards use.
TORCH_DTYPES: dict[str, str] = {
    "c10::Float8_e4m3fn": "fp8_e4m3",
    "c10::Float8_e4m3fnuz": "fp8_e4m3_fnuz",
    "c10::Float8_e5m2": "fp8_e5m2",
    "c10::Float8_e5m2fnuz": "fp8_e5m2_fnuz",
    "c10::Float4_e2m1fn_x2": "fp4_e2m1",
    "c10::BFloat16": "bf16",
    "c10::Half": "fp16",
    "float": "fp32",
    "double": "fp64",
    "signed char": "int8",
}

# op name -> (index of A, index of B, B is [N, K] rather than [K, N], A may carry leading batch dims)
_LAYOUTS: dict[str, tuple[int, int, bool, bool]] = {
    "aten::mm": (0, 1, False, False),
    "aten::_scaled_mm": (0, 1, False, False),
    "aten::addmm": (1, 2, False, False),
    "aten::_addmm_activation": (1, 2, False, False),
    "aten::matmul": (0, 1, False, True),
    "aten::linear": (0, 1, True, True),
}
_CUSTOM_NK = re.compile(r"gemm_a\d+w\d+", re.IGNORECASE)
_QUANTISED = frozenset({
    "c10::Float8_e4m3fn", "c10::Float8_e4m3fnuz", "c10::Float8_e5m2", "c10::Float8_e5m2fnuz",
    "c10::Float4_e2m1fn_x2", "signed char", "unsigned char",
})
_FP32 = frozenset({"float"})
_E8M0 = frozenset({"c10::Float8_e8m0fnu", "unsigned char"})


def _layout(op_name: str) -> tuple[int, int, bool, bool] | None:
    if op_name in _LAYOUTS:
        return _LAYOUTS[op_name]
    if not op_name.startswith("aten::") and _CUSTOM_NK.search(op_name):
        return (0, 1, True, False)
    return None


def _dims(value: Any) -> list[int] | None:
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in value):
        return None
    return value


def gemm_shape(op_name: str, input_dims: Any) -> GemmShape | None:
    """(M, N, K) of a GEMM op from its ``Input Dims``, or None when unknown (see the table)."""
    layout = _layout(op_name)
    if layout is None or not isinstance(input_dims, list):
        return None
    ia, ib, b_is_nk, a_batched = layout
    if max(ia, ib) >= len(input_dims):
        return None
    a, b = _dims(input_dims[ia]), _dims(input_dims[ib])
    if a is None or b is None or len(b) != 2:
        return None
    if len(a) != 2 and not (a_batched and len(a) > 2):
        return None
    m, k = math.prod(a[:-1]), a[-1]
    n, kb = (b[0], b[1]) if b_is_nk else (b[1], b[0])
    if k != kb:
        return None
    return GemmShape(M=m, N=n, K=k)


def operand_dtype(op_name: str, input_types: Any) -> str | None:
    """The normalised dtype of a GEMM op's A operand, or None when unknown."""
    layout = _layout(op_name)
    if layout is None or not isinstance(input_types, list) or layout[0] >= len(input_types):
        return None
    raw = input_types[layout[0]]
    return TORCH_DTYPES.get(raw) if isinstance(raw, str) else None


def scale_format(op_name: str, input_dims: Any, input_types: Any, shape: GemmShape | None) -> str | None:
    """The operand scale format when the scale tensors' dims say it unambiguously (see the table)."""
    layout = _layout(op_name)
    if layout is None or shape is None or not isinstance(input_dims, list) or not isinstance(input_types, list):
        return None
    ia, ib = layout[0], layout[1]
    if len(input_types) <= max(ia, ib) or input_types[ia] not in _QUANTISED:
        return None
    scales = [
        (d, t) for i, (d, t) in enumerate(zip(input_dims, input_types))
        if i not in (ia, ib) and isinstance(t, str) and t in (_FP32 | _E8M0) and isinstance(d, list)
    ][:2]
    if len(scales) < 2:
        return None
    (sa, ta), (sb, tb) = scales
    m, n, k = shape.M, shape.N, shape.K
    kb, nb, k32 = -(-k // 128), -(-n // 128), -(-k // 32)
    fits = []
    if ta in _FP32 and tb in _FP32:
        if sa in ([m, kb], [kb, m]) and sb in ([nb, kb], [kb, nb]):
            fits.append("fp32_block")
        if sa in ([m, 1], [m]) and sb in ([1, n], [n, 1], [n]):
            fits.append("per_row")
        if sa in ([], [1]) and sb in ([], [1]):
            fits.append("per_tensor")
    if ta in _E8M0 and tb in _E8M0 and sa in ([m, k32], [k32, m]) and sb in ([n, k32], [k32, n]):
        fits.append("ue8m0_1x32")
    return fits[0] if len(fits) == 1 else None

"""What a GEMM op's recorded inputs say: (M, N, K), operand dtype and operand scale format.

With ``record_shapes=True`` torch.profiler records, per CPU op, ``Input Dims`` (one list
per argument, ``[]`` for scalars, a list of lists for a ``Tensor[]``), ``Input type`` and
``Concrete Inputs`` (scalar arguments as text). Only ops whose argument layout is listed
here give a shape; anything else gives None rather than a guess. The names and argument
orders are the ones torch and the libraries register (read from their public code):

| op | A | B | scales |
|---|---|---|---|
| ``aten::mm``, ``aten::_scaled_mm`` | 0 ``[M, K]`` | 1 ``[K, N]`` | 2, 3 |
| ``aten::_scaled_mm_v2`` (torch >= 2.9, ``F.scaled_mm``) | 0 | 1 ``[K, N]`` | 2, 5 (``Tensor[]``; recipes in 3, 6) |
| ``aten::_scaled_grouped_mm`` | 0 ``[M, K]`` + offs, or ``[G, M, K]`` | 1 ``[G, K, N]`` | 2, 3 |
| ``aten::_scaled_grouped_mm_v2`` | 0 | 1 ``[G, K, N]`` | 2, 5 (recipes 3, 6) |
| ``aten::addmm``, ``aten::_addmm_activation`` | 1 | 2 ``[K, N]`` | - |
| ``aten::matmul`` | 0 ``[..., M, K]`` | 1 ``[K, N]`` (2-D only) | - |
| ``aten::linear`` | 0 ``[..., M, K]`` | 1 ``[N, K]`` | - |
| aiter ``aiter::gemm_a8w8*`` / vLLM ``vllm::rocm_aiter_gemm_w8a8*`` | 0 ``[M, K]`` | 1 ``[N, K]`` | first two fp32/e8m0 tensors after B |
| vLLM ``_C::cutlass_scaled_mm(out, a, b, a_scales, b_scales, bias)`` | 1 | 2 ``[K, N]`` | 3, 4 |

MoE ops give the GEMM of one stage, with M = tokens (rows of the hidden states) and the
dtype of that stage's weights when they are quantised (the op quantises bf16 activations
inside), else of the activations:

| op | stage | GEMM (M, N, K) |
|---|---|---|
| ``aiter::ck_moe_stage1(hidden [M, K], w1 [E, N1, K], ...)`` | 1 | (M, N1, K) |
| ``aiter::ck_moe_stage2(inter [M, topk, I], w1, w2 [E, H, I], ...)`` | 2 | (M, H, I) |
| ``aiter::fused_moe_``, ``vllm::inplace_fused_experts``, ``vllm::outplace_fused_experts`` (hidden [M, K], w1 [E, 2I, K], w2 [E, K, I]) | from the launch sequence | stage 1 (M, 2I, K), stage 2 (M, K, I) |

Scale format (quantised A only: fp8 / fp4 / int8 / uint8). ``_v2`` ops state it: their
recipe arguments hold torch's ``ScalingType`` values (TensorWise 0, RowWise 1,
BlockWise1x16 2, BlockWise1x32 3, BlockWise1x128 4, BlockWise128x128 5, as torch 2.13
numbers them). Other ops: the scale tensors' dims and dtypes must fit exactly one of:

| format | A scale | B scale | scale dtype |
|---|---|---|---|
| ``fp32_block`` | ``[M, ceil(K/128)]`` | ``[ceil(N/128), ceil(K/128)]`` | fp32 |
| ``ue8m0_1x32`` | ``[M, ceil(K/32)]`` | ``[N, ceil(K/32)]`` | e8m0 / uint8 |
| ``per_row`` | ``[M, 1]`` or ``[M]`` | ``[1, N]``, ``[N, 1]``, ``[N]`` or ``[G, N]`` | fp32 |
| ``per_tensor`` | ``[]`` or ``[1]`` | ``[]`` or ``[1]`` | fp32 |

Pre-shuffled or packed scale layouts fit none of these and give None: the same kernel
name can carry fp32 block scales or ue8m0 ones with opposite recipes, so a guess is never
made. Dims above ``MAX_DIM`` give no shape.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from trace_readers.records import OpCall

MAX_DIM = 2**31 - 1

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
_QUANTISED = frozenset({
    "c10::Float8_e4m3fn", "c10::Float8_e4m3fnuz", "c10::Float8_e5m2", "c10::Float8_e5m2fnuz",
    "c10::Float4_e2m1fn_x2", "signed char", "unsigned char",
})
_FP32 = frozenset({"float"})
_E8M0 = frozenset({"c10::Float8_e8m0fnu", "unsigned char"})
_TENSOR_LIST = "TensorList"

# torch.nn.functional.ScalingType values (A recipe, B recipe) -> scale format
_RECIPES: dict[tuple[int, int], str] = {
    (4, 5): "fp32_block", (5, 4): "fp32_block", (4, 4): "fp32_block", (5, 5): "fp32_block",
    (3, 3): "ue8m0_1x32",
    (1, 1): "per_row",
    (0, 0): "per_tensor",
}


@dataclass(frozen=True)
class Layout:
    a: int
    b: int
    b_nk: bool = False  # B recorded as [N, K] (a weight) rather than [K, N]
    a_batched: bool = False  # leading dims of A fold into M
    scales: tuple[int, int] | None = None  # None: the first two fp32/e8m0 tensors after A and B
    recipes: tuple[int, int] | None = None  # _v2 ops: the ScalarList arguments naming each scale's recipe
    grouped: bool = False  # B is [G, K, N]; A is [M_total, K] (with offs) or [G, M, K]


_LAYOUTS: dict[str, Layout] = {
    "aten::mm": Layout(0, 1),
    "aten::_scaled_mm": Layout(0, 1, scales=(2, 3)),
    "aten::_scaled_mm_v2": Layout(0, 1, scales=(2, 5), recipes=(3, 6)),
    "aten::_scaled_grouped_mm": Layout(0, 1, scales=(2, 3), grouped=True),
    "aten::_scaled_grouped_mm_v2": Layout(0, 1, scales=(2, 5), recipes=(3, 6), grouped=True),
    "aten::addmm": Layout(1, 2),
    "aten::_addmm_activation": Layout(1, 2),
    "aten::matmul": Layout(0, 1, a_batched=True),
    "aten::linear": Layout(0, 1, b_nk=True, a_batched=True),
    "_C::cutlass_scaled_mm": Layout(1, 2, scales=(3, 4)),
}
# aiter (aiter::gemm_a8w8_blockscale_ck, ...) and vLLM's aiter wrappers
# (vllm::rocm_aiter_gemm_w8a8_blockscale): A [M, K], B [N, K], scales follow.
_CUSTOM_NK = re.compile(r"::(?:\w*_)?gemm_(?:a\d+w\d+|w\d+a\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class MoeLayout:
    hidden: int  # argument holding the tokens' rows: [M, K] or [M, topk, K]
    w1: int | None
    w2: int | None
    stage: str | None  # the stage the op runs; None: both (the launch sequence decides)


_MOE_LAYOUTS: dict[str, MoeLayout] = {
    "aiter::ck_moe_stage1": MoeLayout(0, 1, None, "stage1"),
    "aiter::ck_moe_stage2": MoeLayout(0, None, 2, "stage2"),
    "aiter::fused_moe_": MoeLayout(0, 1, 2, None),
    "vllm::inplace_fused_experts": MoeLayout(0, 1, 2, None),
    "vllm::outplace_fused_experts": MoeLayout(0, 1, 2, None),
}


@dataclass(frozen=True)
class OpGemm:
    """The GEMM an op ran: shape, A's dtype and the operand scale format where stated."""

    M: int
    N: int
    K: int
    groups: int | None = None
    dtype: str | None = None
    scale_format: str | None = None
    stage: str | None = None  # MoE ops that run one stage


def _dims(value: Any) -> list[int] | None:
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(d, int) and not isinstance(d, bool) and 0 < d <= MAX_DIM for d in value):
        return None
    return value


def _layout(op_name: str) -> Layout | None:
    found = _LAYOUTS.get(op_name)
    if found is None and not op_name.startswith("aten::") and _CUSTOM_NK.search(op_name):
        return Layout(0, 1, b_nk=True)
    return found


def _arg(seq: Any, i: int) -> Any:
    return seq[i] if isinstance(seq, list) and 0 <= i < len(seq) else None


def is_gemm_op(op_name: str) -> bool:
    return _layout(op_name) is not None or op_name in _MOE_LAYOUTS


def op_gemm(op: OpCall | None, stage: str | None = None) -> OpGemm | None:
    """The GEMM of a recorded op call (see the tables), or None when unknown. ``stage``
    picks the GEMM of a MoE op that runs both stages."""
    if op is None:
        return None
    moe = _MOE_LAYOUTS.get(op.name)
    if moe is not None:
        return _moe_gemm(op, moe, stage)
    layout = _layout(op.name)
    if layout is None or not isinstance(op.input_dims, list):
        return None
    shape = _shape(layout, op.input_dims)
    if shape is None:
        return None
    m, n, k, groups = shape
    types = op.input_types if isinstance(op.input_types, list) else []
    a_type = _arg(types, layout.a)
    dtype = TORCH_DTYPES.get(a_type) if isinstance(a_type, str) else None
    return OpGemm(m, n, k, groups, dtype, _scale_format(layout, op, m, n, k))


def _shape(layout: Layout, input_dims: list) -> tuple[int, int, int, int | None] | None:
    a, b = _dims(_arg(input_dims, layout.a)), _dims(_arg(input_dims, layout.b))
    if a is None or b is None:
        return None
    groups = None
    if layout.grouped:
        if len(b) != 3 or len(a) not in (2, 3):
            return None
        groups, kb, n = b
        if len(a) == 3 and a[0] != groups:
            return None
        m, k = math.prod(a[:-1]), a[-1]
    else:
        if len(b) != 2 or (len(a) != 2 and not (layout.a_batched and len(a) > 2)):
            return None
        m, k = math.prod(a[:-1]), a[-1]
        n, kb = (b[0], b[1]) if layout.b_nk else (b[1], b[0])
    if k != kb or m > MAX_DIM:
        return None
    return m, n, k, groups


def _recipe(concrete: Any, i: int) -> int | None:
    text = _arg(concrete, i)
    if not isinstance(text, str):
        return None
    m = re.fullmatch(r"\s*\[\s*(\d+)\s*\]\s*", text)
    return int(m.group(1)) if m else None


def _scale_format(layout: Layout, op: OpCall, m: int, n: int, k: int) -> str | None:
    types = op.input_types if isinstance(op.input_types, list) else []
    if _arg(types, layout.a) not in _QUANTISED:
        return None
    if layout.recipes is not None:
        ra, rb = (_recipe(op.concrete_inputs, i) for i in layout.recipes)
        return _RECIPES.get((ra, rb)) if ra is not None and rb is not None else None
    dims = op.input_dims
    if layout.scales is not None:
        picked = [(_arg(dims, i), _arg(types, i)) for i in layout.scales]
    else:
        picked = [
            (d, t) for i, (d, t) in enumerate(zip(dims, types))
            if i not in (layout.a, layout.b) and isinstance(t, str) and t in (_FP32 | _E8M0) and isinstance(d, list)
        ][:2]
    if len(picked) < 2 or not all(isinstance(t, str) and isinstance(d, list) for d, t in picked):
        return None
    (sa, ta), (sb, tb) = picked
    kb, nb, k32 = -(-k // 128), -(-n // 128), -(-k // 32)
    fits = []
    if ta in _FP32 and tb in _FP32:
        if sa in ([m, kb], [kb, m]) and sb in ([nb, kb], [kb, nb]):
            fits.append("fp32_block")
        if sa in ([m, 1], [m]) and (sb in ([1, n], [n, 1], [n]) or (layout.grouped and len(sb) == 2 and sb[1] == n)):
            fits.append("per_row")
        if sa in ([], [1]) and sb in ([], [1]):
            fits.append("per_tensor")
    if ta in _E8M0 and tb in _E8M0 and sa in ([m, k32], [k32, m]) and sb in ([n, k32], [k32, n]):
        fits.append("ue8m0_1x32")
    return fits[0] if len(fits) == 1 else None


def _moe_gemm(op: OpCall, layout: MoeLayout, stage: str | None) -> OpGemm | None:
    dims = op.input_dims if isinstance(op.input_dims, list) else []
    types = op.input_types if isinstance(op.input_types, list) else []
    hidden = _dims(_arg(dims, layout.hidden))
    if hidden is None or len(hidden) not in (2, 3):
        return None
    stage = layout.stage or stage
    m = hidden[0]
    w1, w2 = (_dims(_arg(dims, i)) if i is not None else None for i in (layout.w1, layout.w2))
    if stage == "stage1" and w1 is not None and len(w1) == 3 and w1[2] == hidden[-1]:
        experts, n, k = w1
    elif stage == "stage2" and w2 is not None and len(w2) == 3:
        experts, n, k = w2
        # stage-2 ops take the intermediate states (K = I); fused ops the hidden states (N = model dim)
        if (k if layout.stage == "stage2" else n) != hidden[-1]:
            return None
    else:
        return None
    # a quantised MoE quantises the bf16 hidden states inside the op: the weights say the dtype
    w_type = _arg(types, layout.w1 if stage == "stage1" else layout.w2)
    a_type = w_type if w_type in _QUANTISED else _arg(types, layout.hidden)
    dtype = TORCH_DTYPES.get(a_type) if isinstance(a_type, str) else None
    return OpGemm(m, n, k, experts, dtype, None, stage)

"""The emulator's acceptance cases: Triton kernels for gfx950, emulated, checked against torch.

``run_case(name, dims, seed)`` compiles (cached) ``CASES[name]``, makes inputs, runs the
code object on the emulator and returns ``CaseResult``: the launch report and the
comparison with the torch reference. Exact cases (casts, integer data paths) must match
bit for bit; GEMMs and reductions within f32 accumulation-order rounding (``tolerance``:
a bound relative to the sum of |terms|, the rounding a different summation order can
cause).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from verifiers.gfx950.emulator.dispatch import launch
from verifiers.gfx950.emulator.report import EmulatedLaunch
from verifiers.gfx950.emulator.validation import setups
from verifiers.gfx950.emulator.validation.triton_compile import compile_for_gfx950


@dataclass(frozen=True)
class TritonCase:
    kernel: str  # attribute of triton_kernels
    signature: dict[str, str]
    constexprs: dict[str, int]
    options: dict[str, Any]
    divisible: tuple[str, ...]
    setup: Callable[[dict, int], tuple[list, dict, Callable[[], dict]]]  # -> (args, outputs, reference)
    grid: Callable[[dict], tuple[int, ...]]
    dims: dict[str, int] = field(default_factory=dict)
    exact: bool = False  # bit-exact (else: within accumulation-order rounding)
    description: str = ""
    #: the bound is max |magnitude| * 2^-ulp_bits (20: f32 accumulation order; 8: a bf16 output)
    ulp_bits: int = 20
    #: elementwise bound: the reference's magnitude is a tensor of per-element allowed errors and
    #: the reported error is max(|got - want| / allowed) against a bound of 1
    elementwise: bool = False


class CaseResult(BaseModel):
    case: str
    dims: dict[str, int]
    exact: bool
    report: EmulatedLaunch
    max_error: dict[str, float]  # output -> max |emulated - reference| (bit mismatches for exact cases)
    bound: dict[str, float]  # output -> allowed max error
    ok: bool


def _gemm_setup(dtype: str):
    def setup(d: dict, seed: int):
        import torch

        g = torch.Generator().manual_seed(seed)
        m, n, k = d["M"], d["N"], d["K"]
        if dtype in ("fp8", "bf8"):
            t = torch.float8_e4m3fn if dtype == "fp8" else torch.float8_e5m2
            a = (torch.randn(m, k, generator=g) * 2).to(t)
            b = (torch.randn(n, k, generator=g) * 2).to(t)
        else:
            a = torch.randn(m, k, generator=g).to(torch.bfloat16)
            b = torch.randn(n, k, generator=g).to(torch.bfloat16)
        c = torch.full((m, n), float("nan"))

        def ref():
            a64, b64 = a.double(), b.double()
            return {"c": (a64 @ b64.T, a64.abs() @ b64.abs().T)}

        return [a, b, c, m, n, k], {"c": c}, ref

    return setup


def _mx_setup(d: dict, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    m, n, k = d["M"], d["N"], d["K"]
    a = (torch.randn(m, k, generator=g) * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, generator=g) * 2).to(torch.float8_e4m3fn)
    sa = torch.randint(118, 136, (m, k // 32), dtype=torch.uint8, generator=g)
    sb = torch.randint(118, 136, (n, k // 32), dtype=torch.uint8, generator=g)
    c = torch.full((m, n), float("nan"))

    def ref():
        A = a.double() * torch.pow(2.0, sa.double() - 127).repeat_interleave(32, 1)
        B = b.double() * torch.pow(2.0, sb.double() - 127).repeat_interleave(32, 1)
        return {"c": (A @ B.T, A.abs() @ B.abs().T)}

    return [a, sa, b, sb, c, m, n, k], {"c": c}, ref


def _reduce_setup(d: dict, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(d["M"], d["N"], generator=g)
    s, mx = torch.full((d["M"],), float("nan")), torch.full((d["M"],), float("nan"))

    def ref():
        return {"sum": (x.double().sum(1), x.double().abs().sum(1)), "max": (x.max(1).values.double(), None)}

    return [x, s, mx, d["N"]], {"sum": s, "max": mx}, ref


def _cast_setup(d: dict, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    n = d["n"]
    x = torch.randn(n, generator=g) * 120
    special = torch.tensor([0.0, -0.0, 448.0, 464.0, 465.0, -470.0, 1e6, -1e6, 2.0**-9, 2.0**-10, 1.5 * 2.0**-10,
                            57344.0, 61440.0, 1e-30, 3 * 2.0**-17])
    x[: special.numel()] = special
    y4 = torch.zeros(n, dtype=torch.uint8)
    y5 = torch.zeros(n, dtype=torch.uint8)

    def ref():
        # Triton's fp32 -> fp8 cast: round to nearest even, finite overflow saturates
        return {"e4m3": (x.clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8), None),
                "e5m2": (x.clamp(-57344, 57344).to(torch.float8_e5m2).view(torch.uint8), None)}

    return [x, y4, y5, n], {"e4m3": y4, "e5m2": y5}, ref


def _upcast_setup(d: dict, seed: int):
    import torch

    n = d["n"]
    x = torch.arange(n, dtype=torch.int32).remainder(256).to(torch.uint8)
    y = torch.full((n,), 1234.5)

    def ref():
        return {"y": (x.view(torch.float8_e4m3fn).float(), None)}

    return [x, y, n], {"y": y}, ref


_GEMM_SIG = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
_MNK = ("M", "N", "K")
_TILE = {"BM": 64, "BN": 64, "BK": 128}


def _gemm_grid(d: dict) -> tuple[int, ...]:
    return (d["M"] // 64, d["N"] // 64)


CASES: dict[str, TritonCase] = {
    "fp8_gemm_16x16x128": TritonCase(
        "gemm_kernel", _GEMM_SIG, _TILE, {"num_warps": 4, "matrix_instr_nonkdim": 16}, _MNK, _gemm_setup("fp8"),
        _gemm_grid, {"M": 128, "N": 128, "K": 256}, description="fp8 e4m3 tl.dot -> v_mfma_f32_16x16x128_f8f6f4"),
    "fp8_gemm_32x32x64": TritonCase(
        "gemm_kernel", _GEMM_SIG, _TILE, {"num_warps": 4, "matrix_instr_nonkdim": 32}, _MNK, _gemm_setup("fp8"),
        _gemm_grid, {"M": 128, "N": 128, "K": 256}, description="fp8 e4m3 tl.dot -> v_mfma_f32_32x32x64_f8f6f4"),
    "bf8_gemm_16x16x128": TritonCase(
        "gemm_kernel", dict(_GEMM_SIG, a_ptr="*fp8e5", b_ptr="*fp8e5"), _TILE,
        {"num_warps": 4, "matrix_instr_nonkdim": 16}, _MNK, _gemm_setup("bf8"), _gemm_grid,
        {"M": 128, "N": 64, "K": 256},
        description="fp8 e5m2 tl.dot -> v_mfma_f32_16x16x128_f8f6f4 with cbsz:1 blgp:1 (bf8 format selectors)"),
    "bf16_gemm": TritonCase(
        "gemm_kernel", dict(_GEMM_SIG, a_ptr="*bf16", b_ptr="*bf16"), {"BM": 64, "BN": 64, "BK": 64},
        {"num_warps": 4}, _MNK, _gemm_setup("bf16"), _gemm_grid, {"M": 128, "N": 64, "K": 192},
        description="bf16 tl.dot -> v_mfma_f32_32x32x16_bf16"),
    "mxfp8_dot_scaled": TritonCase(
        "mxfp8_gemm_kernel",
        {"a_ptr": "*fp8e4nv", "as_ptr": "*u8", "b_ptr": "*fp8e4nv", "bs_ptr": "*u8", "c_ptr": "*fp32",
         "M": "i32", "N": "i32", "K": "i32"},
        _TILE, {"num_warps": 4}, _MNK, _mx_setup, _gemm_grid, {"M": 128, "N": 64, "K": 256},
        description="tl.dot_scaled e4m3 x e4m3 with e8m0 scales -> v_mfma_scale_f32_32x32x64_f8f6f4"),
    "row_reduce": TritonCase(
        "row_reduce_kernel", {"x_ptr": "*fp32", "sum_ptr": "*fp32", "max_ptr": "*fp32", "N": "i32"},
        {"BLOCK": 1024}, {"num_warps": 4}, ("N",), _reduce_setup, lambda d: (d["M"],), {"M": 8, "N": 1000},
        description="tl.sum / tl.max over a row: DPP row ops, cross-wave LDS exchange"),
    "fp8_cast": TritonCase(
        "fp8_cast_kernel", {"x_ptr": "*fp32", "y4_ptr": "*fp8e4nv", "y5_ptr": "*fp8e5", "n": "i32"},
        {"BLOCK": 1024}, {"num_warps": 4}, ("n",), _cast_setup, lambda d: (-(-d["n"] // 1024),), {"n": 5000},
        exact=True, description="fp32 -> e4m3 / e5m2 (v_cvt_scalef32_pk_{fp8,bf8}_f32 under MODE fp8 saturation)"),
    "fp8_upcast": TritonCase(
        "fp8_upcast_kernel", {"x_ptr": "*fp8e4nv", "y_ptr": "*fp32", "n": "i32"}, {"BLOCK": 1024},
        {"num_warps": 4}, ("n",), _upcast_setup, lambda d: (-(-d["n"] // 1024),), {"n": 4096}, exact=True,
        description="every e4m3 code -> fp32 (v_cvt_scalef32_pk_f32_fp8)"),
    # ---- issue 26: what Triton emits beyond plain GEMMs (setups in ``setups``)
    "fp8_gemm_masked_tail": TritonCase(
        "gemm_masked_kernel", _GEMM_SIG, _TILE, {"num_warps": 4, "matrix_instr_nonkdim": 16}, (),
        setups.masked_gemm_setup, lambda d: (-(-d["M"] // 64), -(-d["N"] // 64)), {"M": 100, "N": 72, "K": 200},
        description="fp8 a[M,K] @ b[K,N] with M, N, K tails masked: B read K-major with ds_read_b64_tr_b8"),
    "softmax_rescale": TritonCase(
        "softmax_kernel", {"x_ptr": "*fp32", "y_ptr": "*fp32", "N": "i32"}, {"BLOCK": 1024}, {"num_warps": 4},
        ("N",), setups.softmax_setup, lambda d: (d["M"],), {"M": 8, "N": 1000}, elementwise=True,
        description="row softmax over ~125 of range: IEEE division with v_div_scale rescaling denormal quotients"),
    "mxfp8_dot_scaled_16x16x128": TritonCase(
        "mxfp8_gemm_kernel",
        {"a_ptr": "*fp8e4nv", "as_ptr": "*u8", "b_ptr": "*fp8e4nv", "bs_ptr": "*u8", "c_ptr": "*fp32",
         "M": "i32", "N": "i32", "K": "i32"},
        {"BM": 64, "BN": 64, "BK": 256}, {"num_warps": 4, "matrix_instr_nonkdim": 16}, _MNK, _mx_setup, _gemm_grid,
        {"M": 64, "N": 128, "K": 512},
        description="tl.dot_scaled e4m3 with e8m0 scales -> v_mfma_scale_f32_16x16x128_f8f6f4, scale bytes "
                    "selected by op_sel / op_sel_hi (all four); the per-32-K scales make the lanes' K order matter"),
    "fp8_chained_dot": TritonCase(
        "chained_dot_kernel", {"q_ptr": "*fp8e4nv", "k_ptr": "*fp8e4nv", "v_ptr": "*fp8e4nv", "o_ptr": "*fp32"},
        {"D": 128, "BM": 64, "BN": 64}, {"num_warps": 4, "matrix_instr_nonkdim": 16}, (),
        setups.chained_dot_setup("fp8"), lambda d: (1,), {"D": 128, "BM": 64, "BN": 64},
        description="fp8 (q k^T) v: MFMA result -> A operand through v_permlane16/32_swap, v read with "
                    "ds_read_b64_tr_b8, v_mfma_f32_16x16x32_fp8_fp8"),
    "bf16_chained_dot": TritonCase(
        "chained_dot_kernel", {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*fp32"},
        {"D": 128, "BM": 64, "BN": 64}, {"num_warps": 4, "matrix_instr_nonkdim": 16}, (),
        setups.chained_dot_setup("bf16"), lambda d: (1,), {"D": 128, "BM": 64, "BN": 64},
        description="bf16 (q k^T) v: v read with ds_read_b64_tr_b16"),
    "bf16_gemm_bf16_out": TritonCase(
        "gemm_kernel", dict(_GEMM_SIG, a_ptr="*bf16", b_ptr="*bf16", c_ptr="*bf16"), {"BM": 64, "BN": 64, "BK": 64},
        {"num_warps": 4, "matrix_instr_nonkdim": 32}, _MNK, setups.bf16_out_gemm_setup, _gemm_grid,
        {"M": 128, "N": 64, "K": 128}, ulp_bits=8,
        description="bf16 GEMM with a bf16 C: the 32x32 result rows regrouped by v_permlane32_swap before the store"),
    "atomics": TritonCase(
        "atomics_kernel",
        {"x_ptr": "*fp32", "sum_ptr": "*fp32", "cnt_ptr": "*i32", "max_ptr": "*fp32", "acc_ptr": "*fp32",
         "old_ptr": "*fp32", "flag_ptr": "*i32", "prev_ptr": "*i32", "n": "i32"},
        {"NB": 16, "BLOCK": 256}, {"num_warps": 4}, ("n",), setups.atomics_setup, lambda d: (d["n"] // 256,),
        {"n": 2048, "NB": 16},
        description="tl.atomic_add (f32, i32; 4 lanes of a wave per word, no return / distinct words, returned), "
                    "atomic_max on f32 "
                    "(smax / umin), atomic_cas returned"),
}


def binary(name: str):  # noqa: ANN201 - TritonBinary
    from verifiers.gfx950.emulator.validation import triton_kernels  # lazy: keeps triton off this module's import path

    c = CASES[name]
    return compile_for_gfx950(getattr(triton_kernels, c.kernel), c.signature, c.constexprs, c.options, c.divisible)


def run_case(name: str, dims: dict | None = None, seed: int = 0, code: bytes | None = None) -> CaseResult:
    """Emulate case ``name`` (``code``: a replacement code object, e.g. a patched one)."""
    import torch


    c = CASES[name]
    d = dict(c.dims if dims is None else dims)
    b = binary(name)
    args, outputs, reference = c.setup(d, seed)
    report = launch(b.hsaco if code is None else code, b.name, c.grid(d), b.block, args + [None, None],
                    dynamic_lds_bytes=b.shared)
    ref = reference()
    max_error, bound = {}, {}
    for key, (want, magnitude) in ref.items():
        got = outputs[key]
        if c.exact:
            if got.dtype.is_floating_point:
                same = (got == want) | (torch.isnan(got) & torch.isnan(want))
            else:
                same = got == want
            max_error[key], bound[key] = float((~same).sum()), 0.0
        else:
            err = (got.double() - want.double()).abs()
            err = torch.where(torch.isnan(err), torch.full_like(err, float("inf")), err)
            if c.elementwise:
                max_error[key], bound[key] = float((err / magnitude).max()), 1.0
                continue
            max_error[key] = float(err.max())
            # f32 accumulation-order rounding: a few ulp of the sum of |terms|
            scale = magnitude.abs().max() if magnitude is not None else want.abs().max()
            bound[key] = float(scale * 2.0**-c.ulp_bits)
    ok = all(max_error[k] <= bound[k] for k in max_error)
    return CaseResult(case=name, dims=d, exact=c.exact, report=report, max_error=max_error, bound=bound, ok=ok)

"""Inputs and torch references of the acceptance cases added for issue 26 (masked tails,
IEEE division, transpose reads, lane swaps, scaled 16x16x128 MFMA, atomics).

Each ``setup(dims, seed) -> (args, outputs, reference)`` as ``triton_cases.TritonCase``
wants it; ``reference()`` maps output -> (want, magnitude): the bound is derived from the
magnitude (see ``TritonCase.ulp_bits`` / ``elementwise``), a zero magnitude asks for an
exact match.
"""
from __future__ import annotations


def masked_gemm_setup(d: dict, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    m, n, k = d["M"], d["N"], d["K"]
    a = (torch.randn(m, k, generator=g) * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(k, n, generator=g) * 2).to(torch.float8_e4m3fn)  # [K, N]: N contiguous
    c = torch.full((m, n), float("nan"))

    def ref():
        a64, b64 = a.double(), b.double()
        return {"c": (a64 @ b64, a64.abs() @ b64.abs())}

    return [a, b, c, m, n, k], {"c": c}, ref


def softmax_setup(d: dict, seed: int):
    """Rows spanning ~125 in x: exp(x - max) runs through the f32 denormals down to 0, so
    the division's numerators need v_div_scale's rescaling (and 0 / sum its NaN path)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    m, n = d["M"], d["N"]
    x = torch.rand(m, n, generator=g) * -125.0 + 5.0
    y = torch.full((m, n), float("nan"))

    def ref():
        x64 = x.double()
        z = x64 - x64.max(1, keepdim=True).values
        want = torch.softmax(x64, 1)
        # f32 exp of an argument rounded to f32: relative error ~ |z| * 2^-24 * ln 2 per step;
        # the bound allows a few of those plus a few denormal ulps (2^-149) where it underflows
        allowed = want * (z.abs() * 2.0**-21 + 2.0**-19) + 2.0**-147
        return {"y": (want, allowed)}

    return [x, y, n], {"y": y}, ref


def _sparse_signs(rows: int, cols: int, per_row: int, g):  # noqa: ANN001
    """{-1, 0, 1} matrix with ``per_row`` non-zeros per row: any dot of two rows is an integer
    of magnitude <= per_row, exact in fp8 e4m3 and bf16 (so the cast between the dots is exact)."""
    import torch

    out = torch.zeros(rows, cols)
    for r in range(rows):
        cols_ = torch.randperm(cols, generator=g)[:per_row]
        out[r, cols_] = torch.randint(0, 2, (per_row,), generator=g).float() * 2 - 1
    return out


def chained_dot_setup(dtype: str):
    def setup(d: dict, seed: int):
        import torch

        t = torch.float8_e4m3fn if dtype == "fp8" else torch.bfloat16
        g = torch.Generator().manual_seed(seed)
        bm, bn, dd = d["BM"], d["BN"], d["D"]
        q = _sparse_signs(bm, dd, 16, g).to(t)
        k = _sparse_signs(bn, dd, 16, g).to(t)
        v = (torch.randn(bn, dd, generator=g) * 2).to(t)
        o = torch.full((bm, dd), float("nan"))

        def ref():
            p = q.double() @ k.double().T  # integers in [-16, 16]: the cast to q's type is exact
            return {"o": (p @ v.double(), p.abs() @ v.double().abs())}

        return [q, k, v, o], {"o": o}, ref

    return setup


def bf16_out_gemm_setup(d: dict, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    m, n, k = d["M"], d["N"], d["K"]
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    c = torch.full((m, n), float("nan"), dtype=torch.bfloat16)

    def ref():
        a64, b64 = a.double(), b.double()
        return {"c": (a64 @ b64.T, a64.abs() @ b64.abs().T)}

    return [a, b, c, m, n, k], {"c": c}, ref


def atomics_setup(d: dict, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    n, nb = d["n"], d["NB"]
    x = torch.randn(n, generator=g)
    sums = torch.zeros(nb)
    cnt = torch.zeros(nb, dtype=torch.int32)
    mx = torch.full((nb,), float("-inf"))
    acc = torch.randn(n, generator=g)
    acc0 = acc.clone()
    old = torch.full((n,), float("nan"))
    flag = torch.where(torch.arange(n) % 3 == 0, 0, 7).to(torch.int32)
    flag0 = flag.clone()
    prev = torch.full((n,), -1, dtype=torch.int32)

    def ref():
        bins = torch.arange(n) % nb
        want_sum = torch.zeros(nb, dtype=torch.float64).index_add_(0, bins, x.double())
        mag = torch.zeros(nb, dtype=torch.float64).index_add_(0, bins, x.double().abs())
        want_max = torch.full((nb,), float("-inf")).scatter_reduce(0, bins, x, "amax")
        exact = lambda t: (t, torch.zeros_like(t, dtype=torch.float64))  # noqa: E731
        return {
            "sum": (want_sum, mag),  # f32 adds in some order: accumulation rounding
            "cnt": exact(torch.bincount(bins, minlength=nb).to(torch.int32)),
            "max": exact(want_max),
            "acc": exact(acc0 + x),  # one f32 add per word: exact against torch's f32 add
            "old": exact(acc0),
            "flag": exact(torch.where(flag0 == 0, torch.arange(n, dtype=torch.int32) + 1, flag0)),
            "prev": exact(flag0),
        }

    args = [x, sums, cnt, mx, acc, old, flag, prev, n]
    return args, {"sum": sums, "cnt": cnt, "max": mx, "acc": acc, "old": old, "flag": flag, "prev": prev}, ref

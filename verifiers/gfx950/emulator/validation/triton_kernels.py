"""The Triton kernels the emulator is validated against (compiled for gfx950, never run by Triton).

Kept deliberately plain: each exercises one family of instructions the cards' FlyDSL
kernels also use (fp8 / scaled / bf16 MFMA, cross-lane reductions, fp8 conversions).
"""
import triton
import triton.language as tl


@triton.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c[M, N] (fp32) = a[M, K] @ b[N, K]^T, both K-contiguous; fp8 e4m3 or bf16 (the signature decides)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + rn[:, None] * K + (k + rk)[None, :])
        acc += tl.dot(a, tl.trans(b))
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def mxfp8_gemm_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c = (a * 2^(as-127)) @ (b * 2^(bs-127))^T with one e8m0 scale per 32 K; a [M, K], b [N, K] e4m3,
    as [M, K/32], bs [N, K/32] uint8, c fp32 [M, N]: lowers to the scaled MFMA."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    rs = tl.arange(0, BK // 32)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + rn[:, None] * K + (k + rk)[None, :])
        sa = tl.load(as_ptr + rm[:, None] * (K // 32) + (k // 32 + rs)[None, :])
        sb = tl.load(bs_ptr + rn[:, None] * (K // 32) + (k // 32 + rs)[None, :])
        acc = tl.dot_scaled(a, sa, "e4m3", tl.trans(b), sb, "e4m3", acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def row_reduce_kernel(x_ptr, sum_ptr, max_ptr, N, BLOCK: tl.constexpr):
    """Per row of x [M, N] fp32: sum and max (cross-lane and cross-wave reductions)."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0)
    tl.store(sum_ptr + row, tl.sum(x, axis=0))
    xm = tl.where(mask, x, -float("inf"))
    tl.store(max_ptr + row, tl.max(xm, axis=0))


@triton.jit
def fp8_cast_kernel(x_ptr, y4_ptr, y5_ptr, n, BLOCK: tl.constexpr):
    """fp32 -> fp8 e4m3 and e5m2 (round to nearest even, saturating as Triton defines it)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y4_ptr + offs, x.to(tl.float8e4nv), mask=mask)
    tl.store(y5_ptr + offs, x.to(tl.float8e5), mask=mask)


@triton.jit
def fp8_upcast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """fp8 e4m3 -> fp32 (the decode side)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x.to(tl.float32), mask=mask)


@triton.jit
def gemm_masked_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c[M, N] = a[M, K] @ b[K, N] (B N-contiguous) with every edge masked: the M, N and K
    tails. fp8: B goes through LDS K-major, read back with ds_read_b64_tr_b8."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def softmax_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    """Row softmax of x [M, N] fp32; the division is IEEE (v_div_scale / fmas / fixup)."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * N + offs, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def chained_dot_kernel(q_ptr, k_ptr, v_ptr, o_ptr, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    """o = (q @ k^T).to(q's type) @ v for one tile (attention without the softmax): the first
    dot's result becomes the second's A operand in registers (v_permlane*_swap on gfx950)."""
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    k = tl.load(k_ptr + rn[:, None] * D + rd[None, :])
    v = tl.load(v_ptr + rn[:, None] * D + rd[None, :])
    s = tl.dot(q, tl.trans(k))
    tl.store(o_ptr + rm[:, None] * D + rd[None, :], tl.dot(s.to(q.dtype), v))


@triton.jit
def atomics_kernel(x_ptr, sum_ptr, cnt_ptr, max_ptr, acc_ptr, old_ptr, flag_ptr, prev_ptr, n,
                   NB: tl.constexpr, BLOCK: tl.constexpr):
    """Atomics as Triton emits them: colliding f32 / i32 adds and a float max into NB bins
    (no return), an f32 add and a compare-and-swap on distinct words with the old value
    returned. ``n`` must be a multiple of BLOCK (tl.atomic_cas takes no mask)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.atomic_add(sum_ptr + offs % NB, x, mask=mask)
    tl.atomic_add(cnt_ptr + offs % NB, 1, mask=mask)
    tl.atomic_max(max_ptr + offs % NB, x, mask=mask)
    tl.store(old_ptr + offs, tl.atomic_add(acc_ptr + offs, x, mask=mask), mask=mask)
    tl.store(prev_ptr + offs, tl.atomic_cas(flag_ptr + offs, offs * 0, offs + 1), mask=mask)

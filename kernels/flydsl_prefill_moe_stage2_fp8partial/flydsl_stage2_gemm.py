"""FlyDSL gfx950 grouped-MoE stage-2 down-projection GEMM with the partial store fused into
its epilogue: ``cshuffle_pf8`` (fp8 partials, scale ``s``) or the bf16-partial baseline.

For each 64-row expert block ``b`` of the sorted routing (``sorted_ids``, ``block_expert``)
and each 64-column tile of N, the CTA computes ``acc[r, n] = a2[f_r] . w2[e_b, n]`` (bf16
operands, fp32 accumulation, ``v_mfma_f32_16x16x32_bf16``: the card keeps the datapath at
bf16) and its epilogue writes the partial row ``f_r = sorted_ids[64 b + r]`` (a scatter
into (token, slot) order):

* ``pf8``: ``e4m3(clamp((acc * w[f_r]) * s, +-448))`` (``v_cvt_pk_fp8_f32``): the same
  rounding order as every other arm; ``s`` is a ``Constexpr`` of the kernel and its name
  ``moe2_gemm_cshuffle_pf8_s<hex>`` is built from the same value (``naming.gemm_name``), so
  the scale is part of the compiled program and of both cache identities (this module's
  ``lru_cache`` key and FlyDSL's JIT key), exactly like the ``infp8`` reducer's.
* bf16 (``scale=None``): ``bf16(acc * w[f_r])``, name ``moe2_gemm_bf16`` (the baseline).

The **cshuffle** store: the MFMA runs swap-ab (the w2 tile in the A slot), so a lane holds
four consecutive columns of one row; those go to an LDS tile of the CTA's 64 rows, and after
a barrier every thread stores whole 16-byte row chunks of the partial
(``buffer_store_dwordx4``). Padding rows (``f_r`` = the sentinel ``M * top_k``) read zeros and
their stores fall outside the partial's buffer descriptor, so the hardware drops them; blocks
past ``num_padded`` (``block_expert`` -1) run zero K steps.

Geometry: 256 threads = 4 waves; wave ``w`` owns columns ``[16 w, 16 w + 16)`` of the tile
and all 64 rows (4 MFMA tiles); per 32-K step a lane loads 16 bytes of each of its four a2
rows and of its w2 row (lane ``16 g + r``: row ``r``, K ``[8 g, 8 g + 8)``). ``N`` and ``K``
are compile-time (``N % 16 == 0``: the last column tile stores only its chunks below N;
``K % 8 == 0``: a K tail is one more step with the lane groups past K zeroed); M, top_k, E
and the routing are runtime.
Written against FlyDSL 0.5.0. Not run on silicon here (no gfx950 device).
"""
# No ``from __future__ import annotations``: FlyDSL reads the kernel annotations at trace time.
import functools
from typing import Any

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.fp8_format import E4M3_MAX, check_scale
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.naming import gemm_name
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.routing import ROUTE_BLOCK_M

BLOCK_N = 64
BLOCK_K = 32  # one v_mfma_f32_16x16x32_bf16 K step
WAVES = 4
THREADS = 64 * WAVES
TILES_M = ROUTE_BLOCK_M // 16  # 4 MFMA row tiles per expert block
FLAVOUR = "cshuffle"
#: how the producer applies ``s`` (negative variants exist only for the static gates and the
#: emulated parity): 'scaled' (the kernel), 'dropped' (the scale keyword dropped on the way
#: to the kernel, which then stores e4m3(acc * w) with the default 1.0 under a name still
#: tagged with ``s``: the reducer's 1/s then inflates every partial)
SCALE_MODES = ("scaled", "dropped")


def check_dims(n: int, k: int) -> None:
    if n <= 0 or n % 16:
        raise ValueError(f"N={n} must be a positive multiple of 16 (a 16-byte fp8 row chunk is all in or all out)")
    if k <= 0 or k % 8:
        raise ValueError(f"K={k} must be a positive multiple of 8 (a lane's 16-byte bf16 K chunk)")


@functools.lru_cache(maxsize=64)
def make_gemm(n: int, k: int, scale: "float | None", scale_mode: str = "scaled") -> Any:
    """The ``@flyc.jit`` launcher
    ``(A2, W2, SortedIds, BlockExpert, Wts, P, blocks, num_valid, stream)`` for one
    ``(N, K, scale)``: flat int32 word views of a2 [M*top_k, K] bf16, w2 [E, N, K] bf16 and
    the partial P [M*top_k, N] (fp8 bytes or bf16), int32 sorted_ids / block_expert, fp32
    weights [M*top_k]; ``blocks`` = len(sorted_ids) / 64, ``num_valid`` = M * top_k."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr import arith, const_expr, gpu, range_constexpr
    from flydsl.expr.typing import T
    from flydsl.expr.typing import Vector as Vec

    check_dims(n, k)
    if scale_mode not in SCALE_MODES:
        raise ValueError(f"scale_mode={scale_mode!r}; expected one of {SCALE_MODES}")
    pf8 = scale is not None
    s = check_scale(scale) if pf8 else 1.0
    s_code = s if scale_mode == "scaled" else 1.0
    name = gemm_name(pf8, s if pf8 else None, flavour=FLAVOUR if pf8 else "")
    steps = k // BLOCK_K  # whole 32-K steps; a K tail (K % 32, a multiple of 8) is one masked step
    k_tail_groups = (k % BLOCK_K) // 8  # lane groups g < this hold K of the tail step
    n_tiles = (n + BLOCK_N - 1) // BLOCK_N
    ragged_n = n % BLOCK_N != 0
    row_words = BLOCK_N // 4 if pf8 else BLOCK_N // 2  # LDS words per tile row: 64 fp8 or 64 bf16
    chunks = ROUTE_BLOCK_M * row_words // 4  # 16-byte chunks of the tile
    chunk_passes = chunks // THREADS

    @fx.struct
    class Tile:
        words: fx.Array[fx.Int32, ROUTE_BLOCK_M * row_words, 16]

    @flyc.kernel(name=name, known_block_size=[THREADS, 1, 1])
    def stage2_gemm(
        A2: fx.Tensor, W2: fx.Tensor, SortedIds: fx.Tensor, BlockExpert: fx.Tensor, Wts: fx.Tensor, P: fx.Tensor,
        num_valid: fx.Int32, S: fx.Constexpr[float],
    ):
        b = fx.block_idx.x
        nt = fx.block_idx.y
        tid = fx.thread_idx.x
        lane = tid % 64
        wave = tid // 64
        g = lane // 16
        r = lane % 16
        ld128 = fx.make_copy_atom(fx.rocdl.BufferCopy128b(), fx.Int32)
        st128 = fx.make_copy_atom(fx.rocdl.BufferCopy128b(), fx.Int32)

        def words(t, nbytes):
            buf = fx.rocdl.make_buffer_tensor(t, max_size=False, num_records_bytes=nbytes)
            return fx.logical_divide(buf, fx.make_layout(1, 1))

        nv64 = fx.Int64(num_valid)
        gA = words(A2, nv64 * (2 * k))  # sentinel rows (f = num_valid) read zeros
        gP = words(P, nv64 * (n if pf8 else 2 * n))  # stores to sentinel rows are dropped
        ids = fx.rocdl.make_buffer_tensor(SortedIds)
        wts = fx.rocdl.make_buffer_tensor(Wts, max_size=False)  # bounded: the sentinel row reads 0
        e = fx.rocdl.make_buffer_tensor(BlockExpert)[fx.Int32(b)]
        valid = e >= fx.Int32(0)
        e_safe = arith.select(valid, e, fx.Int32(0))
        trips = arith.select(valid, fx.Int32(steps), fx.Int32(0))  # blocks past num_padded: no K loop
        # w2 is [E, N, K] bf16 (7.5 GB at the DeepSeek shape): a buffer descriptor cannot span it
        # with 32-bit offsets, so the descriptor starts at this block's expert (64-bit base)
        w_slab = fx.add_offset(fx.get_iter(W2), fx.Int64(e_safe) * fx.Int64(n * k // 2))
        gW = words(fx.Tensor(fx.make_view(w_slab, fx.make_layout(n * k // 2, 1))), fx.Int64(n * k * 2))

        def load4(src, idx):
            frag = fx.make_rmem_tensor(4, fx.Int32)
            fx.copy(ld128, fx.slice(src, (None, fx.Int32(idx))), frag)
            return Vec(fx.memref_load_vec(frag))

        f_rows = [ids[fx.Int32(b * ROUTE_BLOCK_M + t * 16 + r)] for t in range_constexpr(TILES_M)]
        w_row = nt * BLOCK_N + wave * 16 + r  # this lane's row of the expert's w2 (an output column)
        zero4 = Vec.filled(4, 0.0, fx.Float32)

        def as_frag(value, width, dtype):
            frag = fx.make_rmem_tensor(width, dtype)
            frag.store(Vec(value))
            return frag

        def mma_step(step, accs_in, keep=None):
            """One 32-K step; ``keep`` (0/1 per lane) zeroes a K-tail lane group's operands."""
            kw = step * (BLOCK_K // 2) + g * 4  # word offset of K [8 g, 8 g + 8) in this step
            xw = load4(gW, w_row * (k // 2) + kw)
            if const_expr(keep is not None):
                xw = xw * keep
            x = xw.bitcast(fx.BFloat16)  # swap-ab: the w2 tile in the A slot
            out = []
            for t in range_constexpr(TILES_M):
                yw = load4(gA, f_rows[t] * (k // 2) + kw)
                if const_expr(keep is not None):
                    yw = yw * keep
                out.append(fx.rocdl.mfma_f32_16x16x32_bf16(T.vec(4, T.f32), [x, yw.bitcast(fx.BFloat16), Vec(accs_in[t])]))
            return out

        accs = [zero4] * TILES_M
        if const_expr(steps > 0):
            for step, state in range(fx.Int32(0), trips, fx.Int32(1), init=accs):
                results = yield mma_step(fx.Int32(step), state)
            accs = results
        if const_expr(k_tail_groups > 0):
            keep = Vec.filled(4, fx.Int32(arith.select(g < fx.Int32(k_tail_groups), fx.Int32(1), fx.Int32(0))), fx.Int32)
            accs = mma_step(fx.Int32(steps), accs, keep)

        # epilogue: lane (g, r) of row tile t holds row 16 t + r, columns 16 wave + 4 g .. + 3
        lds = fx.SharedAllocator().allocate(Tile).peek().words.ptr
        for t in range_constexpr(TILES_M):
            w = Vec.filled(4, wts[f_rows[t]], fx.Float32)  # the router weight, fp32, before s
            v = Vec(accs[t]) * w
            row = t * 16 + r
            if const_expr(pf8):
                q = [fx.min(fx.max(v[i] * S, fx.Float32(-E4M3_MAX)), fx.Float32(E4M3_MAX)) for i in range_constexpr(4)]
                lo = fx.rocdl.cvt_pk_fp8_f32(T.i32, q[0], q[1], fx.Int32(0), False)
                word = fx.rocdl.cvt_pk_fp8_f32(T.i32, q[2], q[3], lo, True)
                fx.ptr_store(fx.Int32(word), fx.add_offset(lds, row * row_words + wave * 4 + g))
            else:
                pair = v.truncf(T.vec(4, T.bf16)).bitcast(fx.Int32)
                for h in range_constexpr(2):
                    fx.ptr_store(pair[h], fx.add_offset(lds, row * row_words + wave * 8 + g * 2 + h))
        gpu.barrier()
        per_row = row_words // 4  # 16-byte chunks per tile row
        for p in range_constexpr(chunk_passes):
            chunk = p * THREADS + tid
            row = chunk // per_row
            cc = chunk % per_row
            vals = fx.make_view(fx.add_offset(lds, row * row_words + cc * 4), fx.make_layout(4, 1)).load()
            f = ids[fx.Int32(b * ROUTE_BLOCK_M + row)]
            dst = f * (n // 4 if pf8 else n // 2) + nt * row_words + cc * 4
            if const_expr(ragged_n):  # a chunk is whole (N % 16 == 0): past N it is skipped
                if fx.Int32(nt * BLOCK_N) + fx.Int32(cc * (16 if pf8 else 8)) < fx.Int32(n):
                    fx.copy(st128, as_frag(Vec(vals), 4, fx.Int32), fx.slice(gP, (None, fx.Int32(dst))))
            else:
                fx.copy(st128, as_frag(Vec(vals), 4, fx.Int32), fx.slice(gP, (None, fx.Int32(dst))))

    @flyc.jit
    def launch(
        A2: fx.Tensor, W2: fx.Tensor, SortedIds: fx.Tensor, BlockExpert: fx.Tensor, Wts: fx.Tensor, P: fx.Tensor,
        blocks: fx.Int32, num_valid: fx.Int32, stream: fx.Stream = fx.Stream(None),
    ):
        stage2_gemm(A2, W2, SortedIds, BlockExpert, Wts, P, num_valid, s_code).launch(
            grid=(blocks, n_tiles, 1), block=(THREADS, 1, 1), stream=stream)

    launch.kernel_name = name
    return launch


def _words(t: "Any") -> "Any":
    import torch

    if not t.is_contiguous():
        raise ValueError(f"stage-2 GEMM operand of shape {tuple(t.shape)} must be contiguous")
    return t.view(torch.uint8).view(-1).view(torch.int32) if t.element_size() == 1 else t.view(-1).view(torch.int32)


def launcher_args(inputs: dict, partial: "Any") -> tuple:
    """``(A2, W2, SortedIds, BlockExpert, Wts, P, blocks, num_valid)`` views (no copies)."""
    sorted_ids = inputs["sorted_ids"]
    return (_words(inputs["a2"]), _words(inputs["w2"]), sorted_ids, inputs["block_expert"],
            inputs["topk_weights"].reshape(-1), _words(partial), sorted_ids.numel() // ROUTE_BLOCK_M, partial.shape[0])


def check_partial(inputs: dict, partial: "Any", scale: "float | None") -> None:
    import torch

    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.oracle import dims_of

    d = dims_of(inputs)
    check_dims(d["N"], d["K"])
    pf8 = partial.dtype == torch.float8_e4m3fn
    if pf8 == (scale is None):
        raise ValueError("an fp8 partial store needs its scale; a bf16 store takes none")
    if not pf8 and partial.dtype != torch.bfloat16:
        raise TypeError(f"partial must be float8_e4m3fn or bfloat16, got {partial.dtype}")
    if tuple(partial.shape) != (d["M"] * d["top_k"], d["N"]):
        raise ValueError(f"partial must be [M*top_k={d['M'] * d['top_k']}, N={d['N']}], got {tuple(partial.shape)}")


def launcher(inputs: dict, partial: "Any", scale: "float | None"):
    """Compile once for these buffers and return ``(launch, kernel_name)`` (ROCm only)."""
    import torch

    import flydsl.compiler as flyc

    check_partial(inputs, partial, scale)
    d = inputs["w2"].shape
    fn = make_gemm(d[1], d[2], scale)
    args = launcher_args(inputs, partial)
    compiled = flyc.compile(fn, *args, torch.cuda.current_stream())

    def launch() -> None:
        compiled(*args, torch.cuda.current_stream())

    return launch, fn.kernel_name


def placeholder_args(n: int, k: int, pf8: bool, m: int = 16, top_k: int = 2, e: int = 4) -> tuple:
    """CPU tensors for a compile-only ``flyc.compile`` (M, E and the routing are runtime)."""
    import torch

    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.routing import padded_capacity

    rows = m * top_k
    cap = padded_capacity(m, e, top_k)
    i32 = torch.int32
    part_words = rows * n // 4 if pf8 else rows * n // 2
    return (torch.zeros(rows * k // 2, dtype=i32), torch.zeros(e * n * k // 2, dtype=i32), torch.zeros(cap, dtype=i32),
            torch.zeros(cap // ROUTE_BLOCK_M, dtype=i32), torch.zeros(rows), torch.zeros(part_words, dtype=i32),
            cap // ROUTE_BLOCK_M, rows)


def compile_args(n: int, k: int, scale: "float | None", scale_mode: str = "scaled") -> "tuple[Any, tuple]":
    """``(jit_fn, placeholder args)`` for the gfx950 gates."""
    return make_gemm(n, k, scale, scale_mode), placeholder_args(n, k, scale is not None)

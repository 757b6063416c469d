"""FlyDSL top-k reduce for gfx950: fp8 e4m3 partials in, ``* (1/s)`` per slot, fp32 sum,
bf16 out (and the bf16-partial baseline variant from the same code).

One workgroup of 256 threads reduces a ``1 x 256*V`` column tile of one token: each
thread issues one 16-byte buffer load per slot (V = 16 fp8 or 8 bf16 values), the
``top_k`` loads share one per-thread offset and go out back to back, then the thread
decodes (fp8: ``v_cvt_pk_f32_fp8``, two values per instruction, both halves of each
dword), unscales with the compile-time constant ``1/s``, sums the slots in order
0..top_k-1 in fp32 and stores its V bf16 results (``v_cvt_pk_bf16_f32``) with 16-byte
buffer stores. Grid: (M, ceil(N / (256 V))); when the tile does not divide N the threads
past the row end do nothing (the buffer descriptors are not range-checked).

Single source of truth for the scale: ``make_reduce(top_k, N, scale)`` takes the one
value, passes it to the kernel as a ``Constexpr[float]`` (so it is part of the traced
IR, which is FlyDSL's cache key) and names the kernel ``reduce_name(True, scale)``
(``moe_reduce_infp8_s<hex>``); the reciprocal is computed from that argument inside
the kernel body. ``make_reduce(top_k, N, None)`` is the ``moe_reduce_inbf16`` baseline.

Layout: the partial is [M*top_k, N] row-major (row ``t*top_k + j``), passed as a uint8
view for fp8; out is [M, N] bf16. Offsets are 32-bit: partial bytes must stay < 2^31.
Written against FlyDSL 0.5.0; compiled for gfx950 here (compile-only), run on MI355X.
"""
# No ``from __future__ import annotations`` here: FlyDSL reads the kernel parameters'
# annotations (``fx.Constexpr[float]``, ``fx.Tensor``) at trace time and must see objects.
import functools
from typing import TYPE_CHECKING, Any

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.fp8_format import check_scale
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.naming import reduce_name

if TYPE_CHECKING:  # pragma: no cover
    import torch

BLOCK = 256
MAX_OFFSET_BYTES = 1 << 31


def vec_width(in_fp8: bool) -> int:
    """Values per thread per slot: one 16-byte load."""
    return 16 if in_fp8 else 8


def tile_cols(in_fp8: bool) -> int:
    return BLOCK * vec_width(in_fp8)


def check_shape(top_k: int, n: int) -> None:
    if top_k < 1 or top_k > 16:
        raise ValueError(f"top_k must be in [1, 16], got {top_k}")
    if n % 16:
        raise ValueError(f"N must be a multiple of 16 (16-byte vectors), got {n}")


@functools.lru_cache(maxsize=64)
def make_reduce(top_k: int, n: int, scale: float | None) -> Any:
    """The ``@flyc.jit`` launcher ``(P, Y, M, stream)`` for one (top_k, N, scale)."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr import const_expr, gpu, range_constexpr
    from flydsl.expr.typing import T

    check_shape(top_k, n)
    in_fp8 = scale is not None
    s = check_scale(scale) if in_fp8 else 1.0
    V = vec_width(in_fp8)
    TILE = BLOCK * V
    ragged = n % TILE != 0
    name = reduce_name(in_fp8, s if in_fp8 else None)

    @flyc.kernel(name=name)
    def reduce_kernel(P: fx.Tensor, Y: fx.Tensor, S: fx.Constexpr[float]):
        token = gpu.block_id("x")
        tile = gpu.block_id("y")
        tid = gpu.thread_id("x")
        inv_s = 1.0 / S  # folded at trace time: the reciprocal of the one compile-time scale

        def body():
            pbuf = fx.rocdl.make_buffer_tensor(P)
            ybuf = fx.rocdl.make_buffer_tensor(Y)
            elem = fx.Int8 if const_expr(in_fp8) else fx.BFloat16
            load_atom = fx.make_copy_atom(fx.rocdl.BufferCopy128b(), elem)
            store_atom = fx.make_copy_atom(fx.rocdl.BufferCopy128b(), fx.BFloat16)
            tile_mn, tv = fx.make_layout_tv(fx.make_layout((1, BLOCK), (1, 1)), fx.make_layout((1, V), (1, 1)))
            thr_load = fx.make_tiled_copy(load_atom, tv, tile_mn).get_slice(tid)
            thr_store = fx.make_tiled_copy(store_atom, tv, tile_mn).get_slice(tid)

            frags = []
            for j in range_constexpr(top_k):  # issue every slot's load before decoding any
                row = fx.Int32(token) * fx.Int32(top_k) + fx.Int32(j)
                src = thr_load.partition_S(fx.slice(fx.zipped_divide(pbuf, tile_mn), (None, (row, tile))))
                frag = fx.make_fragment_like(src)
                fx.copy(load_atom, src, frag)
                frags.append(frag)

            acc = None
            for j in range_constexpr(top_k):
                raw = fx.Vector(fx.memref_load_vec(frags[j]))
                if const_expr(in_fp8):
                    words = raw.bitcast(fx.Int32)
                    lanes = []
                    for q in range_constexpr(V // 2):  # dword q // 2, low (q even) or high half
                        pair = fx.Vector(fx.rocdl.cvt_pk_f32_fp8(T.f32x2, words[q // 2], bool(q & 1)))
                        lanes.append(pair[0] * inv_s)  # unscale each slot before the sum
                        lanes.append(pair[1] * inv_s)
                    x = fx.Vector.from_elements(lanes, fx.Float32)
                else:
                    x = raw.extf(T.vec(V, T.f32))
                acc = x if acc is None else acc + x

            dst = thr_store.partition_D(fx.slice(fx.zipped_divide(ybuf, tile_mn), (None, (token, tile))))
            ofrag = fx.make_fragment_like(dst)
            fx.memref_store_vec(acc.truncf(T.vec(V, T.bf16)), ofrag)
            fx.copy(store_atom, ofrag, dst)

        if const_expr(ragged):
            if fx.Int32(tile) * fx.Int32(TILE) + fx.Int32(tid) * fx.Int32(V) < fx.Int32(n):
                body()
        else:
            body()

    grid_y = (n + TILE - 1) // TILE

    @flyc.jit
    def launch(P: fx.Tensor, Y: fx.Tensor, M: fx.Int32, stream: fx.Stream = fx.Stream(None)):
        reduce_kernel(P, Y, s).launch(grid=(M, grid_y, 1), block=(BLOCK, 1, 1), stream=stream)

    launch.kernel_name = name
    return launch


def placeholder_args(top_k: int, n: int, fp8: bool, m: int = 4) -> tuple:
    """CPU tensors of the right dtypes for a compile-only ``flyc.compile``."""
    import torch

    p = torch.empty(m * top_k, n, dtype=torch.uint8 if fp8 else torch.bfloat16)
    return (p, torch.empty(m, n, dtype=torch.bfloat16), m)


def compile_args(top_k: int, n: int, scale: float | None) -> tuple[Any, tuple]:
    """``(jit_fn, placeholder args)`` for the gfx950 gates (``gfx950_targets``)."""
    return make_reduce(top_k, n, scale), placeholder_args(top_k, n, scale is not None)


def launcher(partial: "torch.Tensor", out: "torch.Tensor", top_k: int, scale: float | None):
    """Compile once for these buffers and return ``(launch, kernel_name)`` (ROCm only).

    partial: [M*top_k, N] float8_e4m3fn (``scale`` required) or bf16 (``scale`` None).
    """
    import torch

    import flydsl.compiler as flyc

    in_fp8 = partial.dtype == torch.float8_e4m3fn
    if not in_fp8 and partial.dtype != torch.bfloat16:
        raise TypeError(f"partial must be float8_e4m3fn or bfloat16, got {partial.dtype}")
    if in_fp8 == (scale is None):
        raise ValueError("an fp8 partial needs its scale; a bf16 partial takes none")
    M, N = out.shape
    if tuple(partial.shape) != (M * top_k, N) or not (partial.is_contiguous() and out.is_contiguous()):
        raise ValueError(f"partial {tuple(partial.shape)} and out {tuple(out.shape)} must be contiguous, top_k={top_k}")
    if partial.numel() * partial.element_size() >= MAX_OFFSET_BYTES:
        raise ValueError(f"partial of {partial.numel() * partial.element_size()} bytes exceeds the 32-bit offset range")
    fn = make_reduce(top_k, N, scale)
    src = partial.view(torch.uint8) if in_fp8 else partial
    compiled = flyc.compile(fn, src, out, M, torch.cuda.current_stream())

    def launch() -> None:
        compiled(src, out, M, torch.cuda.current_stream())

    return launch, fn.kernel_name

"""FlyDSL stage-2 partial-store epilogue for gfx950: accumulator rows in (fp32 or bf16),
router weight, ``* s``, clamp to +-448, ``v_cvt_pk_fp8_f32``, 16-byte scattered row
stores into the fp8 partial (and the bf16-store baseline from the same code).

What this is. The card's store side is the last step of the stage-2 GEMM: each
accumulator row of a sorted tile (row ``r`` of expert block ``b``) is multiplied by its
router weight, scaled by ``s``, converted to e4m3 and written to partial row
``f = sorted_ids[r]`` (a scatter: sorted order -> (token, slot) order). This kernel is
that epilogue as a standalone pass over accumulator rows held in memory ([R, N], one
row per sorted row, R = the sorted buffer's capacity): the instruction sequence and the
store layout are the ones the fused epilogue issues, so the static gates can check the
store side (``v_cvt_pk_fp8_f32`` present, no scratch, 16-byte stores). It is not a
GEMM: the fused kernel (MFMA mainloop + this store in its epilogue) is
``flydsl_stage2_gemm``; this pass serves the ``flydsl_fp8_epilogue`` ablation.

Rounding order matches every other path: ``(acc * w) * s`` in fp32, clamp, then
round-to-nearest-even e4m3 (the hardware conversion). Rows whose sorted id is the
padding sentinel (``>= num_valid``) store nothing.

Scale: one ``Constexpr[float]`` argument, the kernel name ``moe2_store_pf8_s<hex>``
(``naming.store_name``) built from the same value. Written against FlyDSL 0.5.0.
"""
# No ``from __future__ import annotations``: FlyDSL reads the kernel annotations at trace time.
import functools
from typing import Any

from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.fp8_format import E4M3_MAX, check_scale
from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.naming import store_name

BLOCK = 256
V = 16  # accumulator values per thread: 16 fp8 bytes = one 16-byte store


@functools.lru_cache(maxsize=64)
def make_store(n: int, scale: "float | None", acc_dtype: str = "f32") -> Any:
    """The ``@flyc.jit`` launcher ``(Acc, SortedIds, Wts, P, R, num_valid, stream)``.

    n: partial width N (multiple of 16). scale: the partial scale (None: bf16 store).
    acc_dtype: 'f32' or 'bf16' accumulator rows.
    """
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr import const_expr, gpu, range_constexpr
    from flydsl.expr.typing import T

    if n % 16:
        raise ValueError(f"N must be a multiple of 16, got {n}")
    if acc_dtype not in ("f32", "bf16"):
        raise ValueError(f"acc_dtype must be 'f32' or 'bf16', got {acc_dtype!r}")
    pf8 = scale is not None
    s = check_scale(scale) if pf8 else 1.0
    vw = V if pf8 else 8  # bf16 store: 8 values = 16 bytes
    TILE = BLOCK * vw
    ragged = n % TILE != 0
    name = store_name(pf8, s if pf8 else None)

    @flyc.kernel(name=name)
    def store_kernel(
        Acc: fx.Tensor, SortedIds: fx.Tensor, Wts: fx.Tensor, P: fx.Tensor, num_valid: fx.Int32, S: fx.Constexpr[float]
    ):
        r = gpu.block_id("x")
        tile = gpu.block_id("y")
        tid = gpu.thread_id("x")
        f = fx.rocdl.make_buffer_tensor(SortedIds)[fx.Int32(r)]  # destination (token, slot) row

        def body():
            w = fx.rocdl.make_buffer_tensor(Wts)[f]
            acc_elem = fx.Float32 if const_expr(acc_dtype == "f32") else fx.BFloat16
            ld = fx.make_copy_atom(fx.rocdl.BufferCopy128b(), acc_elem)
            st = fx.make_copy_atom(fx.rocdl.BufferCopy128b(), fx.Int8 if const_expr(pf8) else fx.BFloat16)
            tile_mn, tv = fx.make_layout_tv(fx.make_layout((1, BLOCK), (1, 1)), fx.make_layout((1, vw), (1, 1)))
            src = fx.make_tiled_copy(ld, tv, tile_mn).get_slice(tid).partition_S(
                fx.slice(fx.zipped_divide(fx.rocdl.make_buffer_tensor(Acc), tile_mn), (None, (r, tile)))
            )
            frag = fx.make_fragment_like(src)
            fx.copy(ld, src, frag)
            x = fx.Vector(fx.memref_load_vec(frag))
            if const_expr(acc_dtype == "bf16"):
                x = x.extf(T.vec(vw, T.f32))
            dst = fx.make_tiled_copy(st, tv, tile_mn).get_slice(tid).partition_D(
                fx.slice(fx.zipped_divide(fx.rocdl.make_buffer_tensor(P), tile_mn), (None, (f, tile)))
            )
            ofrag = fx.make_fragment_like(dst)
            if const_expr(pf8):
                words = []
                for q in range_constexpr(vw // 4):  # 4 values -> one dword of 4 e4m3 bytes
                    v4 = [
                        fx.min(fx.max((x[4 * q + i] * w) * S, fx.Float32(-E4M3_MAX)), fx.Float32(E4M3_MAX))
                        for i in range_constexpr(4)
                    ]
                    lo = fx.rocdl.cvt_pk_fp8_f32(T.i32, v4[0], v4[1], fx.Int32(0), False)
                    words.append(fx.rocdl.cvt_pk_fp8_f32(T.i32, v4[2], v4[3], lo, True))
                fx.memref_store_vec(fx.Vector.from_elements(words, fx.Int32).bitcast(fx.Int8), ofrag)
            else:
                y = fx.Vector.from_elements([x[i] * w for i in range_constexpr(vw)], fx.Float32)
                fx.memref_store_vec(y.truncf(T.vec(vw, T.bf16)), ofrag)
            fx.copy(st, ofrag, dst)

        if f < num_valid:
            if const_expr(ragged):
                if fx.Int32(tile) * fx.Int32(TILE) + fx.Int32(tid) * fx.Int32(vw) < fx.Int32(n):
                    body()
            else:
                body()

    grid_y = (n + TILE - 1) // TILE

    @flyc.jit
    def launch(
        Acc: fx.Tensor,
        SortedIds: fx.Tensor,
        Wts: fx.Tensor,
        P: fx.Tensor,
        R: fx.Int32,
        num_valid: fx.Int32,
        stream: fx.Stream = fx.Stream(None),
    ):
        store_kernel(Acc, SortedIds, Wts, P, num_valid, s).launch(grid=(R, grid_y, 1), block=(BLOCK, 1, 1), stream=stream)

    launch.kernel_name = name
    return launch


def placeholder_args(n: int, pf8: bool, acc_dtype: str = "f32", rows: int = 64, num_valid: int = 40) -> tuple:
    """CPU tensors for a compile-only ``flyc.compile``."""
    import torch

    acc = torch.empty(rows, n, dtype=torch.float32 if acc_dtype == "f32" else torch.bfloat16)
    part = torch.empty(num_valid, n, dtype=torch.uint8 if pf8 else torch.bfloat16)
    return (acc, torch.empty(rows, dtype=torch.int32), torch.empty(num_valid), part, rows, num_valid)


def compile_args(n: int, scale: "float | None", acc_dtype: str = "f32") -> "tuple[Any, tuple]":
    """``(jit_fn, placeholder args)`` for the gfx950 gates."""
    return make_store(n, scale, acc_dtype), placeholder_args(n, scale is not None, acc_dtype)


def launcher(acc, sorted_ids, weights, partial, scale: "float | None"):
    """Compile once for these buffers and return ``(launch, kernel_name)`` (ROCm only).

    acc: [R, N] fp32/bf16 accumulator rows in sorted order; sorted_ids: int32 [R];
    weights: fp32 [M*top_k]; partial: [M*top_k, N] float8_e4m3fn (scale given) or bf16.
    """
    import torch

    import flydsl.compiler as flyc

    pf8 = partial.dtype == torch.float8_e4m3fn
    if pf8 == (scale is None):
        raise ValueError("an fp8 partial store needs its scale; a bf16 store takes none")
    acc_dtype = {torch.float32: "f32", torch.bfloat16: "bf16"}.get(acc.dtype)
    if acc_dtype is None:
        raise TypeError(f"acc must be float32 or bfloat16, got {acc.dtype}")
    R, N = acc.shape
    num_valid = partial.shape[0]
    if sorted_ids.shape != (R,) or weights.numel() != num_valid or partial.shape[1] != N:
        raise ValueError("acc [R, N], sorted_ids [R], weights [M*top_k], partial [M*top_k, N] disagree")
    fn = make_store(N, scale, acc_dtype)
    dst = partial.view(torch.uint8) if pf8 else partial
    w = weights.reshape(-1)
    compiled = flyc.compile(fn, acc, sorted_ids, w, dst, R, num_valid, torch.cuda.current_stream())

    def launch() -> None:
        compiled(acc, sorted_ids, w, dst, R, num_valid, torch.cuda.current_stream())

    return launch, fn.kernel_name

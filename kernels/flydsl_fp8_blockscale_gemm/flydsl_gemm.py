"""FlyDSL gfx950 fp8 a8w8 block-scale GEMM: the 4-wave software-promote core.

``c[M, N] (bf16) = sum_kb (a[:, kb] @ b[:, kb].T) * a_scale[:, kb] * b_scale[n // 128, kb]``

with fp8 e4m3 ``a [M, K]`` and ``b [N, K]`` and arbitrary fp32 scales per 1x128 (A) and
128x128 (B) block. The card's parity key, in code:

* The MFMA is the **unscaled** fp8 ``v_mfma_f32_16x16x128_f8f6f4`` (we build the scaled
  atom with its E8M0 scale operands left at 0, which LLVM selects as the unscaled
  instruction; ``mfma="pinned"`` instead passes 0x7F7F7F7F = E8M0 1.0 and keeps the
  ``v_mfma_scale_*`` form). The hardware scale is never fed a block scale: E8M0 is a power
  of two and cannot hold an arbitrary fp32 scale.
* One ``tile_k = 128`` K tile is exactly one scale block and one MFMA K step, so each
  K tile's MFMA starts from a zero accumulator (the *partial*), and right after it every
  lane promotes in fp32: ``acc = fma(partial, a_scale[row] * b_scale[col_block], acc)``.
  ``acc`` and ``partial`` are the two-level accumulator the card warns is register-tight.

Block geometry (the card's validated 4-wave winner ``t64x256x128 wpe2``): 256 threads =
4 waves; the CTA tile is ``tile_m x tile_n``; every wave owns all ``tile_m`` rows and a
``tile_n / 4`` column slice made of 16-wide MFMA columns interleaved across waves
(wave ``w`` holds columns ``(ni * 4 + w) * 16 ..``); so a wave's 16-column MFMA tile
``ni`` lies in scale block ``ni // 2`` (for any wave: 4 waves x 16 = 64 divides 128).

Operands in the layouts the problem's input contract fixes:
* ``a``: fp8 ``[M, K]`` row major; staged through LDS (double buffered, XOR swizzle).
* ``b_shuffled``: fp8 ``[N, K]`` in the CK 16x16 preshuffle
  (``skill_kernels.fp8_common.layouts.preshuffle_b``); loaded straight to registers,
  double buffered.
* ``a_scale_t``: fp32 ``[K/128, M]`` contiguous: one K block's scales for 4 consecutive
  rows are one 16-byte load (the rows a lane owns in an MFMA output tile).
* ``b_scale``: fp32 ``[N/128, K/128]`` contiguous: wave-uniform, read with scalar loads.
* ``c``: bf16 ``[M, N]``, written through an LDS reshuffle as 16-byte row chunks
  (``epilogue="cshuffle"``, the card's setting; ``"direct"`` stores from the MFMA layout).

``N`` and ``K`` are compile-time constants (the preshuffled B layout depends on them);
``M`` is a runtime argument, and rows past ``M`` are handled by buffer-descriptor bounds
(loads read zeros, stores are dropped). ``xcd_swizzle`` (0 or a group height such as 8)
remaps the CTA order so that consecutive CTAs on one of MI355X's 8 XCDs share a B panel.

Written against FlyDSL 0.5.0 (``FLYDSL_VERSION``); FlyDSL changes helper signatures
between releases, so other versions are refused with a clear error.
"""
# No `from __future__ import annotations` here: FlyDSL reads the real annotation objects
# of @fx.struct fields and @flyc.kernel / @flyc.jit parameters.
import functools
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # pragma: no cover
    import torch

FLYDSL_VERSION = "0.5.0"
SCALE_BLOCK = 128
NUM_WAVES = 4
NUM_XCDS = 8  # MI355X
MAX_UNROLLED_K_TILES = 16  # config_4wave: deeper K keeps an scf.for K loop (async_copy=False)
MAX_M = 1 << 20  # cap on the static row extent of the A / C views


def max_rows(N: int, K: int) -> int:
    """Static row extent of the A [rows, K] and C [rows, N] views: every view and buffer
    stays below 2 GiB (32-bit offsets); the runtime M bounds the descriptors."""
    return min(MAX_M, (2**31 - 1) // K, (2**31 - 1) // (2 * N)) // 256 * 256


@dataclass(frozen=True)
class BlockscaleConfig:
    """Compile-time knobs of the 4-wave core.

    tile_m / tile_n / tile_k: CTA tile. tile_k must be 128 (one scale block, one MFMA K step).
    waves_per_eu: occupancy hint passed to LLVM (``rocdl.waves_per_eu``); 2 is the card's
      register budget (256 unified VGPRs per wave); 3+ spills.
    xcd_swizzle: 0 = hardware CTA order; G > 0 = XCD-aware remap with M groups of G tiles.
    async_copy: stage A into LDS with the gfx950 buffer->LDS DMA (``buffer_load ... lds``)
      instead of through registers (the card's 4-wave setting). The DMA path unrolls the
      K loop at compile time; the register path keeps an ``scf.for`` loop.
    mfma: 'unscaled' (scale operands 0 -> plain MFMA) or 'pinned' (scaled MFMA with both
      scales pinned to E8M0 1.0); both are exact for fp8 data.
    scale_mode: 'software' (the parity-correct promote). 'hw_b_scale' is a deliberately
      WRONG variant kept for the static gates' negative test: it folds the B block scale
      into the scaled MFMA as an E8M0 exponent (rounding it to a power of two) and
      promotes with the A scale only. Never use it for results.
    a_scale_vec4: read the four A scales of a lane with one 16-byte load; needs M % 4 == 0
      (``build`` picks it from M).
    epilogue: 'direct' stores each lane's bf16 values straight from the MFMA layout
      (2-byte stores; the store path of FlyDSL's validated preshuffle GEMM); 'cshuffle'
      (the card's 4-wave setting) reshuffles the tile through LDS so every thread writes
      whole 16-byte row chunks. Both give bit-identical output.
    """

    tile_m: int = 64
    tile_n: int = 256
    tile_k: int = 128
    waves_per_eu: int = 2
    xcd_swizzle: int = 0
    async_copy: bool = True
    mfma: Literal["unscaled", "pinned"] = "unscaled"
    scale_mode: Literal["software", "hw_b_scale"] = "software"
    a_scale_vec4: bool = True
    epilogue: Literal["direct", "cshuffle"] = "cshuffle"

    @property
    def name(self) -> str:
        parts = [f"t{self.tile_m}x{self.tile_n}x{self.tile_k}", f"wpe{self.waves_per_eu}", f"xcd{self.xcd_swizzle}"]
        if not self.async_copy:
            parts.append("sync")
        if self.mfma != "unscaled":
            parts.append(self.mfma)
        if self.scale_mode != "software":
            parts.append(self.scale_mode)
        if self.epilogue != "cshuffle":
            parts.append(self.epilogue)
        return "_".join(parts)

    def validate(self) -> None:
        if self.tile_k != SCALE_BLOCK:
            raise ValueError(
                f"tile_k={self.tile_k}: this core promotes once per K tile, so tile_k must equal the "
                f"{SCALE_BLOCK}-wide scale block"
            )
        if self.tile_m <= 0 or self.tile_m % 16:
            raise ValueError(f"tile_m={self.tile_m} must be a positive multiple of 16 (MFMA rows)")
        if self.tile_n <= 0 or self.tile_n % SCALE_BLOCK:
            raise ValueError(
                f"tile_n={self.tile_n} must be a positive multiple of {SCALE_BLOCK} so a tile never "
                "splits a B scale block"
            )
        if (self.tile_m * self.tile_k) % (NUM_WAVES * 64 * 16):
            raise ValueError(f"tile_m*tile_k={self.tile_m * self.tile_k} must be a multiple of 4096 (16 B per thread)")
        if self.waves_per_eu < 1 or self.waves_per_eu > 8:
            raise ValueError(f"waves_per_eu={self.waves_per_eu} must be in 1..8")
        if self.xcd_swizzle < 0:
            raise ValueError(f"xcd_swizzle={self.xcd_swizzle} must be >= 0")
        if self.mfma not in ("unscaled", "pinned"):
            raise ValueError(f"mfma={self.mfma!r}: expected 'unscaled' or 'pinned'")
        if self.scale_mode not in ("software", "hw_b_scale"):
            raise ValueError(f"scale_mode={self.scale_mode!r}: expected 'software' or 'hw_b_scale'")
        if self.epilogue not in ("direct", "cshuffle"):
            raise ValueError(f"epilogue={self.epilogue!r}: expected 'direct' or 'cshuffle'")
        if self.epilogue == "cshuffle" and (self.tile_m * self.tile_n) % (NUM_WAVES * 64 * 8):
            raise ValueError("cshuffle needs tile_m*tile_n to be a multiple of 2048 (8 bf16 per thread per pass)")


#: the card's validated configs (wide-N q_up: xcd8; K-light down_proj: xcd non-load-bearing)
CARD_CONFIG = BlockscaleConfig()
CARD_CONFIG_XCD8 = replace(CARD_CONFIG, xcd_swizzle=8)


def check_shapes(M: int, N: int, K: int, cfg: BlockscaleConfig = CARD_CONFIG) -> None:
    """Raise ValueError naming the violated constraint for ``(M, N, K)`` under ``cfg``."""
    cfg.validate()
    if M <= 0 or N <= 0 or K <= 0:
        raise ValueError(f"M, N, K must be positive, got M={M} N={N} K={K}")
    if K % SCALE_BLOCK:
        raise ValueError(f"K={K} must be a multiple of {SCALE_BLOCK} (the scale block)")
    if N % cfg.tile_n:
        raise ValueError(f"N={N} must be a multiple of tile_n={cfg.tile_n} (no N tail handling in this core)")
    if M > max_rows(N, K):
        raise ValueError(
            f"M={M} exceeds {max_rows(N, K)} rows: this core addresses A [M, K={K}] and C [M, N={N}] with "
            "32-bit offsets (< 2 GiB each); split M"
        )
    if cfg.a_scale_vec4 and M % 4:
        raise ValueError(f"M={M} is not a multiple of 4: compile with a_scale_vec4=False")
    # buffer descriptors and i32 offsets: every operand must stay below 2 GiB
    for what, nbytes in (("a", M * K), ("b", N * K), ("c", 2 * M * N), ("a_scale_t", 4 * M * (K // SCALE_BLOCK))):
        if nbytes >= 2**31:
            raise ValueError(f"{what} is {nbytes} bytes; this core addresses operands with 32-bit offsets (< 2 GiB)")


def require_flydsl() -> None:
    """Raise ImportError with the fix when flydsl is missing or not the pinned version."""
    try:
        import flydsl
    except ImportError as exc:  # pragma: no cover - depends on the box
        raise ImportError(f"flydsl is not installed; `pip install flydsl=={FLYDSL_VERSION}`") from exc
    if getattr(flydsl, "__version__", None) != FLYDSL_VERSION:
        raise ImportError(
            f"flydsl {getattr(flydsl, '__version__', '?')} is installed, but this kernel is written "
            f"against flydsl=={FLYDSL_VERSION} (FlyDSL changes helper signatures between releases)"
        )


@functools.lru_cache(maxsize=64)
def compile_blockscale_gemm(N: int, K: int, cfg: BlockscaleConfig = CARD_CONFIG):
    """Return the ``@flyc.jit`` launcher for ``(N, K, cfg)``.

    Launcher signature: ``launch(c, a, b_shuffled, a_scale_t, b_scale, M, stream)`` with
    flat (1-D) tensors: c bf16 [M*N], a and b_shuffled int8 views [M*K] / [N*K],
    a_scale_t fp32 [K/128 * M], b_scale fp32 [N/128 * K/128].
    """
    require_flydsl()
    cfg.validate()
    if K % SCALE_BLOCK or N % cfg.tile_n:
        raise ValueError(f"N={N}, K={K} do not fit cfg {cfg.name} (need K % 128 == 0, N % tile_n == 0)")
    return _build_launcher(N, K, cfg)


def _build_launcher(N: int, K: int, cfg: BlockscaleConfig):  # noqa: C901 - one kernel, read top to bottom
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl._mlir.dialects import vector
    from flydsl.expr import arith, as_ir_value, const_expr, gpu, range_constexpr, rocdl
    from flydsl.expr.typing import BFloat16, Float8E4M3FN, Float32, Int8, Int32, T
    from flydsl.expr.typing import Vector as Vec

    tile_m, tile_n, tile_k = cfg.tile_m, cfg.tile_n, cfg.tile_k
    use_async = cfg.async_copy
    pinned = cfg.mfma == "pinned"
    hw_b_scale = cfg.scale_mode == "hw_b_scale"
    xcd_group = cfg.xcd_swizzle
    a_vec4 = cfg.a_scale_vec4
    rows = max_rows(N, K)
    cshuffle = cfg.epilogue == "cshuffle"
    c_stride = tile_n + 8  # padded LDS row (bf16): 4-row lane groups land on different banks

    total_threads = NUM_WAVES * 64
    m_repeat = tile_m // 16  # 16-row MFMA tiles per wave
    num_acc_n = tile_n // NUM_WAVES // 16  # 16-column MFMA tiles per wave
    acc_size = m_repeat * num_acc_n * 4  # fp32 accumulator values per lane
    num_tiles = K // tile_k
    scale_k = K // SCALE_BLOCK
    n_blocks_per_tile = tile_n // SCALE_BLOCK
    n_tiles_grid = N // tile_n
    a_load_bytes = 16
    num_a_loads = (tile_m * tile_k) // total_threads // a_load_bytes
    E8M0_ONE_X4 = 0x7F7F7F7F  # E8M0 1.0 in every byte (op_sel may pick any)
    tail = 1 if num_tiles % 2 else 2  # K tiles after the ping-pong pairs
    pairs = (num_tiles - tail) // 2
    first_tail = num_tiles - tail

    @fx.struct
    class SharedStorage:
        a0: fx.Array[Float8E4M3FN, tile_m * tile_k, 16]
        a1: fx.Array[Float8E4M3FN, tile_m * tile_k, 16]
        if cshuffle:
            c: fx.Array[BFloat16, tile_m * c_stride, 16]

    def xcd_remap(bid_x, bid_y, i32_m):
        """Map the hardware CTA id to (m tile, n tile) so that consecutive CTAs placed on one
        XCD (dispatch is round-robin over the 8 XCDs) cover an xcd_group-tall column of M
        tiles under one N tile: they share that B panel in the XCD's L2."""
        gx = (i32_m + (tile_m - 1)) // tile_m  # M tiles (grid x)
        gy = Int32(n_tiles_grid)
        pid = Int32(bid_y) * gx + Int32(bid_x)  # dispatch order: x fastest
        total = gx * gy
        q = total // NUM_XCDS
        r = total % NUM_XCDS
        xcd = pid % NUM_XCDS
        slot = pid // NUM_XCDS
        # CTAs of XCD x get the contiguous id range [x*q + min(x, r), ...)
        wgid = xcd * q + arith.select(xcd < r, xcd, r) + slot
        per_group = Int32(xcd_group) * gy
        group = wgid // per_group
        first_m = group * xcd_group
        left_m = gx - first_m
        group_m = arith.select(left_m < xcd_group, left_m, Int32(xcd_group))
        in_group = wgid % per_group
        return first_m + in_group % group_m, in_group // group_m

    @flyc.kernel
    def kernel_blockscale_gemm(
        arg_c: fx.Tensor,
        arg_a: fx.Tensor,
        arg_b: fx.Tensor,
        arg_sa: fx.Tensor,
        arg_sb: fx.Tensor,
        i32_m: fx.Int32,
        tiled_copy_g2s: fx.TiledCopy,
    ):
        tid = fx.thread_idx.x
        bid_x, bid_y, _ = fx.block_idx
        if const_expr(xcd_group > 0):
            bid_x, bid_y = xcd_remap(bid_x, bid_y, i32_m)

        # 16x16x128 fp8 MFMA, 4 waves side by side along N; K=128 per call.
        atom = fx.make_mma_atom(fx.rocdl.cdna4.MFMA_Scale(16, 16, 128, Float8E4M3FN))
        tiled_mma = fx.make_tiled_mma(
            atom,
            fx.make_layout((1, NUM_WAVES, 1), (0, 1, 0)),
            fx.make_tile(None, None, fx.make_layout((32, 4), (1, 32))),
        )

        m_bytes = fx.Int64(i32_m)
        gA = fx.rocdl.make_buffer_tensor(arg_a, max_size=False, num_records_bytes=m_bytes * fx.Int64(K))
        gB = fx.rocdl.make_buffer_tensor(arg_b)
        gC = fx.rocdl.make_buffer_tensor(arg_c, max_size=False, num_records_bytes=m_bytes * fx.Int64(N * 2))

        tA = fx.flat_divide(gA, fx.make_tile(tile_m, tile_k))[None, None, bid_x, None]
        tB = fx.flat_divide(gB, fx.make_tile(tile_n, tile_k))[None, None, bid_y, None]
        tC = fx.flat_divide(gC, fx.make_tile(tile_m, tile_n))[None, None, bid_x, bid_y]

        buf_copy = fx.make_copy_atom(fx.rocdl.BufferCopy128b(), Float8E4M3FN)
        uni_copy = fx.make_copy_atom(fx.UniversalCopy128b(), Float8E4M3FN)
        thr_mma = tiled_mma.thr_slice(tid)
        thr_g2s = tiled_copy_g2s.get_slice(tid)
        thr_s2r = fx.make_tiled_copy_A(buf_copy, tiled_mma).get_slice(tid)
        thr_g2r_b = fx.make_tiled_copy_B(buf_copy, tiled_mma).get_slice(tid)

        # A in LDS, two stages, XOR swizzle over 16-byte chunks of a 128-byte row.
        lds = fx.SharedAllocator().allocate(SharedStorage).peek()
        k_chunks = tile_k // 16
        swz_bits = k_chunks.bit_length() - 1
        swz = fx.SwizzleType.get(swz_bits, 4, swz_bits)

        def lds_view(arr):
            return fx.make_view(
                arr.ptr, fx.make_composed_layout(fx.static(swz), fx.make_ordered_layout((tile_m, tile_k), (1, 0)))
            )

        sA = [lds_view(lds.a0), lds_view(lds.a1)]
        pA_g = thr_g2s.partition_S(tA)
        pA_s = [thr_g2s.partition_D(s) for s in sA]
        pA_s2r = [thr_s2r.partition_S(s) for s in sA]
        pB_g = thr_g2r_b.partition_S(tB)

        frag_copy_A = fx.make_fragment_like(pA_s[0][None, None, None])
        frag_A = thr_mma.make_fragment_A(sA[0])
        frag_B_layout = thr_mma.partition_B(tB).layout(None, None, None, 0)
        frag_B = [fx.make_fragment_like(frag_B_layout, Float8E4M3FN.ir_type) for _ in range(2)]
        frag_acc = thr_mma.make_fragment_C(tC)  # promoted fp32 accumulator
        frag_part = thr_mma.make_fragment_C(tC)  # this K tile's unscaled partial
        frag_A_retile = thr_s2r.retile(frag_A)
        frag_B_retile = [thr_g2r_b.retile(b) for b in frag_B]

        # ---- lane geometry of an MFMA 16x16 output tile: 4 rows x 1 column per lane ----
        wave_id = tid // 64
        lane = tid % 64
        lane_row4 = (lane // 16) * 4
        bx_m = bid_x * tile_m
        by_n = bid_y * tile_n
        nb0 = by_n // SCALE_BLOCK  # first B scale block of this tile

        # ---- scale operands ----
        sa_bytes = m_bytes * fx.Int64(scale_k * 4)
        sa_buf = fx.rocdl.make_buffer_tensor(arg_sa, max_size=False, num_records_bytes=sa_bytes)
        if const_expr(a_vec4):
            sa_div = fx.logical_divide(sa_buf, fx.make_layout(4, 1))
            sa_atom = fx.make_copy_atom(fx.rocdl.BufferCopy128b(), Float32)
        else:
            sa_div = fx.logical_divide(sa_buf, fx.make_layout(1, 1))
            sa_atom = fx.make_copy_atom(fx.rocdl.BufferCopy32b(), Float32)
        sb_ptr = fx.get_iter(fx.rocdl.make_buffer_tensor(arg_sb))

        def load_scales(kb):
            """A scales [m_repeat][4] (this lane's rows) and B scales [n_blocks] for K block kb."""
            sa_vals = []
            for mi in range_constexpr(m_repeat):
                elem = kb * i32_m + bx_m + mi * 16 + lane_row4
                if const_expr(a_vec4):
                    f = fx.make_rmem_tensor(4, Float32)
                    fx.copy(sa_atom, sa_div[None, fx.Int32(elem // 4)], f)
                    v = Vec(f.load())
                    sa_vals.append([v[i] for i in range_constexpr(4)])
                else:
                    row = []
                    for i in range_constexpr(4):
                        f = fx.make_rmem_tensor(1, Float32)
                        fx.copy(sa_atom, sa_div[None, fx.Int32(elem + i)], f)
                        row.append(Vec(f.load())[0])
                    sa_vals.append(row)
            sb_vals = []
            for j in range_constexpr(n_blocks_per_tile):
                word = fx.rocdl.s_buffer_load(sb_ptr, (nb0 + j) * scale_k + kb)  # wave-uniform
                sb_vals.append(Vec.filled(1, word, Int32).bitcast(Float32)[0])
            return sa_vals, sb_vals

        def e8m0_of(x):
            """Biased exponent byte of a positive fp32 (its power-of-two floor), x4 bytes."""
            bits = Vec.filled(1, x, Float32).bitcast(Int32)[0]
            e = (bits >> 23) & 0xFF
            return e | (e << 8) | (e << 16) | (e << 24)

        # Accumulator element p of a lane: ni = p // (4 m_repeat), mi = p // 4 % m_repeat,
        # row = mi*16 + lane_row4 + p % 4, column tile ni -> B scale block ni*64 // 128.
        # The promote is acc = fma(partial * s_b, s_a, acc): s_b is wave-uniform (an SGPR
        # operand), so no per-element s_a*s_b product vector has to live in VGPRs.
        def scale_vectors(sa_vals, sb_vals):
            va, vb = [], []
            for p in range_constexpr(acc_size):
                ni = p // (m_repeat * 4)
                mi = (p // 4) % m_repeat
                va.append(sa_vals[mi][p % 4])
                vb.append(sb_vals[(ni * NUM_WAVES * 16) // SCALE_BLOCK])
            ty = T.vec(acc_size, T.f32)
            return (
                Vec(vector.from_elements(ty, [as_ir_value(e) for e in va])),
                Vec(vector.from_elements(ty, [as_ir_value(e) for e in vb])),
            )

        acc_zero = Vec.filled(acc_size, 0.0, Float32)

        def compute_tile(a_stage, cur_frag_B, kb):
            """MFMA this K tile into a zero partial, then promote it into the accumulator."""
            sa_vals, sb_vals = load_scales(kb)
            fx.copy(uni_copy, pA_s2r[a_stage][None, None, 0], frag_A_retile[None, None, 0])
            frag_part.store(acc_zero)
            if const_expr(hw_b_scale):
                sb_e8m0 = [e8m0_of(s) for s in sb_vals]

                def per_call_scale(atom_in, mnk):
                    nb = (mnk[1] * NUM_WAVES * 16) // SCALE_BLOCK
                    return atom_in.set_value({"scale_a": Int32(E8M0_ONE_X4), "scale_b": sb_e8m0[nb]})

                fx.gemm(
                    tiled_mma,
                    frag_part,
                    frag_A[None, None, 0],
                    cur_frag_B[None, None, 0],
                    frag_part,
                    atom_callback=per_call_scale,
                )
            elif const_expr(pinned):
                fx.gemm(
                    tiled_mma,
                    frag_part,
                    frag_A[None, None, 0],
                    cur_frag_B[None, None, 0],
                    frag_part,
                    scale_a=Int32(E8M0_ONE_X4),
                    scale_b=Int32(E8M0_ONE_X4),
                )
            else:
                fx.gemm(tiled_mma, frag_part, frag_A[None, None, 0], cur_frag_B[None, None, 0], frag_part)
            s_a, s_b = scale_vectors(sa_vals, sb_vals)
            part = Vec(frag_part.load())
            if const_expr(not hw_b_scale):
                part = part * s_b  # hw_b_scale: WRONG on purpose, B scale went to the MFMA
            frag_acc.store(fx.fma(part, s_a, Vec(frag_acc.load())))

        # ---- A: global -> LDS ----
        if const_expr(use_async):
            dma_atom = fx.make_copy_atom(fx.rocdl.BufferCopyLDS128b(), 128)
            gA_bytes = fx.rocdl.make_buffer_tensor(
                fx.Tensor(fx.make_view(fx.recast_iter(Int8, fx.get_iter(arg_a)), fx.make_layout(rows * K, 1))),
                max_size=False,
                num_records_bytes=m_bytes * fx.Int64(K),
            )
            gA_div = fx.logical_divide(gA_bytes, fx.make_layout(1, 1))
            sA_bytes = [fx.recast_iter(Int8, lds.a0.ptr), fx.recast_iter(Int8, lds.a1.ptr)]

            def dma_a(kt, stage):
                # each wave DMAs 64 x 16 B per step into a contiguous 1 KiB LDS run; the
                # swizzle is applied on the global side so LDS matches the swizzled view.
                wave_off = rocdl.readfirstlane(Int32.ir_type, wave_id * (64 * a_load_bytes))
                lds_ptr = fx.add_offset(sA_bytes[stage], wave_off)
                for i in range_constexpr(num_a_loads):
                    if const_expr(i > 0):
                        lds_ptr = fx.add_offset(lds_ptr, total_threads * a_load_bytes)
                    pos = i * total_threads * a_load_bytes + tid * a_load_bytes
                    m = pos // tile_k
                    k = pos % tile_k
                    k_swz = k ^ ((m % k_chunks) * 16)
                    src = fx.slice(gA_div, (None, fx.Int32((bx_m + m) * K + kt * tile_k + k_swz)))
                    fx.copy(dma_atom, src, fx.make_view(lds_ptr, fx.make_layout(1, 1)))

        def stage_tile(read_stage, kb, next_kb=None):
            """Compute K tile kb from stage read_stage while tile next_kb streams in."""
            write_stage = read_stage ^ 1
            if const_expr(use_async):
                if const_expr(next_kb is not None):
                    dma_a(next_kb, write_stage)
                    fx.copy(buf_copy, pB_g[None, None, None, next_kb], frag_B_retile[write_stage])
                compute_tile(read_stage, frag_B[read_stage], kb)
                if const_expr(next_kb is not None):
                    rocdl.s_waitcnt(0)
                gpu.barrier()
                return
            if const_expr(next_kb is not None):
                fx.copy(buf_copy, pA_g[None, None, None, next_kb], frag_copy_A)
                fx.copy(buf_copy, pB_g[None, None, None, next_kb], frag_B_retile[write_stage])
            compute_tile(read_stage, frag_B[read_stage], kb)
            if const_expr(next_kb is not None):
                fx.copy(uni_copy, frag_copy_A, pA_s[write_stage][None, None, None])
                gpu.barrier()

        # ---- prologue: tile 0 into stage 0 ----
        if const_expr(use_async):
            dma_a(fx.Int32(0), 0)
        else:
            fx.copy(buf_copy, pA_g[None, None, None, 0], frag_copy_A)
        fx.copy(buf_copy, pB_g[None, None, None, 0], frag_B_retile[0])
        frag_acc.store(acc_zero)
        if const_expr(use_async):
            rocdl.s_waitcnt(0)
        else:
            fx.copy(uni_copy, frag_copy_A, pA_s[0][None, None, None])
        gpu.barrier()
        rocdl.sched_barrier(0)

        # ---- main loop: two K tiles per iteration (ping-pong), then a 1- or 2-tile tail ----
        if const_expr(use_async):
            for it in range_constexpr(pairs):
                stage_tile(0, fx.Int32(2 * it), fx.Int32(2 * it + 1))
                stage_tile(1, fx.Int32(2 * it + 1), fx.Int32(2 * it + 2))
        elif const_expr(pairs > 0):
            for iv, state in range(0, pairs, 1, init=[frag_acc.load()]):
                frag_acc.store(state[0])
                k0 = fx.Int32(iv * 2)
                stage_tile(0, k0, k0 + fx.Int32(1))
                stage_tile(1, k0 + fx.Int32(1), k0 + fx.Int32(2))
                results = yield [frag_acc.load()]
            frag_acc.store(results)
        if const_expr(tail == 2):
            stage_tile(first_tail % 2, fx.Int32(first_tail), fx.Int32(first_tail + 1))
        stage_tile((num_tiles - 1) % 2, fx.Int32(num_tiles - 1), None)

        # ---- epilogue: fp32 -> bf16 ----
        if const_expr(cshuffle):
            # lane values -> LDS tile [tile_m, c_stride] -> 16-byte row chunks -> global
            acc_v = Vec(frag_acc.load()).to(BFloat16)
            lds_c = lds.c.ptr
            col_lane = wave_id * 16 + lane % 16
            for p in range_constexpr(acc_size):
                ni = p // (m_repeat * 4)
                mi = (p // 4) % m_repeat
                r = mi * 16 + lane_row4 + p % 4
                fx.ptr_store(acc_v[p], fx.add_offset(lds_c, r * c_stride + ni * (NUM_WAVES * 16) + col_lane))
            gpu.barrier()
            chunks_per_row = tile_n // 8
            gC_flat = fx.rocdl.make_buffer_tensor(
                fx.Tensor(fx.make_view(fx.get_iter(arg_c), fx.make_layout(rows * N, 1))),
                max_size=False,
                num_records_bytes=m_bytes * fx.Int64(N * 2),
            )
            c_div8 = fx.logical_divide(gC_flat, fx.make_layout(8, 1))
            st_atom = fx.make_copy_atom(fx.rocdl.BufferCopy128b(), BFloat16)
            for j in range_constexpr((tile_m * tile_n) // (total_threads * 8)):
                chunk = j * total_threads + tid
                r = chunk // chunks_per_row
                cc = chunk % chunks_per_row
                v = fx.make_view(fx.add_offset(lds_c, r * c_stride + cc * 8), fx.make_layout(8, 1)).load()
                reg = fx.make_rmem_tensor(8, BFloat16)
                reg.store(Vec(v))
                g8 = (bx_m + r) * (N // 8) + by_n // 8 + cc  # N % 8 == 0: chunks never straddle rows
                fx.copy(st_atom, reg, c_div8[None, fx.Int32(g8)])
        else:
            # straight from the MFMA C layout (2-byte stores)
            out_copy = fx.make_copy_atom(fx.rocdl.BufferCopy16b(), BFloat16)
            thr_r2g = fx.make_tiled_copy_C(out_copy, tiled_mma).get_slice(tid)
            pC_g = thr_r2g.partition_S(tC)
            frag_out = fx.make_fragment_like(frag_acc, BFloat16.ir_type)
            frag_out.store(Vec(frag_acc.load()).to(BFloat16))
            fx.copy(out_copy, thr_r2g.retile(frag_out), pC_g)

    @flyc.jit
    def launch_blockscale_gemm(
        arg_c: fx.Tensor,
        arg_a: fx.Tensor,
        arg_b: fx.Tensor,
        arg_sa: fx.Tensor,
        arg_sb: fx.Tensor,
        i32_m: fx.Int32,
        stream: fx.Stream = fx.Stream(None),
    ):
        # A tile copy: 16 B per thread, tile_k/16 threads per row.
        per_thr = 16
        thrs_k = tile_k // per_thr
        thrs_m = total_threads // thrs_k
        tiled_copy_g2s = fx.make_tiled_copy(
            fx.make_copy_atom(fx.UniversalCopy128b(), Float8E4M3FN),
            fx.make_layout(((thrs_k, thrs_m), (1, per_thr)), ((thrs_m * per_thr, 1), (1, thrs_m))),
            fx.make_tile(thrs_m, tile_k),
        )
        # CK 16x16 preshuffle of B [N, K]: byte (n, k) at
        # (n // 16) * 16K + (k // 16) * 256 + (n % 16) * 16 + k % 16.
        b_pre = fx.Tensor(
            fx.make_view(
                fx.get_iter(arg_b),
                fx.make_layout(((16, N // 16), (16, 4, K // 64)), ((16, 16 * K), (1, 256, 1024))),
            )
        )
        a_2d = fx.Tensor(fx.make_view(fx.get_iter(arg_a), fx.make_layout((rows, K), (K, 1))))
        c_2d = fx.Tensor(fx.make_view(fx.get_iter(arg_c), fx.make_layout((rows, N), (N, 1))))
        grid_m = (i32_m + (tile_m - 1)) // tile_m
        kernel_blockscale_gemm(
            c_2d,
            a_2d,
            b_pre,
            arg_sa,
            arg_sb,
            i32_m,
            tiled_copy_g2s,
            value_attrs={"rocdl.waves_per_eu": cfg.waves_per_eu},
        ).launch(grid=(grid_m, n_tiles_grid, 1), block=(total_threads, 1, 1), stream=stream)

    return launch_blockscale_gemm


# ---------------------------------------------------------------------------------------
# Host side
# ---------------------------------------------------------------------------------------


def placeholder_args(M: int, N: int, K: int) -> tuple:
    """CPU tensors of the launcher's argument types, for ``flyc.compile`` in compile-only mode."""
    import torch

    return (
        torch.empty(M * N, dtype=torch.bfloat16),
        torch.empty(M * K, dtype=torch.int8),
        torch.empty(N * K, dtype=torch.int8),
        torch.empty((K // SCALE_BLOCK) * M, dtype=torch.float32),
        torch.empty((N // SCALE_BLOCK) * (K // SCALE_BLOCK), dtype=torch.float32),
        M,
    )


def compile_args(M: int, N: int, K: int, cfg: BlockscaleConfig = CARD_CONFIG) -> tuple[Any, tuple]:
    """``(jit launcher, placeholder args)`` for the static gfx950 gates (compile-only)."""
    check_shapes(M, N, K, cfg)
    return compile_blockscale_gemm(N, K, cfg), placeholder_args(M, N, K)


def config_4wave(M: int, N: int, K: int, **overrides: Any) -> BlockscaleConfig:
    """The card's 4-wave config for this shape (``recipe.config_for`` picks the kernel
    family; this is the 4-wave row's config): t64x256x128 wpe2, async copy, xcd8
    (the validated wide-N winner; non-load-bearing but harmless on K-light shapes).
    ``tile_n`` drops to 128 (the card's other swept value) when N is not a multiple of 256;
    deep K (more than MAX_UNROLLED_K_TILES 128-K tiles) uses the looped register-staged A
    copy; ``a_scale_vec4`` follows ``M % 4``. Overrides take any BlockscaleConfig field."""
    tile_n = 256 if N % 256 == 0 else SCALE_BLOCK
    # the async (buffer->LDS DMA) path unrolls the K loop at compile time: beyond
    # MAX_UNROLLED_K_TILES the register-staged path keeps a real loop (code size, compile time)
    async_copy = K // SCALE_BLOCK <= MAX_UNROLLED_K_TILES
    cfg = replace(CARD_CONFIG_XCD8, tile_n=tile_n, async_copy=async_copy, a_scale_vec4=(M % 4 == 0))
    return replace(cfg, **overrides) if overrides else cfg


def _flat(t: "torch.Tensor") -> "torch.Tensor":
    import torch

    t = t.contiguous().view(-1)
    return t.view(torch.int8) if t.dtype == torch.float8_e4m3fn else t


def build(
    inputs: dict[str, "torch.Tensor"],
    outputs: dict[str, "torch.Tensor"],
    config: BlockscaleConfig | None = None,
):
    """Candidate contract: compile once (untimed), return a zero-arg ``launch`` that writes
    ``outputs['c']`` in place on the current stream. Uses ``a``, ``a_scale_t``,
    ``b_shuffled`` and ``b_scale``; runs on a ROCm torch on gfx950 (MI355X)."""
    import torch

    _check_operands(inputs, outputs)
    require_flydsl()
    import flydsl.compiler as flyc

    a, b_sh = inputs["a"], inputs["b_shuffled"]
    M, K = a.shape
    N = b_sh.shape[0]
    cfg = config if config is not None else config_4wave(M, N, K)
    check_shapes(M, N, K, cfg)
    if cfg.scale_mode != "software":
        raise ValueError(f"scale_mode={cfg.scale_mode!r} is a deliberately wrong gate-test variant; use 'software'")
    launcher = compile_blockscale_gemm(N, K, cfg)
    args = launcher_args(inputs, outputs)  # flat views made once: launch() allocates nothing
    compiled = flyc.compile(launcher, *args, torch.cuda.current_stream())
    if compiled is None:
        raise RuntimeError("flyc.compile returned nothing: COMPILE_ONLY is set in this process, so it cannot launch")

    def launch() -> None:
        compiled(*args, torch.cuda.current_stream())

    return launch


def launcher_args(inputs: dict[str, "torch.Tensor"], outputs: dict[str, "torch.Tensor"]) -> tuple:
    """The launcher's arguments ``(c, a, b_shuffled, a_scale_t, b_scale, M)`` as flat views
    of the problem's tensors (no copies; the stream is appended by the caller)."""
    a, sa_t, b_sh, sb, c = inputs["a"], inputs["a_scale_t"], inputs["b_shuffled"], inputs["b_scale"], outputs["c"]
    args = (_flat(c), _flat(a), _flat(b_sh), _flat(sa_t), _flat(sb), a.shape[0])
    if args[0].data_ptr() != c.data_ptr():
        raise ValueError("outputs['c'] must be contiguous so the kernel writes it in place")
    return args


def config_from(described: dict[str, Any]) -> BlockscaleConfig:
    """The BlockscaleConfig that ``describe`` (a target's ``config``) came from."""
    fields = BlockscaleConfig.__dataclass_fields__
    return BlockscaleConfig(**{k: v for k, v in described.items() if k in fields})


def build_emulated(inputs: dict[str, "torch.Tensor"], outputs: dict[str, "torch.Tensor"], kernels: dict) -> Any:
    """The FlyDSL arm on the gfx950 emulator (``verifiers.gfx950.emulator``): CPU tensors,
    the kernel compiled by the emulated arm's target, the same launcher arguments as
    ``build``. ``kernels["gemm"](*args)`` runs the compiled launcher on the emulator."""
    gemm = kernels["gemm"]
    _check_operands(inputs, outputs, require_gpu=False)
    M, K = inputs["a"].shape
    N = inputs["b_shuffled"].shape[0]
    if (gemm.config.get("N"), gemm.config.get("K")) != (N, K):
        raise ValueError(f"the emulated kernel was compiled for N={gemm.config.get('N')}, K={gemm.config.get('K')}; "
                         f"the inputs have N={N}, K={K}")
    check_shapes(M, N, K, config_from(gemm.config))
    args = launcher_args(inputs, outputs)

    def launch() -> None:
        gemm(*args)

    return launch


def make_builder(**overrides: Any):
    """A ``build`` with fixed config overrides (for problem arms / ablations), e.g.
    ``make_builder(xcd_swizzle=0)``."""

    def _build(inputs, outputs):
        a = inputs["a"]
        M, K = a.shape
        N = inputs["b_shuffled"].shape[0]
        return build(inputs, outputs, config_4wave(M, N, K, **overrides))

    _build.__name__ = "build_" + "_".join(f"{k}{v}" for k, v in sorted(overrides.items()))
    return _build


build_xcd0 = make_builder(xcd_swizzle=0)
build_xcd8 = make_builder(xcd_swizzle=8)
build_direct_epilogue = make_builder(epilogue="direct")


def _check_operands(inputs: dict[str, "torch.Tensor"], outputs: dict[str, "torch.Tensor"], require_gpu: bool = True) -> None:
    """Dtype / shape / device checks with errors that name the tensor (ValueError)."""
    import torch

    need = {"a": torch.float8_e4m3fn, "a_scale_t": torch.float32, "b_shuffled": torch.float8_e4m3fn, "b_scale": torch.float32}
    for name, dtype in need.items():
        if name not in inputs:
            raise ValueError(f"inputs: missing {name!r} (the FlyDSL kernel reads a, a_scale_t, b_shuffled, b_scale)")
        t = inputs[name]
        if t.dtype != dtype:
            raise ValueError(f"inputs[{name!r}]: expected dtype {dtype}, got {t.dtype}")
        if not t.is_contiguous():
            raise ValueError(f"inputs[{name!r}]: must be contiguous")
    if "c" not in outputs:
        raise ValueError("outputs: missing 'c'")
    a, sa_t, b_sh, sb, c = inputs["a"], inputs["a_scale_t"], inputs["b_shuffled"], inputs["b_scale"], outputs["c"]
    if a.dim() != 2 or b_sh.dim() != 2:
        raise ValueError(f"a and b_shuffled must be 2-D, got {tuple(a.shape)} and {tuple(b_sh.shape)}")
    M, K = a.shape
    N = b_sh.shape[0]
    if b_sh.shape[1] != K:
        raise ValueError(f"b_shuffled: expected [N, K={K}], got {list(b_sh.shape)}")
    if K % SCALE_BLOCK or N % SCALE_BLOCK:
        raise ValueError(f"N={N} and K={K} must be multiples of {SCALE_BLOCK}")
    if tuple(sa_t.shape) != (K // SCALE_BLOCK, M):
        raise ValueError(f"a_scale_t: expected [K/128={K // SCALE_BLOCK}, M={M}], got {list(sa_t.shape)}")
    if tuple(sb.shape) != (N // SCALE_BLOCK, K // SCALE_BLOCK):
        raise ValueError(f"b_scale: expected [N/128={N // SCALE_BLOCK}, K/128={K // SCALE_BLOCK}], got {list(sb.shape)}")
    if tuple(c.shape) != (M, N) or c.dtype != torch.bfloat16 or not c.is_contiguous():
        raise ValueError(f"outputs['c']: expected contiguous bfloat16 [{M}, {N}], got {c.dtype} {list(c.shape)}")
    for name, t in (*((n, inputs[n]) for n in need), ("c", c)):
        if require_gpu and t.device.type != "cuda":
            raise ValueError(f"{name!r}: on {t.device}; the FlyDSL kernel runs on a ROCm GPU (gfx950)")
        if t.device != a.device:
            raise ValueError(f"{name!r} is on {t.device}, 'a' on {a.device}")


def describe(cfg: BlockscaleConfig) -> dict[str, Any]:
    """JSON-able config (for reports and cache keys)."""
    return asdict(cfg) | {"name": cfg.name}

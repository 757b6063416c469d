"""FlyDSL gfx950 fp8 block-scale GEMM: the 8-wave ping-pong core with the ``cluster`` schedule.

Same operator and parity key as the 4-wave core (``flydsl_gemm``):
``c = sum_kb (a[:, kb] @ b[:, kb].T) * a_scale[:, kb] * b_scale[n // 128, kb]`` in bf16, the
MFMA the **unscaled** fp8 ``v_mfma_f32_16x16x128_f8f6f4`` (scaled atom, both E8M0 operands
left at 0), every block scale applied in fp32 software after the MFMA. This is the card's
recipe row for narrow-N / deep-K shapes (4096x2048x7168, 16384x1536x7168):

* **Tile** ``BLOCK_M=128, BLOCK_N=256, BLOCK_K=128``; 512 threads = 8 waves in a 2 (M) x 4 (N)
  grid. The CTA tile is four quadrants of 64x128; every wave owns a 32x32 piece of each
  quadrant (2x2 MFMA tiles), i.e. 16 MFMAs per 128-K iteration. A quadrant's 128 columns are
  exactly one B scale block, so its B scale is wave-uniform (``BLOCK_N`` is tied to 256 by
  this: two scale blocks, two quadrant columns).
* **Ping-pong**: the four quadrant MFMA clusters of a K iteration are separated by
  ``s_barrier``, and the second wave row starts one barrier late (and the first ends one
  late), so one wave row issues MFMAs while the other is between clusters.
* **``cluster`` schedule** (the card's lever): each quadrant's MFMAs write a zero-started
  fp32 *partial*; all four promotes ``acc = fma(partial * s_b, s_a, acc)`` run after the
  last MFMA of the K iteration, so none sits between a cluster and its barrier. A
  ``sched_barrier`` keeps LLVM from pulling them back between MFMAs. ``interleaved`` (each
  quadrant promoted right after its own cluster, before the barrier) is the deliberately
  worse schedule kept for the static gate's negative test; it computes the same numbers.

Operands go global -> registers (no LDS staging, unlike upstream's HipKittens-derived
8-wave pipeline, which stages A and B in LDS): A row major, B in the CK 16x16 preshuffle,
both in the f8f6f4 operand ABI (lane ``16 g + r`` holds row ``r``, K bytes
``[16 g, 16 g + 16)`` and ``[64 + 16 g, +16)`` of the 128-K step). The MFMA runs
**swap-ab** (B tile in the A slot): lane ``(g, r)`` then holds row ``r`` and four
consecutive columns ``4 g .. 4 g + 3`` of a 16x16 C tile, so the A scale is one value per
lane and tile, and the bf16 store is 8 contiguous bytes. Each K iteration loads the next
step's operands as the current ones die (A half 0 after quadrant (0, 1), B half 0 after
(1, 0), the rest after (1, 1)), in an ``scf.for`` K loop.

``K`` is compile-time (loop trip count); ``M`` and ``N`` are runtime. Rows past ``M`` read
zeros and their stores are dropped by the buffer descriptors; ``N`` must be a multiple of
256. Not measured on silicon here (no gfx950 device): the card's speed figures are its own.
"""
# No ``from __future__ import annotations``: FlyDSL reads the kernel's annotations.
import functools
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from .flydsl_gemm import FLYDSL_VERSION, SCALE_BLOCK, require_flydsl

if TYPE_CHECKING:  # pragma: no cover
    import torch

KERNEL_NAME = "kernel_blockscale_gemm_8wave"
BLOCK_M, BLOCK_N, BLOCK_K = 128, 256, 128
WAVE_SIZE = 64
WAVES_M, WAVES_N = 2, 4
WAVES = WAVES_M * WAVES_N
HALF_M, HALF_N = BLOCK_M // 2, BLOCK_N // 2  # a quadrant: 64 x 128 (one B scale block wide)
TILES = 2  # 16-wide MFMA tiles per wave per quadrant, in M and in N
#: fp8 MFMAs one wave issues per 128-K iteration: 4 quadrants x 2 x 2 tiles
MFMA_PER_K_ITER = 4 * TILES * TILES
#: quadrant clusters in issue order; the next step's operands are loaded as these retire
QUADRANTS = ((0, 0), (0, 1), (1, 0), (1, 1))

__all__ = ["EightWaveConfig", "CARD_CONFIG_8WAVE", "FLYDSL_VERSION"]


@dataclass(frozen=True)
class EightWaveConfig:
    """Compile-time knobs of the 8-wave core (the tile is fixed: 128 x 256 x 128).

    schedule: 'cluster' (the card's winner: every promote after the K iteration's last MFMA)
      or 'interleaved' (each quadrant promoted right after its own MFMAs: the negative
      variant of the static ``promote_cluster`` gate; numerically identical).
    ping_pong: offset the two wave rows by one barrier phase.
    waves_per_eu: occupancy hint (2: 256 unified VGPRs per wave; 8 waves = 1 CTA per CU).
    """

    schedule: Literal["cluster", "interleaved"] = "cluster"
    ping_pong: bool = True
    waves_per_eu: int = 2

    def __post_init__(self) -> None:
        if self.schedule not in ("cluster", "interleaved"):
            raise ValueError(f"schedule={self.schedule!r}: expected 'cluster' or 'interleaved'")
        if not 1 <= self.waves_per_eu <= 8:
            raise ValueError(f"waves_per_eu={self.waves_per_eu} must be in 1..8")

    @property
    def name(self) -> str:
        return f"8w_bm{BLOCK_M}_bn{BLOCK_N}_{self.schedule}_wpe{self.waves_per_eu}" + ("" if self.ping_pong else "_nopp")


CARD_CONFIG_8WAVE = EightWaveConfig()


def describe(cfg: EightWaveConfig) -> dict[str, Any]:
    """JSON-able config (reports, cache keys); ``kernel`` tells it from the 4-wave core's."""
    return asdict(cfg) | {"name": cfg.name, "kernel": "8wave", "tile_m": BLOCK_M, "tile_n": BLOCK_N, "tile_k": BLOCK_K}


def check_shapes(M: int, N: int, K: int) -> None:
    """Raise ValueError naming the violated constraint."""
    problems = []
    if M <= 0:
        problems.append(f"M={M} must be positive")
    if N <= 0 or N % BLOCK_N:
        problems.append(f"N={N} must be a positive multiple of BLOCK_N={BLOCK_N} (two 128-wide scale blocks)")
    if K < BLOCK_K or K % BLOCK_K:
        problems.append(f"K={K} must be a positive multiple of {BLOCK_K} (the scale block)")
    for what, nbytes in (("a", M * K), ("b", N * K), ("c", 2 * M * N), ("a_scale_t", 4 * M * max(K // 128, 1))):
        if nbytes >= 2**31:
            problems.append(f"{what} is {nbytes} bytes; 32-bit buffer offsets address < 2 GiB")
    if problems:
        raise ValueError("8-wave block-scale core: " + "; ".join(problems))


# ---------------------------------------------------------------------------------------
# Per-lane index maps in 32-bit words (every operand is viewed as int32). They work on
# Python ints and FlyDSL integers alike; the kernel traces them.
# ---------------------------------------------------------------------------------------
def a_words(row: Any, step: Any, group: Any, k: int) -> tuple[Any, Any]:
    """Row-major fp8 A: the two 16-byte packets lane group ``group`` feeds for ``row`` at
    128-K step ``step`` (K bytes [16 g, +16) and [64 + 16 g, +16) of the step)."""
    lo = row * (k // 4) + step * (BLOCK_K // 4) + group * 4
    return lo, lo + 16


def b_words(n_tile: Any, step: Any, lane: Any, k: int) -> tuple[Any, Any]:
    """CK 16x16 preshuffled B: 16-column tile ``n_tile``'s 2 KiB slab at step ``step``;
    lane ``l`` owns bytes [16 l, +16) and [1024 + 16 l, +16) of it."""
    lo = n_tile * 4 * k + step * 512 + lane * 4
    return lo, lo + 256


def tile_row(block_m: Any, qm: int, wave_m: Any, t: int) -> Any:
    """First row of the wave's A tile ``t`` in quadrant row ``qm``."""
    return block_m * BLOCK_M + qm * HALF_M + wave_m * (TILES * 16) + t * 16


def tile_col(block_n: Any, qn: int, wave_n: Any, j: int) -> Any:
    """First column of the wave's B tile ``j`` in quadrant column ``qn``."""
    return block_n * BLOCK_N + qn * HALF_N + wave_n * (TILES * 16) + j * 16


def c_words(row: Any, col: Any, n: Any) -> Any:
    """Word of bf16 row-major C holding (row, col); col is even (4 g), so 4 values = 2 words."""
    return row * (n // 2) + col // 2


# ---------------------------------------------------------------------------------------
# The kernel
# ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=32)
def make_launcher(K: int, cfg: EightWaveConfig = CARD_CONFIG_8WAVE):  # noqa: C901 - one kernel, top to bottom
    """The ``@flyc.jit`` launcher for compile-time ``K``.

    Arguments ``(c, a, b_shuffled, a_scale_t, b_scale, m, n, stream)``: flat int32 views of
    the bf16 C [M, N] (written in place), fp8 A [M, K], preshuffled fp8 B [N, K], fp32
    a_scale_t [K/128, M] and b_scale [N/128, K/128]; ``m``, ``n`` ints.
    """
    require_flydsl()
    if K < BLOCK_K or K % BLOCK_K:
        raise ValueError(f"K={K} must be a positive multiple of {BLOCK_K}")
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr import const_expr, range_constexpr, rocdl
    from flydsl.expr.typing import Vector as Vec

    steps = K // BLOCK_K
    scale_k = K // SCALE_BLOCK
    cluster = cfg.schedule == "cluster"

    @flyc.kernel(known_block_size=[WAVES * WAVE_SIZE, 1, 1])
    def kernel_blockscale_gemm_8wave(
        C: fx.Tensor,
        A: fx.Tensor,
        B: fx.Tensor,
        SA: fx.Tensor,
        SB: fx.Tensor,
        m: fx.Int32,
        n: fx.Int32,
    ):
        atom = fx.make_mma_atom(fx.rocdl.cdna4.MFMA_Scale(16, 16, 128, fx.Float8E4M3FN))
        ld128 = fx.make_copy_atom(fx.rocdl.BufferCopy128b(), fx.Int32)
        ld32 = fx.make_copy_atom(fx.rocdl.BufferCopy32b(), fx.Int32)
        st64 = fx.make_copy_atom(fx.rocdl.BufferCopy64b(), fx.Int32)

        def flat(t, nbytes):
            buf = fx.rocdl.make_buffer_tensor(t, max_size=False, num_records_bytes=nbytes)
            return fx.logical_divide(buf, fx.make_layout(1, 1))

        m64, n64 = fx.Int64(m), fx.Int64(n)
        gA = flat(A, m64 * K)
        gB = flat(B, n64 * K)
        gSA = flat(SA, m64 * (scale_k * 4))
        gC = flat(C, m64 * n64 * 2)
        sb_ptr = fx.get_iter(fx.rocdl.make_buffer_tensor(SB))

        tid = fx.thread_idx.x
        lane = tid % WAVE_SIZE
        wave = tid // WAVE_SIZE
        wave_m = wave // WAVES_N
        wave_n = wave % WAVES_N
        group = lane // 16
        r = lane % 16
        blocks_n = n // BLOCK_N
        block_m = fx.block_idx.x // blocks_n
        block_n = fx.block_idx.x % blocks_n
        nb0 = block_n * (BLOCK_N // SCALE_BLOCK)  # first B scale block of the tile (wave-uniform)

        def load_words(src, idx, width, copy_atom):
            frag = fx.make_rmem_tensor(width, fx.Int32)
            fx.copy(copy_atom, fx.slice(src, (None, fx.Int32(idx))), frag)
            return Vec(fx.memref_load_vec(frag))

        def load_pair(src, lo, hi):
            return load_words(src, lo, 4, ld128).shuffle(load_words(src, hi, 4, ld128), list(range(8)))

        # Operand halves of one step: A half qm = the wave's two A tiles of quadrant row qm,
        # B half qn likewise; the scales of a step: 4 A words (one per A tile, this lane's
        # row) and 2 B words (one per quadrant column, wave-uniform scalar loads).
        def load_a_half(step, qm):
            return [load_pair(gA, *a_words(tile_row(block_m, qm, wave_m, t) + r, step, group, K))
                    for t in range_constexpr(TILES)]

        def load_b_half(step, qn):
            return [load_pair(gB, *b_words(tile_col(block_n, qn, wave_n, j) // 16, step, lane, K))
                    for j in range_constexpr(TILES)]

        def load_scales(step):
            sa = [load_words(gSA, step * m + tile_row(block_m, qm, wave_m, t) + r, 1, ld32)[0]
                  for qm in range_constexpr(2) for t in range_constexpr(TILES)]
            sb = [fx.rocdl.s_buffer_load(sb_ptr, (nb0 + qn) * scale_k + step) for qn in range_constexpr(2)]
            return sa + sb

        def as_frag(value, width, dtype):
            frag = fx.make_rmem_tensor(width, dtype)
            frag.store(Vec(value))
            return frag

        zero4 = Vec.filled(4, 0.0, fx.Float32)

        def quadrant_mfma(a_half, b_half):
            """The quadrant's 2 x 2 MFMAs, each from a zero accumulator: unscaled partials.
            Index j * TILES + t: B tile j (X slot, swap-ab), A tile t (Y slot)."""
            parts = []
            for j in range_constexpr(TILES):
                x = as_frag(b_half[j], 8, fx.Int32)
                for t in range_constexpr(TILES):
                    cf = as_frag(zero4, 4, fx.Float32)
                    fx.gemm(atom, cf, x, as_frag(a_half[t], 8, fx.Int32), cf)
                    parts.append(cf.load())
            return parts

        def f32(word):
            # loop-carried values come back as raw arith values: re-wrap before filling
            return Vec.filled(1, fx.Int32(word), fx.Int32).bitcast(fx.Float32)[0]

        def promote(accs, parts, scales, qm, qn):
            """acc += partial * s_b * s_a for the quadrant's four tiles (fp32, software)."""
            s_b = Vec.filled(4, f32(scales[4 + qn]), fx.Float32)
            for j in range_constexpr(TILES):
                for t in range_constexpr(TILES):
                    s_a = Vec.filled(4, f32(scales[qm * TILES + t]), fx.Float32)
                    idx = acc_index(qm, qn, j, t)
                    accs[idx] = fx.fma(Vec(parts[j * TILES + t]) * s_b, s_a, Vec(accs[idx]))

        def barrier():
            # s_barrier alone does not stop LLVM's scheduler from moving MFMAs across it:
            # fence it so each quadrant's MFMAs stay between their two barriers
            rocdl.sched_barrier(0)
            rocdl.s_barrier()
            rocdl.sched_barrier(0)

        def acc_index(qm, qn, j, t):
            return ((qm * 2 + qn) * TILES + j) * TILES + t

        def k_step(accs, cur, step_next):
            """One 128-K iteration on the operand set ``cur``; loads the set of ``step_next``
            (None: the last step) as the current operands die. Returns (accs, next set)."""
            a_h = [cur[0:2], cur[2:4]]
            b_h = [cur[4:6], cur[6:8]]
            scales = cur[8:14]
            nxt = None
            if const_expr(step_next is not None):
                nxt = {"scales": load_scales(step_next)}
            accs = list(accs)
            held = []
            for qi in range_constexpr(4):
                qm, qn = QUADRANTS[qi]
                parts = quadrant_mfma(a_h[qm], b_h[qn])
                if const_expr(cluster):
                    held.append(parts)
                    if const_expr(qi == 3):
                        rocdl.sched_barrier(0)  # keep every promote below the last MFMA
                        for qj in range_constexpr(4):
                            promote(accs, held[qj], scales, *QUADRANTS[qj])
                else:
                    promote(accs, parts, scales, qm, qn)
                if const_expr(step_next is not None):
                    if const_expr(qi == 1):
                        nxt["a0"] = load_a_half(step_next, 0)  # A half 0 is dead after (0, 1)
                    elif const_expr(qi == 2):
                        nxt["b0"] = load_b_half(step_next, 0)  # B half 0 is dead after (1, 0)
                    elif const_expr(qi == 3):
                        nxt["a1"] = load_a_half(step_next, 1)
                        nxt["b1"] = load_b_half(step_next, 1)
                barrier()
            if const_expr(step_next is None):
                return accs, None
            return accs, nxt["a0"] + nxt["a1"] + nxt["b0"] + nxt["b1"] + nxt["scales"]

        def load_set(step):
            return load_a_half(step, 0) + load_a_half(step, 1) + load_b_half(step, 0) + load_b_half(step, 1) + \
                load_scales(step)

        n_acc = 4 * TILES * TILES
        set_len = 4 * TILES + 6
        if const_expr(cfg.ping_pong):
            if wave_m == 1:
                barrier()  # the second wave row runs one cluster behind the first
        accs = [zero4] * n_acc
        cur = load_set(fx.Int32(0))
        if const_expr(steps > 1):
            for iv, state in range(fx.Int32(0), fx.Int32(steps - 1), fx.Int32(1), init=accs + cur):
                accs_i, nxt = k_step(state[:n_acc], state[n_acc:], fx.Int32(iv) + 1)
                results = yield accs_i + nxt
            accs, cur = list(results[:n_acc]), list(results[n_acc:n_acc + set_len])
        accs, _ = k_step(accs, cur, None)
        if const_expr(cfg.ping_pong):
            if wave_m == 0:
                barrier()  # matches the second row's extra barrier

        # Epilogue: lane (g, r) of tile (qm, qn, j, t) holds row tile_row + r, columns
        # tile_col + 4 g .. + 3: four bf16 = one 8-byte store; rows past M are dropped.
        for qm in range_constexpr(2):
            for qn in range_constexpr(2):
                for j in range_constexpr(TILES):
                    for t in range_constexpr(TILES):
                        vals = Vec(accs[acc_index(qm, qn, j, t)]).to(fx.BFloat16).bitcast(fx.Int32)
                        row = tile_row(block_m, qm, wave_m, t) + r
                        col = tile_col(block_n, qn, wave_n, j) + group * 4
                        fx.copy(st64, as_frag(vals, 2, fx.Int32), fx.slice(gC, (None, fx.Int32(c_words(row, col, n)))))

    @flyc.jit
    def launch_blockscale_gemm_8wave(
        C: fx.Tensor,
        A: fx.Tensor,
        B: fx.Tensor,
        SA: fx.Tensor,
        SB: fx.Tensor,
        m: fx.Int32,
        n: fx.Int32,
        stream: fx.Stream = fx.Stream(None),
    ):
        grid = ((m + (BLOCK_M - 1)) // BLOCK_M) * (n // BLOCK_N)
        kernel_blockscale_gemm_8wave(
            C, A, B, SA, SB, m, n,
            value_attrs={"rocdl.waves_per_eu": cfg.waves_per_eu,
                         "rocdl.flat_work_group_size": f"{WAVES * WAVE_SIZE},{WAVES * WAVE_SIZE}"},
        ).launch(grid=(grid, 1, 1), block=(WAVES * WAVE_SIZE, 1, 1), stream=stream)

    return launch_blockscale_gemm_8wave


# ---------------------------------------------------------------------------------------
# Host side
# ---------------------------------------------------------------------------------------
def _words(t: "torch.Tensor") -> "torch.Tensor":
    import torch

    if not t.is_contiguous():
        raise ValueError(f"8-wave block-scale core: operand of shape {tuple(t.shape)} must be contiguous")
    if t.element_size() == 1:
        return t.view(torch.uint8).view(-1).view(torch.int32)
    return t.view(-1).view(torch.int32)


def launcher_args(inputs: dict[str, "torch.Tensor"], outputs: dict[str, "torch.Tensor"]) -> tuple:
    """``(c, a, b_shuffled, a_scale_t, b_scale, m, n)`` as flat int32 views (no copies)."""
    a, c = inputs["a"], outputs["c"]
    M, _ = a.shape
    N = inputs["b_shuffled"].shape[0]
    return (_words(c), _words(a), _words(inputs["b_shuffled"]), _words(inputs["a_scale_t"]),
            _words(inputs["b_scale"]), M, N)


def _dims(inputs: dict[str, "torch.Tensor"], outputs: dict[str, "torch.Tensor"], require_gpu: bool) -> tuple[int, int, int]:
    from .flydsl_gemm import _check_operands

    _check_operands(inputs, outputs, require_gpu=require_gpu)
    M, K = inputs["a"].shape
    N = inputs["b_shuffled"].shape[0]
    check_shapes(M, N, K)
    return M, N, K


def build(inputs: dict[str, "torch.Tensor"], outputs: dict[str, "torch.Tensor"],
          config: EightWaveConfig | None = None):
    """Candidate contract on ROCm (gfx950): compile once (untimed), return the zero-arg
    ``launch`` writing ``outputs['c']`` in place on the current stream."""
    import torch

    _, _, K = _dims(inputs, outputs, require_gpu=True)
    import flydsl.compiler as flyc

    launcher = make_launcher(K, config or CARD_CONFIG_8WAVE)
    args = launcher_args(inputs, outputs)
    compiled = flyc.compile(launcher, *args, torch.cuda.current_stream())
    if compiled is None:
        raise RuntimeError("flyc.compile returned nothing: COMPILE_ONLY is set in this process, so it cannot launch")

    def launch() -> None:
        compiled(*args, torch.cuda.current_stream())

    return launch


def build_emulated(inputs: dict[str, "torch.Tensor"], outputs: dict[str, "torch.Tensor"], kernels: dict):
    """The 8-wave arm on the gfx950 emulator: ``kernels["gemm"]`` is the kernel the
    emulated arm's target compiled (K is compile-time)."""
    gemm = kernels["gemm"]
    _, _, K = _dims(inputs, outputs, require_gpu=False)
    if gemm.config.get("K") != K:
        raise ValueError(f"the emulated kernel was compiled for K={gemm.config.get('K')}, the inputs have K={K}")
    args = launcher_args(inputs, outputs)

    def launch() -> None:
        gemm(*args)

    return launch


def compile_args(M: int, N: int, K: int, cfg: EightWaveConfig = CARD_CONFIG_8WAVE) -> tuple[Any, tuple]:
    """``(jit launcher, placeholder args)`` for a compile-only build (the static gates)."""
    import torch

    check_shapes(M, N, K)
    i32 = torch.int32
    args = (torch.zeros(M * N // 2, dtype=i32), torch.zeros(M * K // 4, dtype=i32), torch.zeros(N * K // 4, dtype=i32),
            torch.zeros(K // SCALE_BLOCK * M, dtype=i32), torch.zeros(N // SCALE_BLOCK * (K // SCALE_BLOCK), dtype=i32),
            M, N)
    return make_launcher(K, cfg), args

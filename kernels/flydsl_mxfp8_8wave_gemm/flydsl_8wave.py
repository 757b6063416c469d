"""FlyDSL gfx950 mxfp8 GEMM, 8 waves, ``BLOCK_M = 256``: the pull request's tile and store path.

Same operator, operand layouts and MFMA as the 4-wave kernel (``flydsl_gemm``): fp8 e4m3
operands with one ue8m0 scale per 32 K, ``v_mfma_scale_f32_16x16x128_f8f6f4`` with real
scale operands, A/B **swapped** (the B tile in the MFMA's A slot), preshuffled B, and the
**K-block-major scales packed four 16-row tiles to a dword** (``layouts.shuffle_mxfp8_*``), so
a lane loads one A-scale dword per 128-K step and ``opsel_b = t`` picks its A tile's byte
(``opsel_a = j % 4`` the B tile's) at no VALU cost.

What is the pull request's here:

* **Tile**: 512 threads = 8 waves in 4 (M) x 2 (N); ``BLOCK_M = 256`` (fixed: a lane's four
  16-row A tiles share one packed scale dword, 64 rows per wave), ``BLOCK_N`` 128 or 256,
  chosen by ``pick_block_n`` on the **wide grid size** (the narrow tile widens a launch-starved
  grid, so the rule looks at ``ceil(M/256) * N/256``, not at M alone).
* **Swap-ab store stages** (``stores="permlane"``): after swap-ab a lane holds 4 consecutive
  bf16 (8 bytes) of one row per 16-column tile. Stage 1, ``v_permlane16_swap`` on each pair of
  tiles, leaves every lane 16 contiguous bytes per pair; stage 2 (``BLOCK_N = 256``: a wave's
  row is 128 columns, four pairs), a ``ds_bpermute`` lane transpose among the four lanes of a
  row (XOR rotation, 4 rounds), leaves every lane 64 contiguous bytes of one row: four
  ``buffer_store_dwordx4`` at +0/16/32/48. With ``BLOCK_N = 128`` a wave's row is 64 columns
  held by 4 lanes, so only stage 1 applies (16-byte stores).

What is not (named honestly): the operands go global -> registers each 128-K step (no LDS,
no ping-pong of the HipKittens-derived mainloop the PR reuses), so this kernel does not
claim the PR's timings; ``stores="direct"`` (the 8-byte swap-ab stores, no lane exchange)
is the variant the static gate must reject. Both store paths run on the gfx950 emulator
(``gfx950_targets.EMULATED_ARMS``), the permlane one against the card's oracle.

Bounds: ``M`` a multiple of 64 (the packed A-scale group), rows past M read zeros and their
stores are dropped by the buffer descriptors; ``N`` a multiple of ``BLOCK_N``; ``K`` a
multiple of 128, at least 256. K is compile-time, M and N runtime. Written against FlyDSL 0.5.0.
"""
# No ``from __future__ import annotations``: FlyDSL reads the kernel annotations.
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .flydsl_gemm import (MFMA_K, MX_BLOCK, WAVE_SIZE, _check_operands, a_frag_offsets, b_frag_offsets,
                          launcher_args, scale_offset)

KERNEL_NAME = "mxfp8_gemm_8wave_swapab"
WAVES_M, WAVES_N = 4, 2
WAVES = WAVES_M * WAVES_N
BLOCK_M = 64 * WAVES_M  # 256
BLOCK_NS = (128, 256)
STORE_MODES = ("permlane", "direct")
#: the PR's dispatch constant: a wide (256-column) grid with fewer tiles than this launches
#: too few blocks for MI355X's 256 CUs, so the narrow tile is used. Derived from the PR's
#: table (14 rows): 128 wide tiles -> 128 (N=8192, M=1024), 140 -> 256 (N=5120, M=1792).
WIDE_GRID_MIN = 129


def pick_block_n(m: int, n: int) -> int:
    """``BLOCK_N`` for ``(M, N)`` from the wide grid size (see ``WIDE_GRID_MIN``)."""
    wide_grid = -(-m // BLOCK_M) * (n // 256)
    if n % 256 or (wide_grid < WIDE_GRID_MIN and n % 128 == 0):
        return 128
    return 256


@dataclass(frozen=True)
class Config8:
    block_n: int = 256
    stores: str = "permlane"
    waves_per_eu: int = 2

    def __post_init__(self) -> None:
        if self.block_n not in BLOCK_NS:
            raise ValueError(f"block_n={self.block_n}; expected one of {BLOCK_NS}")
        if self.stores not in STORE_MODES:
            raise ValueError(f"stores={self.stores!r}; expected one of {STORE_MODES}")

    @property
    def b_tiles(self) -> int:
        """16-column B tiles per wave: the wave's half of BLOCK_N."""
        return self.block_n // WAVES_N // 16

    @property
    def name(self) -> str:
        return f"8w_bm{BLOCK_M}_bn{self.block_n}_{self.stores}_wpe{self.waves_per_eu}"


def check_shape(m: int, n: int, k: int, cfg: Config8) -> None:
    problems = []
    if m <= 0 or m % 64:
        problems.append(f"M={m} must be a positive multiple of 64 (the packed A-scale group)")
    if k < 256 or k % MFMA_K:
        problems.append(f"K={k} must be a multiple of {MFMA_K} and >= 256")
    if n <= 0 or n % cfg.block_n:
        problems.append(f"N={n} must be a positive multiple of block_n={cfg.block_n}")
    for what, nbytes in (("A (M*K)", m * k), ("B (N*K)", n * k), ("C (2*M*N)", 2 * m * n)):
        if nbytes >= 2**31:
            problems.append(f"{what} = {nbytes} bytes exceeds the 2 GiB a 32-bit buffer offset can address")
    if problems:
        raise ValueError("mxfp8 8-wave FlyDSL GEMM: unsupported shape (the kernel never pads): " + "; ".join(problems))


# ---------------------------------------------------------------------------------------
# Store-stage index maps (plain functions: the kernel traces them, tests replay them on ints)
# ---------------------------------------------------------------------------------------
def stage1_column(pair: Any, group: Any) -> Any:
    """First column (within the wave's columns) of the 8 contiguous columns lane group
    ``group`` holds for tile pair ``pair`` after ``v_permlane16_swap(T_2p, T_2p+1)``: tile
    ``2 pair + group % 2``, columns ``8 (group // 2) ..``."""
    return 16 * (2 * pair + group % 2) + 8 * (group // 2)


def stage2_slot(src_group: Any) -> Any:
    """16-byte slot (0..3) of a lane's 64-byte row segment that the chunk from lane group
    ``src_group`` fills: tile offset ``(g' % 2) * 32`` bytes + ``(g' // 2) * 16``."""
    return 2 * (src_group % 2) + src_group // 2


def widen_rows(words: list, group: Any, row: Any, ops: Any) -> list:
    """The swap-ab store stages for one A tile, written once for the kernel and for the CPU
    lane model (``tests/test_mxfp8_store_stages.py``): ``words[j]`` = this lane's two words
    (4 bf16) of B tile ``j``; ``ops`` gives ``swap(even, odd)`` (v_permlane16_swap),
    ``bpermute(byte_addr, value)`` (ds_bpermute_b32) and ``select(cond, a, b)``.

    Returns ``[(column, [4 words])]``: 16-byte chunks and the wave-relative column each
    starts at. 4 tile pairs (block_n 256): four chunks at ``32 g + 8 s`` (64 contiguous
    bytes per lane); 2 pairs (block_n 128): stage 1 only, two chunks at ``stage1_column``."""
    pairs = len(words) // 2
    chunks = []
    for p in range(pairs):  # stage 1: tiles (2p, 2p+1) -> 8 contiguous columns per lane
        a, b = ops.swap(words[2 * p][0], words[2 * p + 1][0])
        c, d = ops.swap(words[2 * p][1], words[2 * p + 1][1])
        chunks.append([a, c, b, d])
    if pairs != 4:
        return [(stage1_column(p, group), chunks[p]) for p in range(pairs)]

    def by_group(values):  # values[group] of this lane
        out = values[3]
        for gg in (2, 1, 0):
            out = ops.select(group == gg, values[gg], out)
        return out

    # stage 2: lane group g gathers tile pair g (columns 32 g .. 32 g + 31) from the four lanes
    # of its row; in round q it reads lane group g ^ q, which sends its chunk of pair (own ^ q)
    received = []
    for q in range(4):
        src = ((group ^ q) * 16 + row) * 4  # byte address of the source lane
        received.append([ops.bpermute(src, by_group([chunks[gg ^ q][w] for gg in range(4)])) for w in range(4)])
    out = []
    for s in range(4):  # round q's chunk came from group g ^ q: slot stage2_slot(g ^ q)
        rounds = [next(q for q in range(4) if stage2_slot(gg ^ q) == s) for gg in range(4)]
        out.append((32 * group + 8 * s, [by_group([received[rounds[gg]][w] for gg in range(4)]) for w in range(4)]))
    return out


# ---------------------------------------------------------------------------------------
# The kernel
# ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def make_launcher(cfg: Config8, k: int) -> Callable[..., Any]:  # noqa: C901 - one kernel, top to bottom
    """The ``@flyc.jit`` launcher ``(a, b, sa, sb, c, m, n, stream)`` (flat int32 views, as
    ``flydsl_gemm.launcher_args`` builds them) for compile-time ``K``."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl._mlir import ir
    from flydsl._mlir.dialects import llvm
    from flydsl.expr import arith, as_ir_value, const_expr, range_constexpr, rocdl
    from flydsl.expr.typing import T
    from flydsl.expr.typing import Vector as Vec

    nb = cfg.b_tiles  # 8 (block_n 256) or 4 (block_n 128)
    block_n = cfg.block_n
    steps = k // MFMA_K
    permlane = cfg.stores == "permlane"

    @flyc.kernel(known_block_size=[WAVES * WAVE_SIZE, 1, 1])
    def mxfp8_gemm_8wave_swapab(
        A: fx.Tensor, B: fx.Tensor, SA: fx.Tensor, SB: fx.Tensor, C: fx.Tensor, m: fx.Int32, n: fx.Int32,
    ):
        atoms = {(j, t): fx.make_mma_atom(fx.rocdl.cdna4.MFMA_Scale(16, 16, 128, fx.Float8E4M3FN,
                                                                   opsel_a=j % 4, opsel_b=t))
                 for j in range(nb) for t in range(4)}
        ld128 = fx.make_copy_atom(fx.rocdl.BufferCopy128b(), fx.Int32)
        ld32 = fx.make_copy_atom(fx.rocdl.BufferCopy32b(), fx.Int32)
        st128 = fx.make_copy_atom(fx.rocdl.BufferCopy128b(), fx.Int32)
        st64 = fx.make_copy_atom(fx.rocdl.BufferCopy64b(), fx.Int32)

        def flat(t, nbytes):
            buf = fx.rocdl.make_buffer_tensor(t, max_size=False, num_records_bytes=nbytes)
            return fx.logical_divide(buf, fx.make_layout(1, 1))

        m64, n64 = fx.Int64(m), fx.Int64(n)
        gA = flat(A, m64 * k)
        gB = flat(B, n64 * k)
        gSA = flat(SA, m64 * (k // MX_BLOCK))
        gSB = flat(SB, n64 * (k // MX_BLOCK))
        gC = flat(C, m64 * n64 * 2)

        tid = fx.thread_idx.x
        lane = tid % WAVE_SIZE
        wave = tid // WAVE_SIZE
        group = lane // 16
        r = lane % 16
        blocks_n = n // block_n
        bid = fx.block_idx.x
        m_base = (bid // blocks_n) * BLOCK_M + (wave // WAVES_N) * 64
        n_base = (bid % blocks_n) * block_n + (wave % WAVES_N) * (nb * 16)

        def load_words(src, idx, width, atom):
            frag = fx.make_rmem_tensor(width, fx.Int32)
            fx.copy(atom, fx.slice(src, (None, fx.Int32(idx))), frag)
            return Vec(fx.memref_load_vec(frag))

        def load_pair(src, lo, hi):
            return load_words(src, lo, 4, ld128).shuffle(load_words(src, hi, 4, ld128), list(range(8)))

        def as_frag(value, width, dtype):
            frag = fx.make_rmem_tensor(width, dtype)
            frag.store(Vec(value))
            return frag

        zero = Vec.filled(4, 0.0, fx.Float32)

        def k_step(step, accs):
            """One 128-K step: load its operands and scale dwords, then 4 x nb scaled MFMAs."""
            xs = [as_frag(load_pair(gB, *b_frag_offsets(n_base // 16 + j, step, lane, k)), 8, fx.Int32)
                  for j in range_constexpr(nb)]
            ys = [as_frag(load_pair(gA, *a_frag_offsets(m_base + 16 * t + r, step, group, k)), 8, fx.Int32)
                  for t in range_constexpr(4)]
            sa = load_words(gSA, scale_offset(step, group, r, m_base, m), 1, ld32)[0]
            sbs = [load_words(gSB, scale_offset(step, group, r, n_base + 64 * q, n), 1, ld32)[0]
                   for q in range_constexpr(nb // 4)]
            out = []
            for j in range_constexpr(nb):
                for t in range_constexpr(4):
                    cf = as_frag(accs[j * 4 + t], 4, fx.Float32)
                    fx.gemm(atoms[(j, t)], cf, xs[j], ys[t], cf, scale_a=sbs[j // 4], scale_b=sa)
                    out.append(cf.load())
            return out

        n_acc = nb * 4
        accs = [zero] * n_acc
        for iv, state in range(fx.Int32(0), fx.Int32(steps), fx.Int32(1), init=accs):
            results = yield k_step(fx.Int32(iv), list(state))
        accs = list(results)

        pair_ty = ir.Type.parse("!llvm.struct<(i32, i32)>")

        class Ops:
            @staticmethod
            def swap(even, odd):
                """v_permlane16_swap_b32: odd 16-lane rows of ``even`` <-> even rows of ``odd``."""
                res = rocdl.permlane16_swap(pair_ty, as_ir_value(fx.Int32(even)), as_ir_value(fx.Int32(odd)), False, False)
                return fx.Int32(llvm.extractvalue(T.i32, res, [0])), fx.Int32(llvm.extractvalue(T.i32, res, [1]))

            @staticmethod
            def bpermute(addr, value):
                return fx.Int32(rocdl.ds_bpermute(T.i32, as_ir_value(fx.Int32(addr)), as_ir_value(fx.Int32(value))))

            @staticmethod
            def select(cond, a, b):
                return fx.Int32(arith.select(cond, fx.Int32(a), fx.Int32(b)))

        # Epilogue, per A tile t: row m_base + 16 t + r of C.
        for t in range_constexpr(4):
            row = m_base + 16 * t + r
            words = [Vec(accs[j * 4 + t]).to(fx.BFloat16).bitcast(fx.Int32) for j in range_constexpr(nb)]
            if const_expr(not permlane):
                for j in range_constexpr(nb):  # 4 bf16 of one row per tile: 8-byte stores
                    dst = row * (n // 2) + (n_base + 16 * j + 4 * group) // 2
                    fx.copy(st64, as_frag(words[j], 2, fx.Int32), fx.slice(gC, (None, fx.Int32(dst))))
            else:
                lane_words = [[words[j][0], words[j][1]] for j in range_constexpr(nb)]
                chunks = widen_rows(lane_words, group, r, Ops)
                if const_expr(len(chunks) == 4):
                    # one 64-byte row segment at column n_base + 32 g: one base address, the
                    # four 16-byte stores at +0/16/32/48 (chunk s starts at 32 g + 8 s)
                    seg = row * (n // 2) + n_base // 2 + 16 * group
                    for s_, (_, chunk) in enumerate(chunks):
                        fx.copy(st128, as_frag(Vec.from_elements(chunk, fx.Int32), 4, fx.Int32),
                                fx.slice(gC, (None, fx.Int32(seg + 4 * s_))))
                else:
                    for col, chunk in chunks:
                        dst = row * (n // 2) + (n_base + col) // 2
                        fx.copy(st128, as_frag(Vec.from_elements(chunk, fx.Int32), 4, fx.Int32),
                                fx.slice(gC, (None, fx.Int32(dst))))

    @flyc.jit
    def launch(A: fx.Tensor, B: fx.Tensor, SA: fx.Tensor, SB: fx.Tensor, C: fx.Tensor, m: fx.Int32, n: fx.Int32,
               stream: fx.Stream):
        grid = ((m + BLOCK_M - 1) // BLOCK_M) * (n // block_n)
        mxfp8_gemm_8wave_swapab(
            A, B, SA, SB, C, m, n,
            value_attrs={"rocdl.waves_per_eu": cfg.waves_per_eu,
                         "rocdl.flat_work_group_size": f"{WAVES * WAVE_SIZE},{WAVES * WAVE_SIZE}"},
        ).launch(grid=(grid, 1, 1), block=(WAVES * WAVE_SIZE, 1, 1), stream=stream)

    return launch


def build(inputs: dict, outputs: dict, cfg: "Config8 | None" = None) -> Callable[[], None]:
    """Candidate contract on ROCm (gfx950): ``block_n`` from ``pick_block_n`` unless given."""
    import torch

    import flydsl.compiler as flyc

    a, b_sh, sa_sh, sb_sh, c = (inputs["a"], inputs["b_shuffled"], inputs["a_scale_shuffled"],
                                inputs["b_scale_shuffled"], outputs["c"])
    m, n, k = _check_operands(a, b_sh, sa_sh, sb_sh, c)
    cfg = cfg or Config8(block_n=pick_block_n(m, n))
    check_shape(m, n, k, cfg)
    fn = make_launcher(cfg, k)
    args = launcher_args(a, b_sh, sa_sh, sb_sh, c)[:-1]
    compiled = flyc.compile(fn, *args, torch.cuda.current_stream())

    def launch() -> None:
        compiled(*args, torch.cuda.current_stream())

    return launch


def build_bn256(inputs: dict, outputs: dict) -> Callable[[], None]:
    """The wide-grid row's tile (``block_n=256``, permlane + ds_bpermute stores) at any shape."""
    return build(inputs, outputs, Config8(block_n=256))


def build_direct(inputs: dict, outputs: dict) -> Callable[[], None]:
    """Ablation: the 8-byte swap-ab stores without the lane-exchange stages."""
    m, n = inputs["a"].shape[0], inputs["b_shuffled"].shape[0]
    return build(inputs, outputs, Config8(block_n=pick_block_n(m, n), stores="direct"))


def build_emulated(inputs: dict, outputs: dict, kernels: dict) -> Callable[[], None]:
    """The 8-wave arm on the gfx950 emulator; ``kernels["gemm"]`` compiled by the arm's target."""
    a, b_sh, sa_sh, sb_sh, c = (inputs["a"], inputs["b_shuffled"], inputs["a_scale_shuffled"],
                                inputs["b_scale_shuffled"], outputs["c"])
    m, n, k = _check_operands(a, b_sh, sa_sh, sb_sh, c)
    gemm = kernels["gemm"]
    if gemm.config.get("K") != k:
        raise ValueError(f"the emulated kernel was compiled for K={gemm.config.get('K')}, the inputs have K={k}")
    block_n = gemm.config["block_n"]
    check_shape(m, n, k, Config8(block_n=block_n, stores=gemm.config["stores"]))
    if gemm.config.get("dispatch") and block_n != pick_block_n(m, n):
        # the recipe arm stands for build(): its emulated kernel must be the tile build() picks here
        raise ValueError(f"the emulated recipe kernel was compiled with block_n={block_n}, but pick_block_n({m}, {n}) "
                         f"= {pick_block_n(m, n)}: declare it at dims where the dispatch picks its tile")
    args = launcher_args(a, b_sh, sa_sh, sb_sh, c)[:-1]

    def launch() -> None:
        gemm(*args)

    return launch


def compile_args(cfg: Config8, m: int = 256, n: int = 256, k: int = 256) -> tuple:
    """``(jit launcher, placeholder args)`` for a compile-only build (the gfx950 gates)."""
    import flydsl.expr as fx
    import torch

    check_shape(m, n, k, cfg)
    a = torch.zeros(m, k, dtype=torch.uint8)
    b = torch.zeros(n, k, dtype=torch.uint8)
    sa = torch.zeros(k // MX_BLOCK, m, dtype=torch.uint8)
    sb = torch.zeros(k // MX_BLOCK, n, dtype=torch.uint8)
    c = torch.zeros(m, n, dtype=torch.bfloat16)
    return make_launcher(cfg, k), launcher_args(a, b, sa, sb, c, stream=fx.Stream(None))

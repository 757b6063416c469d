"""FlyDSL gfx950 mxfp8 GEMM: ``C[M, N] = (A * sa) @ (B * sb)^T`` in bf16, one ue8m0
(power-of-two) scale per 32 elements of K for both operands, applied by the hardware
scaled MFMA ``v_mfma_scale_f32_16x16x128_f8f6f4`` (no dequantisation arithmetic).

What this kernel is (named honestly): a **4-wave direct-to-register** kernel, not the
pull request's 8-wave LDS ping-pong pipeline. It keeps the two address ideas of that PR
that are about correctness of the operand layouts and cheap stores:

* **A/B swapped** in the MFMA: each instruction computes a 16x16 tile of ``C^T``
  (``X = B`` tile in the MFMA's A slot, ``Y = A`` tile in its B slot), so a lane's four
  accumulator values are four *consecutive columns* of one row of row-major ``C``: one
  8-byte store per tile instead of four 2-byte stores. (The PR's further permlane16 /
  ds_bpermute stages that widen this to 64-byte rows are not implemented.)
* **Shuffled scales** (``fp8_common.layouts.shuffle_mxfp8_{a,b}_scale``): K-block major,
  the four 16-row tiles of a 64-row group packed in one dword; a lane loads one dword per
  operand per 128-K step and the MFMA's ``opsel`` picks the tile's byte.

Schedule: 256 threads = 4 waves in a ``waves_m x waves_n`` grid; every wave owns a 64x64
block of C (4 x 4 MFMA tiles, 16 accumulators). Per 128-K step a wave loads its A rows
(row-major fp8, two 16-byte loads per tile: the f8f6f4 operand ABI puts K[16g, 16g+16)
and K[64+16g, 64+16g+16) in lane group g) and its B tiles (CK 16x16 preshuffle: the
lane's two 16-byte packets are at ``16*lane`` and ``1024 + 16*lane`` of a 2 KiB slab,
fully coalesced), straight into registers, one step ahead of the 16 MFMAs that consume
it: a runtime ``scf.for`` unrolled by two over ping-pong register sets, so no fragment is
ever copied between iterations. No LDS. K is a compile-time constant (one compile per
distinct K, as in the PR); M and N are runtime arguments.

Resources (gfx950, FlyDSL 0.5.0, compile-only): 178-228 VGPRs, no AGPRs, no LDS, no
scratch, 2 waves per SIMD; see ``gfx950_targets.py`` for the gates.

Bounds: every access goes through a buffer resource sized to the tensor, so the tail
M block (M a multiple of 64 but not of ``BLOCK_M``) reads zeros and its stores are
dropped by the hardware. Shapes the kernel cannot handle are rejected in
``check_shape`` with a ValueError, never padded.

The per-lane index arithmetic lives in plain functions (``a_frag_offsets`` ...) that
work on Python ints as well as FlyDSL integers: the kernel traces them, and the CPU test
``tests/test_mxfp8_kernel_map.py`` replays them against the real shuffled buffers and a
model of the MFMA's operand/scale ABI to check the addressing end to end.
"""
# No ``from __future__ import annotations`` here: FlyDSL reads the kernel annotations.
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import torch

KERNEL_NAME = "mxfp8_gemm_4wave_swapab"
WAVE_SIZE = 64
WAVES = 4
WAVE_TILE = 64  # rows (M) and columns (N) of C per wave
MFMA_K = 128
MX_BLOCK = 32
#: (waves_m, waves_n) -> BLOCK_M = 64 * waves_m, BLOCK_N = 64 * waves_n
WAVE_GRIDS = ((1, 4), (2, 2), (4, 1))


#: scale operand modes: "real" (the kernel), and two deliberately wrong variants that exist
#: only as NEGATIVE compile targets for the gfx950 gates: "pinned" (both scale operands the
#: constant E8M0 1.0 = 0x7F7F7F7F, what the fp8 block-scale kernel does) and "omitted"
#: (fx.gemm called without the scale keywords: the atom keeps its default scale 0, and
#: LLVM then selects the *unscaled* MFMA). A misspelled keyword (the PR's worry about
#: ``**kwargs``) is rejected by FlyDSL 0.5.0 at compile time ("failed to legalize
#: fly.atom.set_value"), so it needs no gate.
SCALE_MODES = ("real", "pinned", "omitted")
E8M0_ONE_X4 = 0x7F7F7F7F


@dataclass(frozen=True)
class KernelConfig:
    """Compile-time knobs. ``waves_m * waves_n`` must be 4."""

    waves_m: int = 2
    waves_n: int = 2
    waves_per_eu: int = 2
    scale_mode: str = "real"

    def __post_init__(self) -> None:
        if self.scale_mode not in SCALE_MODES:
            raise ValueError(f"scale_mode={self.scale_mode!r}; expected one of {SCALE_MODES}")
        if (self.waves_m, self.waves_n) not in WAVE_GRIDS:
            raise ValueError(
                f"(waves_m, waves_n)=({self.waves_m}, {self.waves_n}) not supported; choose one of {WAVE_GRIDS}"
            )
        if not 1 <= self.waves_per_eu <= 8:
            raise ValueError(f"waves_per_eu={self.waves_per_eu} must be in 1..8")

    @property
    def block_m(self) -> int:
        return WAVE_TILE * self.waves_m

    @property
    def block_n(self) -> int:
        return WAVE_TILE * self.waves_n

    @property
    def name(self) -> str:
        tail = "" if self.scale_mode == "real" else f"_scales_{self.scale_mode}"
        return f"bm{self.block_m}_bn{self.block_n}_wpe{self.waves_per_eu}{tail}"


def check_shape(m: int, n: int, k: int, cfg: "KernelConfig | None" = None) -> None:
    """Reject shapes the kernel cannot compute exactly (ValueError naming the rule)."""
    cfg = cfg or KernelConfig()
    problems = []
    if m <= 0 or m % 64:
        problems.append(f"M={m} must be a positive multiple of 64 (the packed A-scale group)")
    if k < 256 or k % MFMA_K:
        problems.append(f"K={k} must be a multiple of {MFMA_K} and >= 256")
    if n <= 0 or n % cfg.block_n or n % 32:
        problems.append(f"N={n} must be a positive multiple of the block ({cfg.block_n}) and of 32")
    # buffer offsets are 32-bit byte offsets computed in signed int32
    for what, nbytes in (("A (M*K)", m * k), ("B (N*K)", n * k), ("C (2*M*N)", 2 * m * n)):
        if nbytes >= 2**31:
            problems.append(f"{what} = {nbytes} bytes exceeds the 2 GiB a 32-bit buffer offset can address")
    if problems:
        raise ValueError(
            "mxfp8 FlyDSL GEMM: unsupported shape (pad the operands before quantising, the kernel "
            "never pads): " + "; ".join(problems)
        )


def pick_config(m: int, n: int) -> KernelConfig:
    """Default tile: the widest N block that divides N, narrower when the grid is small.

    A 4-wave kernel holds one 256-thread block per ~quarter CU; with fewer than ~2 blocks
    per CU (256 CUs on MI355X) prefer the block shape that gives more blocks.
    """
    for wm, wn in ((2, 2), (1, 4), (4, 1)):
        cfg = KernelConfig(waves_m=wm, waves_n=wn)
        if n % cfg.block_n == 0:
            return cfg
    return KernelConfig(waves_m=4, waves_n=1)  # block_n = 64; check_shape reports the rest


# ---------------------------------------------------------------------------------------
# Per-lane index maps, in 32-bit words (the kernel views every byte buffer as int32).
# Each works on Python ints and on FlyDSL Int32 values alike. Divisions only touch
# wave-uniform values (K, N, the wave's origin), never per-lane ones: a signed ``//`` on a
# per-lane value costs a floor correction on every lane.
# ---------------------------------------------------------------------------------------
def a_frag_offsets(row: Any, step: Any, group: Any, k: Any) -> tuple[Any, Any]:
    """Words of A (row-major [M, K] fp8) that lane group ``group`` (= lane // 16) of
    row ``row`` feeds the MFMA at 128-K step ``step``: K[16g, 16g+16) and K[64+16g, +16)."""
    lo = row * (k // 4) + step * (MFMA_K // 4) + group * 4
    return lo, lo + 16


def b_frag_offsets(n_tile: Any, step: Any, lane: Any, k: Any) -> tuple[Any, Any]:
    """Words of the preshuffled B for 16-column tile ``n_tile`` at 128-K step ``step``:
    the 2 KiB slab at byte ``n_tile * 16 * K + step * 2048``; lane ``l`` owns bytes
    ``[16 l, 16 l + 16)`` and ``[1024 + 16 l, +16)`` (CK 16x16 layout, see layouts.py)."""
    lo = n_tile * 4 * k + step * 512 + lane * 4
    return lo, lo + 256


def scale_offset(step: Any, group: Any, r: Any, base: Any, rows: Any) -> Any:
    """Word of a shuffled scale buffer ([K/32, rows] bytes, 4 tiles per dword) holding
    the scales of rows ``base + 16 t + r`` (t = 0..3; ``base`` a multiple of 64) in
    K block ``4 step + group``."""
    return (step * 4 + group) * (rows // 4) + base // 4 + r


def wave_origin(bid: Any, wave: Any, n_total: Any, cfg: "KernelConfig") -> tuple[Any, Any]:
    """First row and column of C owned by ``wave`` of block ``bid`` (blocks run along N
    first, so consecutive blocks share their A rows)."""
    blocks_n = n_total // cfg.block_n
    m_base = (bid // blocks_n) * cfg.block_m + (wave // cfg.waves_n) * WAVE_TILE
    n_base = (bid % blocks_n) * cfg.block_n + (wave % cfg.waves_n) * WAVE_TILE
    return m_base, n_base


def c_store_word(j: int, t: int, group: Any, r: Any, m_base: Any, n_base: Any, n_total: Any) -> Any:
    """Word of row-major bf16 C where lane (group, r) stores accumulator (B tile ``j``,
    A tile ``t``): the swapped MFMA's D row ``4 group + i`` is column
    ``n_base + 16 j + 4 group + i`` of C and its D column ``r`` is row
    ``m_base + 16 t + r``, so the four values are 8 contiguous bytes (two words)."""
    return (m_base + 16 * t + r) * (n_total // 2) + n_base // 2 + 8 * j + 2 * group


# ---------------------------------------------------------------------------------------
# The kernel
# ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def make_launcher(cfg: KernelConfig, k: int) -> Callable[..., Any]:
    """Return the ``@flyc.jit`` launcher for ``cfg`` and the compile-time ``K``.

    K is baked in (one compile per distinct K, as in the PR's kernel): the K loop's trip
    count and its odd-step tail are then known at trace time. M and N are runtime.
    Launcher arguments: ``(a, b, sa, sb, c, m, n, stream)``, every tensor a flat int32
    view of its bytes (``launcher_args`` builds them): the row-major fp8 A, the
    preshuffled B, the two shuffled e8m0 scale buffers, and the bf16 output C (written
    in place); m, n as ints.
    """
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr import const_expr, range_constexpr
    from flydsl.expr.typing import Vector as Vec

    block_m, block_n = cfg.block_m, cfg.block_n
    n_tiles = WAVE_TILE // 16  # 4 MFMA tiles per wave per dimension

    @flyc.kernel(known_block_size=[WAVES * WAVE_SIZE, 1, 1])
    def mxfp8_gemm_4wave_swapab(
        A: fx.Tensor,
        B: fx.Tensor,
        SA: fx.Tensor,
        SB: fx.Tensor,
        C: fx.Tensor,
        m: fx.Int32,
        n: fx.Int32,
    ):
        # One scaled-MFMA atom per (opsel_a, opsel_b): X = B tile j (opsel_a = j picks
        # its byte of the B-scale dword), Y = A tile t (opsel_b = t, A-scale dword).
        atoms = {
            (j, t): fx.make_mma_atom(
                fx.rocdl.cdna4.MFMA_Scale(16, 16, 128, fx.Float8E4M3FN, opsel_a=j, opsel_b=t)
            )
            for j in range(n_tiles)
            for t in range(n_tiles)
        }
        ld128 = fx.make_copy_atom(fx.rocdl.BufferCopy128b(), fx.Int32)
        ld32 = fx.make_copy_atom(fx.rocdl.BufferCopy32b(), fx.Int32)
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
        m_base, n_base = wave_origin(fx.block_idx.x, wave, n, cfg)
        steps = k // MFMA_K  # Python int

        def load_words(src, idx, width, atom):
            frag = fx.make_rmem_tensor(width, fx.Int32)
            fx.copy(atom, fx.slice(src, (None, fx.Int32(idx))), frag)
            return Vec(fx.memref_load_vec(frag))

        def load_pair(src, lo, hi):
            return load_words(src, lo, 4, ld128).shuffle(load_words(src, hi, 4, ld128), list(range(8)))

        def load_step(step):
            """Operand fragments and scale dwords of one 128-K step, in issue order."""
            b_frags = [
                load_pair(gB, *b_frag_offsets(n_base // 16 + j, step, lane, k)) for j in range_constexpr(n_tiles)
            ]
            a_frags = [
                load_pair(gA, *a_frag_offsets(m_base + 16 * t + r, step, group, k)) for t in range_constexpr(n_tiles)
            ]
            if const_expr(cfg.scale_mode == "pinned"):
                return b_frags, a_frags, fx.Int32(E8M0_ONE_X4), fx.Int32(E8M0_ONE_X4)
            sb = load_words(gSB, scale_offset(step, group, r, n_base, n), 1, ld32)[0]
            sa = load_words(gSA, scale_offset(step, group, r, m_base, m), 1, ld32)[0]
            return b_frags, a_frags, sa, sb

        def as_frag(value, width, dtype):
            frag = fx.make_rmem_tensor(width, dtype)
            frag.store(Vec(value))
            return frag

        def mma_step(accs, b_frags, a_frags, sa, sb):
            xs = [as_frag(v, 8, fx.Int32) for v in b_frags]
            ys = [as_frag(v, 8, fx.Int32) for v in a_frags]
            out = []
            for j in range_constexpr(n_tiles):
                for t in range_constexpr(n_tiles):
                    cf = as_frag(accs[j * n_tiles + t], 4, fx.Float32)
                    if const_expr(cfg.scale_mode == "omitted"):
                        fx.gemm(atoms[(j, t)], cf, xs[j], ys[t], cf)
                    else:
                        fx.gemm(atoms[(j, t)], cf, xs[j], ys[t], cf, scale_a=sb, scale_b=sa)
                    out.append(cf.load())
            return out

        # K loop, unrolled by two over ping-pong register sets: set "even" is loop-carried,
        # set "odd" lives inside one iteration. Each set is loaded one step ahead of the
        # MFMAs that consume it, and a set is only reloaded after its MFMAs have read it,
        # so the register allocator can reuse its registers (no loop-carried copies).
        n_acc = n_tiles * n_tiles
        zero = Vec.filled(4, 0.0, fx.Float32)

        def flat_set(ld):
            b_frags, a_frags, sa, sb = ld
            return list(b_frags) + list(a_frags) + [sa, sb]

        def split_set(v):
            return v[:n_tiles], v[n_tiles : 2 * n_tiles], v[2 * n_tiles], v[2 * n_tiles + 1]

        def mma_set(accs, v):
            bf, af, sa, sb = split_set(v)
            return mma_step(accs, bf, af, sa, sb)

        pairs = steps // 2  # >= 1: K >= 256
        state0 = [zero] * n_acc + flat_set(load_step(fx.Int32(0)))
        for iv, state in range(fx.Int32(0), fx.Int32(pairs - 1), fx.Int32(1), init=state0):
            step = fx.Int32(iv) * 2
            accs, even = list(state[:n_acc]), list(state[n_acc:])
            odd = flat_set(load_step(step + 1))
            accs = mma_set(accs, even)
            even = flat_set(load_step(step + 2))
            accs = mma_set(accs, odd)
            results = yield accs + even
        # last pair (steps 2 pairs - 2 and 2 pairs - 1) and, for an odd step count, the tail
        accs, even = list(results[:n_acc]), list(results[n_acc:])
        last = 2 * pairs - 2
        odd = flat_set(load_step(fx.Int32(last + 1)))
        accs = mma_set(accs, even)
        if const_expr(steps % 2 == 1):
            tail = flat_set(load_step(fx.Int32(last + 2)))
            accs = mma_set(accs, odd)
            accs = mma_set(accs, tail)
        else:
            accs = mma_set(accs, odd)

        # Epilogue: tile (j, t) lane (g, r) holds C[m_base + 16t + r, n_base + 16j + 4g + i],
        # i = 0..3: four consecutive bf16 = one 8-byte store.
        for j in range_constexpr(n_tiles):
            for t in range_constexpr(n_tiles):
                vals = Vec(accs[j * n_tiles + t]).to(fx.BFloat16).bitcast(fx.Int32)
                dst = fx.slice(gC, (None, fx.Int32(c_store_word(j, t, group, r, m_base, n_base, n))))
                fx.copy(st64, as_frag(vals, 2, fx.Int32), dst)

    @flyc.jit
    def launch(
        A: fx.Tensor,
        B: fx.Tensor,
        SA: fx.Tensor,
        SB: fx.Tensor,
        C: fx.Tensor,
        m: fx.Int32,
        n: fx.Int32,
        stream: fx.Stream,
    ):
        grid = ((m + block_m - 1) // block_m) * (n // block_n)
        mxfp8_gemm_4wave_swapab(
            A,
            B,
            SA,
            SB,
            C,
            m,
            n,
            value_attrs={"rocdl.waves_per_eu": cfg.waves_per_eu, "rocdl.flat_work_group_size": "256,256"},
        ).launch(grid=(grid, 1, 1), block=(WAVES * WAVE_SIZE, 1, 1), stream=stream)

    return launch


def launcher_args(
    a: "torch.Tensor",
    b_shuffled: "torch.Tensor",
    a_scale_shuffled: "torch.Tensor",
    b_scale_shuffled: "torch.Tensor",
    c: "torch.Tensor",
    stream: Any = None,
) -> tuple:
    """The launcher's argument tuple: flat int32 views (no copies) plus m, n (K is baked
    into the launcher: ``make_launcher(cfg, k)``)."""
    import torch

    m, k = a.shape
    n = b_shuffled.shape[0]

    def words(t: "torch.Tensor") -> "torch.Tensor":
        if not t.is_contiguous():
            raise ValueError(f"mxfp8 FlyDSL GEMM: operand of shape {tuple(t.shape)} must be contiguous")
        return t.view(torch.uint8).view(-1).view(torch.int32) if t.element_size() == 1 else t.view(-1).view(torch.int32)

    return (words(a), words(b_shuffled), words(a_scale_shuffled), words(b_scale_shuffled), words(c), m, n, stream)


def _check_operands(a, b_shuffled, a_scale_shuffled, b_scale_shuffled, c) -> tuple[int, int, int]:  # noqa: ANN001
    import torch

    if a.dim() != 2 or b_shuffled.dim() != 2:
        raise ValueError(
            f"mxfp8 FlyDSL GEMM: a and b_shuffled must be 2-D, got {tuple(a.shape)}, {tuple(b_shuffled.shape)}"
        )
    m, k = a.shape
    n, kb = b_shuffled.shape
    if kb != k:
        raise ValueError(
            f"mxfp8 FlyDSL GEMM: K mismatch, a is {tuple(a.shape)} and b_shuffled {tuple(b_shuffled.shape)}"
        )
    for name, t in (("a", a), ("b_shuffled", b_shuffled)):
        if t.element_size() != 1:
            raise TypeError(f"mxfp8 FlyDSL GEMM: {name} must hold fp8 e4m3 bytes, got {t.dtype}")
    for name, t, rows in (("a_scale_shuffled", a_scale_shuffled, m), ("b_scale_shuffled", b_scale_shuffled, n)):
        if t.element_size() != 1 or t.numel() != rows * (k // MX_BLOCK):
            raise ValueError(
                f"mxfp8 FlyDSL GEMM: {name} must be the shuffled [K/32, {rows}] e8m0 bytes "
                f"({rows * (k // MX_BLOCK)} bytes), got {t.dtype} {tuple(t.shape)}"
            )
    if c.dtype != torch.bfloat16 or tuple(c.shape) != (m, n):
        raise ValueError(f"mxfp8 FlyDSL GEMM: c must be bf16 [{m}, {n}], got {c.dtype} {tuple(c.shape)}")
    return m, n, k


def build(
    inputs: "dict[str, torch.Tensor]", outputs: "dict[str, torch.Tensor]", cfg: "KernelConfig | None" = None
) -> Callable[[], None]:
    """Candidate contract: compile once (untimed), return the zero-arg ``launch``.

    Reads ``a``, ``b_shuffled``, ``a_scale_shuffled``, ``b_scale_shuffled``; writes
    ``outputs["c"]`` in place on the current stream. Raises ValueError for shapes the
    kernel does not support (see ``check_shape``) before compiling anything.
    """
    import torch

    a, b_sh, sa_sh, sb_sh, c = (
        inputs["a"], inputs["b_shuffled"], inputs["a_scale_shuffled"], inputs["b_scale_shuffled"], outputs["c"]
    )
    m, n, k = _check_operands(a, b_sh, sa_sh, sb_sh, c)
    cfg = cfg or pick_config(m, n)
    check_shape(m, n, k, cfg)

    import flydsl.compiler as flyc

    fn = make_launcher(cfg, k)
    args = launcher_args(a, b_sh, sa_sh, sb_sh, c)[:-1]
    compiled = flyc.compile(fn, *args, torch.cuda.current_stream())

    def launch() -> None:
        compiled(*args, torch.cuda.current_stream())

    return launch


def build_emulated(inputs: "dict[str, torch.Tensor]", outputs: "dict[str, torch.Tensor]", kernels: dict) -> Callable[[], None]:
    """The FlyDSL arm on the gfx950 emulator (``verifiers.gfx950.emulator``): CPU tensors,
    the same launcher arguments as ``build``; ``kernels["gemm"]`` is the kernel compiled by
    the emulated arm's target (K and the wave grid are compile-time)."""
    a, b_sh, sa_sh, sb_sh, c = (
        inputs["a"], inputs["b_shuffled"], inputs["a_scale_shuffled"], inputs["b_scale_shuffled"], outputs["c"]
    )
    m, n, k = _check_operands(a, b_sh, sa_sh, sb_sh, c)
    gemm = kernels["gemm"]
    if gemm.config.get("K") != k:
        raise ValueError(f"the emulated kernel was compiled for K={gemm.config.get('K')}, the inputs have K={k}")
    check_shape(m, n, k, KernelConfig(waves_m=gemm.config["waves_m"], waves_n=gemm.config["waves_n"]))
    args = launcher_args(a, b_sh, sa_sh, sb_sh, c)[:-1]

    def launch() -> None:
        gemm(*args)

    return launch


def compile_args(cfg: "KernelConfig | None" = None, m: int = 128, n: int = 256, k: int = 256) -> tuple:
    """``(jit launcher, placeholder args)`` for a compile-only build on a machine with no
    GPU (the gfx950 gates): CPU placeholder tensors of the right dtypes and sizes."""
    import flydsl.expr as fx
    import torch

    cfg = cfg or KernelConfig()
    check_shape(m, n, k, cfg)
    a = torch.zeros(m, k, dtype=torch.uint8)
    b = torch.zeros(n, k, dtype=torch.uint8)
    sa = torch.zeros(k // MX_BLOCK, m, dtype=torch.uint8)
    sb = torch.zeros(k // MX_BLOCK, n, dtype=torch.uint8)
    c = torch.zeros(m, n, dtype=torch.bfloat16)
    return make_launcher(cfg, k), launcher_args(a, b, sa, sb, c, stream=fx.Stream(None))

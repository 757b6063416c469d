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
the previous step (a runtime ``scf.for`` with loop-carried fragments). No LDS.

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


@dataclass(frozen=True)
class KernelConfig:
    """Compile-time knobs. ``waves_m * waves_n`` must be 4."""

    waves_m: int = 2
    waves_n: int = 2
    waves_per_eu: int = 2

    def __post_init__(self) -> None:
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
        return f"bm{self.block_m}_bn{self.block_n}_wpe{self.waves_per_eu}"


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
# Each works on Python ints and on FlyDSL Int32 values alike (only + * //).
# ---------------------------------------------------------------------------------------
def a_frag_offsets(row: Any, step: Any, group: Any, k: Any) -> tuple[Any, Any]:
    """Words of A (row-major [M, K] fp8) that lane group ``group`` (= lane // 16) of
    row ``row`` feeds the MFMA at 128-K step ``step``: K[16g, 16g+16) and K[64+16g, +16)."""
    lo = (row * k + step * MFMA_K + group * 16) // 4
    return lo, lo + 16


def b_frag_offsets(n_tile: Any, step: Any, lane: Any, k: Any) -> tuple[Any, Any]:
    """Words of the preshuffled B for 16-column tile ``n_tile`` at 128-K step ``step``:
    the 2 KiB slab at ``n_tile * 16 * K + step * 2048``; lane ``l`` owns bytes
    ``[16 l, 16 l + 16)`` and ``[1024 + 16 l, +16)`` (CK 16x16 layout, see layouts.py)."""
    lo = (n_tile * 16 * k + step * 2048 + lane * 16) // 4
    return lo, lo + 256


def scale_offset(step: Any, group: Any, r: Any, base: Any, rows: Any) -> Any:
    """Word of a shuffled scale buffer ([K/32, rows] bytes, 4 tiles per dword) holding
    the scales of rows ``base + 16 t + r`` (t = 0..3) in K block ``4 step + group``."""
    return ((step * 4 + group) * rows + base) // 4 + r


def c_offset(m: Any, n: Any, n_total: Any) -> Any:
    """Element offset of C[m, n] in row-major bf16 C."""
    return m * n_total + n


# ---------------------------------------------------------------------------------------
# The kernel
# ---------------------------------------------------------------------------------------
def make_launcher(cfg: KernelConfig) -> Callable[..., Any]:
    """Return the ``@flyc.jit`` launcher for ``cfg``.

    Launcher arguments: ``(a, b, sa, sb, c, m, n, k, stream)``, every tensor a flat int32
    view of its bytes (``launcher_args`` builds them): the row-major fp8 A, the
    preshuffled B, the two shuffled e8m0 scale buffers, and the bf16 output C (written
    in place); m, n, k as ints.
    """
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr import range_constexpr
    from flydsl.expr.typing import Vector as Vec

    waves_m, waves_n = cfg.waves_m, cfg.waves_n
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
        k: fx.Int32,
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

        m64, n64, k64 = fx.Int64(m), fx.Int64(n), fx.Int64(k)
        gA = flat(A, m64 * k64)
        gB = flat(B, n64 * k64)
        gSA = flat(SA, (k64 // MX_BLOCK) * m64)
        gSB = flat(SB, (k64 // MX_BLOCK) * n64)
        gC = flat(C, m64 * n64 * 2)

        tid = fx.thread_idx.x
        lane = tid % WAVE_SIZE
        wave = tid // WAVE_SIZE
        group = lane // 16
        r = lane % 16
        blocks_n = n // block_n
        bid = fx.block_idx.x
        m_base = (bid // blocks_n) * block_m + (wave // waves_n) * WAVE_TILE
        n_base = (bid % blocks_n) * block_n + (wave % waves_n) * WAVE_TILE
        steps = k // MFMA_K

        def load_words(src, idx, width, atom):
            frag = fx.make_rmem_tensor(width, fx.Int32)
            fx.copy(atom, fx.slice(src, (None, fx.Int32(idx))), frag)
            return Vec(fx.memref_load_vec(frag))

        def load_pair(src, lo, hi):
            return load_words(src, lo, 4, ld128).shuffle(load_words(src, hi, 4, ld128), list(range(8)))

        def load_step(step):
            """Operand fragments and scale dwords of one 128-K step, in issue order."""
            b_frags = [load_pair(gB, *b_frag_offsets(n_base // 16 + j, step, lane, k)) for j in range_constexpr(n_tiles)]
            a_frags = [
                load_pair(gA, *a_frag_offsets(m_base + 16 * t + r, step, group, k)) for t in range_constexpr(n_tiles)
            ]
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
                    fx.gemm(atoms[(j, t)], cf, xs[j], ys[t], cf, scale_a=sb, scale_b=sa)
                    out.append(cf.load())
            return out

        zero = Vec.filled(4, 0.0, fx.Float32)
        b0, a0, sa0, sb0 = load_step(fx.Int32(0))
        n_acc = n_tiles * n_tiles
        state0 = [zero] * n_acc + b0 + a0 + [sa0, sb0]

        def unpack(state):
            accs = list(state[:n_acc])
            bf = list(state[n_acc : n_acc + n_tiles])
            af = list(state[n_acc + n_tiles : n_acc + 2 * n_tiles])
            return accs, bf, af, state[n_acc + 2 * n_tiles], state[n_acc + 2 * n_tiles + 1]

        for iv, state in range(fx.Int32(0), steps - 1, fx.Int32(1), init=state0):
            accs, bf, af, sa, sb = unpack(state)
            nb, na, nsa, nsb = load_step(fx.Int32(iv) + 1)  # next step's loads fly under this step's MFMAs
            accs = mma_step(accs, bf, af, sa, sb)
            results = yield accs + nb + na + [nsa, nsb]
        accs, bf, af, sa, sb = unpack(results)
        accs = mma_step(accs, bf, af, sa, sb)

        # Epilogue: tile (j, t) lane (g, r) holds C[m_base + 16t + r, n_base + 16j + 4g + i],
        # i = 0..3: four consecutive bf16 = one 8-byte store.
        for j in range_constexpr(n_tiles):
            for t in range_constexpr(n_tiles):
                vals = Vec(accs[j * n_tiles + t]).to(fx.BFloat16).bitcast(fx.Int32)
                row = m_base + 16 * t + r
                col = n_base + 16 * j + 4 * group
                dst = fx.slice(gC, (None, fx.Int32(c_offset(row, col, n) // 2)))
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
        k: fx.Int32,
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
            k,
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
    """The launcher's argument tuple: flat int32 views (no copies) plus m, n, k."""
    import torch

    m, k = a.shape
    n = b_shuffled.shape[0]

    def words(t: "torch.Tensor") -> "torch.Tensor":
        if not t.is_contiguous():
            raise ValueError(f"mxfp8 FlyDSL GEMM: operand of shape {tuple(t.shape)} must be contiguous")
        return t.view(torch.uint8).view(-1).view(torch.int32) if t.element_size() == 1 else t.view(-1).view(torch.int32)

    return (words(a), words(b_shuffled), words(a_scale_shuffled), words(b_scale_shuffled), words(c), m, n, k, stream)

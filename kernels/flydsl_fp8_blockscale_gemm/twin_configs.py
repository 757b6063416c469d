"""Tile configs for the Triton twin, chosen by shape class (never by layer name).

The card's levers are gfx950 ones (XCD swizzle, 4-wave t64x256x128, 8-wave cluster);
this module carries their Hopper analogues, reasoned from the H200's limits:

- **The promote sets the register budget.** Each 128-K step produces a fresh fp32
  MMA partial that is scaled and added to the accumulator, so a thread holds *two*
  fp32 tiles (accumulator + partial). A 128x128 tile needs 8 warps (two warpgroups,
  64 + 64 fp32 registers per thread); with 4 warps it would need 256 and spill,
  so 4 warps go with BLOCK_M=64. A 128x256 tile is done as two 128x128 halves
  (``split_n=2``), each with its own scalar weight scale, so only one half's
  partial is live at a time (128 + 64 registers).
- **bf16 MMAs on Hopper, fp8 elsewhere.** Scales are per 128-K block either way, but
  Hopper's fp8 wgmma accumulates inside the tensor core with fewer bits than fp32.
  Measured on the H200 (bench/results/blockscale_h200/, the card's four shapes,
  outlier-heavy activations): promoting every 128 K leaves 9-84 elements out of
  rtol=atol=1e-2 (cuBLAS's block-scale GEMM misses exactly the same ones), every 64 K
  0-8, every 32 K none on seed 0 but 7-229 once the activation scales are tripled.
  fp8 -> bf16 is exact and bf16 MMAs accumulate in fp32, so the default on Hopper
  upcasts (exact, about a fifth of cuBLAS's speed); the fp8 variants stay in the sweep
  so the bench shows what exactness costs. Strict parity wins over speed.
- **Wide-N (locality)**: the analogue of the card's XCD swizzle is the program
  order. When A (M x K bytes) fits in the cache every program shares, ``group_m``
  covers every M tile, so all programs that share a B panel run back to back and each
  B panel comes from HBM once, while A stays resident. That cache comes from the device
  (:class:`DeviceCache`): the H200's 60 MiB L2; on MI355X (gfx950) programs spread
  round-robin over 8 XCDs whose 4 MiB L2s share nothing, so it is the 256 MiB MALL
  (Infinity Cache) in front of HBM.
- **K-light (grid-saturated)**: a 6-step K loop cannot use a deep pipeline;
  3 stages, and the card's wide-tile lever (``tile_n=256``) is a sweep axis.
- **Narrow-N / deep-K**: the long K loop wants 4 stages; wide tiles (the card's
  8-wave BLOCK_N=256) and BLOCK_M=64 (more CTAs per SM, promote of one CTA hidden
  under another's MMA) are sweep axes.
- TMA loads (tensor descriptors) on Hopper; pointer loads on AMD and in the
  interpreter. ``num_stages`` is 2 on AMD (its stream pipeliner's sweet spot).

:func:`pick_config` gives the default for a shape and says why; :func:`sweep_configs`
lists the handful of configs the H200 bench tries before it verifies the best.
This module imports neither torch nor triton.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from verifiers.hw.amd_caches import KNOWN as AMD_LAYOUTS

ShapeClass = Literal["wide_n", "k_light", "narrow_n_deep_k", "generic"]
TwinPlatform = Literal["cuda", "rocm", "cpu"]

SCALE_BLOCK = 128
H200_SMS = 132
H200_L2_BYTES = 60 * 2**20
MiB = 2**20
#: A (M x K fp8 bytes) must fit in this share of L2 for the all-M program order
A_RESIDENT_FRACTION = 0.4
WIDE_N_MIN = 16384
K_LIGHT_MAX = 1024
NARROW_N_MAX = 2048
DEEP_K_MIN = 4096


class TwinConfig(BaseModel):
    """One launch configuration of ``blockscale_fp8_gemm_promote``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    block_m: Literal[64, 128]
    block_n: Literal[64, 128] = 128  # width of one MMA/promote step (one weight-scale column block)
    split_n: Literal[1, 2] = 1  # tile width = block_n * split_n
    block_k: Literal[32, 64, 128] = 128  # MMA K step; scales stay per 128-K block
    group_m: int = Field(8, ge=1, le=4096)
    num_warps: Literal[4, 8] = 8
    num_stages: int = Field(3, ge=1, le=6)
    use_tma: bool = False
    persistent: bool = False
    # persistent only: flatten the tile loop and the K loop into one pipelined loop, so
    # the next tile's loads are in flight during this tile's promote tail and epilogue
    flatten: bool = False
    # Triton's automatic warp specialisation of the K loop (TMA producer warps, MMA/promote
    # consumers); documented for Blackwell, experimental on Hopper: a sweep axis only
    warp_specialize: bool = False
    # MMA operand type: fp8 (the tensor core's own fp8 path) or bf16 (fp8 -> bf16 is exact,
    # and bf16 MMAs accumulate in full fp32, which Hopper's fp8 MMAs do not)
    mma_dtype: Literal["fp8", "bf16"] = "fp8"

    @model_validator(mode="after")
    def _check(self) -> "TwinConfig":
        if self.flatten and not self.persistent:
            raise ValueError("flatten=True needs persistent=True (it flattens the persistent tile loop)")
        if self.split_n == 2 and self.block_n != SCALE_BLOCK:
            raise ValueError("split_n=2 needs block_n=128 so each half sits in one weight-scale block")
        if self.block_m == 128 and self.num_warps == 4:
            raise ValueError(
                "block_m=128 with 4 warps holds two 128x128 fp32 tiles per warpgroup "
                "(256 registers per thread) and spills; use 8 warps or block_m=64"
            )
        return self

    @property
    def tile_n(self) -> int:
        return self.block_n * self.split_n

    @property
    def label(self) -> str:
        parts = [f"m{self.block_m}n{self.tile_n}k{self.block_k}", f"w{self.num_warps}s{self.num_stages}", f"g{self.group_m}"]
        if self.use_tma:
            parts.append("tma")
        if self.persistent:
            parts.append("persistent_flat" if self.flatten else "persistent")
        if self.warp_specialize:
            parts.append("ws")
        if self.mma_dtype == "bf16":
            parts.append("bf16mma")
        return "_".join(parts)


class ConfigChoice(BaseModel):
    model_config = ConfigDict(frozen=True)

    config: TwinConfig
    shape_class: ShapeClass
    reason: str


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def classify_shape(m: int, n: int, k: int, num_sms: int = H200_SMS) -> tuple[ShapeClass, str]:
    """The card's shape class of ``(M, N, K)`` and the measurable reason."""
    tiles = _cdiv(m, 128) * _cdiv(n, 128)
    if n >= WIDE_N_MIN:
        return "wide_n", (
            f"wide-N: N={n} >= {WIDE_N_MIN}; B is {n * k / 2**20:.0f} MiB and C {2 * m * n / 2**20:.0f} MiB, "
            f"so B-panel reuse through L2 (program order) is the locality lever"
        )
    if k <= K_LIGHT_MAX and tiles >= 4 * num_sms:
        return "k_light", (
            f"K-light: K={k} (<= {K_LIGHT_MAX}, {k // 128} K steps) with {tiles} 128x128 tiles "
            f"(>= 4 per SM on {num_sms} SMs): grid-saturated, the tile geometry is the lever"
        )
    if n <= NARROW_N_MAX and k >= DEEP_K_MIN:
        return "narrow_n_deep_k", (
            f"narrow-N/deep-K: N={n} <= {NARROW_N_MAX}, K={k} >= {DEEP_K_MIN}: long K loop over few "
            f"output tiles ({tiles}), pipelining and latency hiding are the levers"
        )
    return "generic", "no shape class of the card matches; generic 128x128 tile"


class DeviceCache(BaseModel):
    """The caches a program order can count on.

    ``l2_bytes`` is one L2 (what a device reports: per XCD on AMD's multi-die parts);
    ``l2_domains`` how many L2s the launch's programs are spread over (round-robin, so
    neighbouring programs never share one); ``shared_llc_bytes`` a last-level cache that
    every domain shares (MI355X's MALL), when known.
    """

    model_config = ConfigDict(frozen=True)

    l2_bytes: int = Field(gt=0)
    l2_domains: int = Field(1, ge=1)
    shared_llc_bytes: int | None = Field(None, gt=0)
    source: str

    @property
    def shared_bytes(self) -> int:
        """The cache all programs share: the L2 of a one-domain GPU; with several domains the
        shared last-level cache when known, else (conservatively) one domain's L2."""
        if self.l2_domains == 1:
            return self.l2_bytes
        return self.shared_llc_bytes or self.l2_bytes

    @property
    def label(self) -> str:
        if self.l2_domains == 1:
            return f"{self.l2_bytes / MiB:.0f} MiB L2 ({self.source})"
        llc = f", {self.shared_llc_bytes / MiB:.0f} MiB shared MALL" if self.shared_llc_bytes else ""
        return f"{self.l2_domains} x {self.l2_bytes / MiB:.0f} MiB L2{llc} ({self.source})"


#: the device the twin's exact config was measured on (bench/results/blockscale_h200)
H200_CACHE = DeviceCache(l2_bytes=H200_L2_BYTES, source="H200, measured")
#: AMD parts whose cache layout a device query does not fully report (it gives one XCD's L2)
KNOWN_AMD_CACHES = {
    arch: DeviceCache(l2_bytes=c.l2_per_xcd_bytes, l2_domains=c.xcds, shared_llc_bytes=c.mall_bytes, source=c.source)
    for arch, c in AMD_LAYOUTS.items()
}


def device_cache(platform: TwinPlatform, reported_l2_bytes: int | None = None, arch: str | None = None,
                 device_name: str = "") -> DeviceCache:
    """The cache model for a device from what it reports (``L2_cache_size``, ``gcnArchName``).

    A known AMD arch gets its full layout (the query reports one XCD's L2 only); any other
    GPU its reported L2 as one domain; no report (CPU, interpreter) the H200's, so the
    measured config stays the default there.
    """
    base_arch = (arch or "").split(":")[0]
    if platform == "rocm" and base_arch in KNOWN_AMD_CACHES:
        return KNOWN_AMD_CACHES[base_arch]
    if platform != "cpu" and reported_l2_bytes and reported_l2_bytes > 0:
        return DeviceCache(l2_bytes=reported_l2_bytes, source=f"reported by {device_name or base_arch or 'the device'}")
    return H200_CACHE


def _all_m_group(m: int, k: int, block_m: int, cache: DeviceCache) -> int | None:
    """group_m that sweeps every M tile per B panel, when A fits in the shared cache; else None."""
    if m * k <= A_RESIDENT_FRACTION * cache.shared_bytes:
        return _cdiv(m, block_m)
    return None


def pick_config(
    m: int,
    n: int,
    k: int,
    platform: TwinPlatform = "cuda",
    num_sms: int = H200_SMS,
    cache: DeviceCache = H200_CACHE,
) -> ConfigChoice:
    """Default config for ``(M, N, K)`` on ``platform``, with the shape class and why."""
    if min(m, n, k) <= 0 or k % SCALE_BLOCK or n % SCALE_BLOCK:
        raise ValueError(f"pick_config: need positive M and N, K multiples of {SCALE_BLOCK}; got {m}x{n}x{k}")
    cls, why = classify_shape(m, n, k, num_sms)
    block_m = 64 if m <= 64 else 128
    warps = 4 if block_m == 64 else 8
    tma = platform == "cuda"
    notes = []
    if cls == "wide_n":
        group = _all_m_group(m, k, block_m, cache)
        if group is None:
            group = 8
            notes.append(f"A ({m * k / MiB:.0f} MiB) does not fit in the {cache.label}: grouped order, group_m=8")
        else:
            notes.append(f"A ({m * k / MiB:.1f} MiB) stays in the {cache.label}: "
                         f"group_m={group} walks all M tiles per B panel")
        cfg = dict(block_m=block_m, group_m=group, num_warps=warps, num_stages=4)
    elif cls == "k_light":
        cfg = dict(block_m=block_m, group_m=8, num_warps=warps, num_stages=3)
        notes.append(f"{k // 128} K steps: 3 stages are enough to cover the loop")
    elif cls == "narrow_n_deep_k":
        cfg = dict(block_m=block_m, group_m=8, num_warps=warps, num_stages=4)
        notes.append(f"{k // 128} K steps: 4-stage pipeline")
    else:
        cfg = dict(block_m=block_m, group_m=8, num_warps=warps, num_stages=4)
    if platform == "rocm":
        cfg.update(num_stages=2, num_warps=4 if block_m == 64 else 8)
        notes.append("AMD: num_stages=2, pointer loads (untuned on gfx950; the FlyDSL arm is the tuned one)")
    elif platform == "cpu":
        notes.append("CPU: interpreter, pointer loads")
    else:
        notes.append("Hopper: TMA loads, two fp32 tiles per thread need 8 warps at BLOCK_M=128")
    if platform == "cuda":
        # the H200 sweep's winner on all four card shapes (bench/results/h200_blockscale)
        cfg.update(mma_dtype="bf16", split_n=2, num_stages=3)
        notes.append("bf16 MMAs on exact fp8->bf16 upcasts, 128x256 tile as two promoted halves: Hopper's fp8 MMA "
                     "accumulation is not fp32-exact, and fp8 MMAs (128-, 64- or 32-K promotes) missed strict parity "
                     "on the H200")
    config = TwinConfig(**cfg, use_tma=tma)
    return ConfigChoice(config=config, shape_class=cls, reason=f"{why}; " + "; ".join(notes))


def sweep_configs(
    m: int,
    n: int,
    k: int,
    platform: TwinPlatform = "cuda",
    num_sms: int = H200_SMS,
    cache: DeviceCache = H200_CACHE,
    limit: int | None = None,
) -> list[TwinConfig]:
    """The default config first, then a handful of alternatives for this shape class."""
    choice = pick_config(m, n, k, platform, num_sms, cache)
    base = choice.config
    tma = base.use_tma
    # most promising first (``limit`` keeps the head of the list). Compiled for sm_90
    # (``twin_aot``): 128x128/8 warps = 156 registers, 1 CTA per SM, and Triton puts a
    # CTA-wide barrier in every K step, so a CTA's promote stalls its own MMAs; only
    # other CTAs on the SM can fill that gap, hence the BLOCK_M=64 (1 warpgroup) rows.
    alts: list[dict] = [
        dict(block_m=128, num_warps=8, num_stages=4),
        dict(block_m=64, num_warps=4, num_stages=5),
        dict(block_m=64, num_warps=4, num_stages=3),  # 153 regs, 74 KiB smem at 128-K: 3 CTAs per SM
        dict(num_stages=5),
        # one CTA per SM, the next tile's loads issued during this tile's tail
        dict(persistent=True, flatten=True),
        dict(split_n=2, num_stages=3),  # 128x256 (the card's tile_n=256), halves promoted in turn
        dict(block_m=64, num_warps=4, split_n=2, num_stages=4),  # the card's t64x256x128
        # Triton's Hopper auto warp specialisation (TMA producer + two consumer partitions)
        dict(block_m=64, num_warps=4, num_stages=3, warp_specialize=True),
        dict(persistent=True),
    ]
    if choice.shape_class == "wide_n":
        alts.append(dict(group_m=8) if base.group_m != 8 else dict(group_m=_cdiv(m, base.block_m)))
    if platform == "cuda":
        # bf16 variants first, then what exactness costs: fp8 MMAs promoted every 32, 64 and
        # 128 K (the last is cuBLAS-like); they miss strict parity on Hopper with outlier data
        alts = [
            dict(block_m=64, num_warps=4, num_stages=4),
            dict(block_k=64, num_stages=4),
            dict(num_stages=4),
            dict(mma_dtype="fp8", block_k=32, block_m=64, num_warps=4, num_stages=5),
            dict(mma_dtype="fp8", block_k=32, block_m=128, num_warps=8, num_stages=4),
            dict(mma_dtype="fp8", block_k=64, block_m=64, num_warps=4, num_stages=4),
            dict(mma_dtype="fp8", block_k=128, block_m=64, num_warps=4, num_stages=4),
            dict(persistent=True, flatten=True),
            dict(split_n=2, num_stages=3),
        ]
    if tma:
        alts.append(dict(use_tma=False))
    else:
        alts = [a for a in alts if not a.get("warp_specialize")]  # auto-WS wants TMA descriptors
    if platform == "rocm":
        alts = [a for a in alts if not a.get("use_tma")]
    seen: set[str] = set()
    out: list[TwinConfig] = []
    for alt in [{}] + alts:
        fields = base.model_dump() | alt
        if fields["block_m"] == 64 and "group_m" not in alt and base.group_m > 8:
            fields["group_m"] = _cdiv(m, 64)  # keep the all-M order when the tile shrinks
        try:
            cfg = TwinConfig(**fields)
        except ValueError:
            continue
        if cfg.label not in seen:
            seen.add(cfg.label)
            out.append(cfg)
    return out[:limit] if limit else out

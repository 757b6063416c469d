"""``load_profile``: any supported profile in, ranked hotspots out.

Reading and aggregation are ``trace_readers``'s (one reader per format, shared with the
verifier); this module adds what only the server knows: the vocabulary (generation of
the trace's device, dtype and scale-format names the matcher accepts, MoE kernel roles
for the stage of each dispatch) and the boundary models.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from itertools import compress, repeat
from operator import is_not
from pathlib import Path

from trace_readers import Profile, TraceReadError, aggregate, read_trace
from trace_readers.read import paused_gc
from trace_readers.kernel_names import demangle, short_name

from skill_server.matching.hotspot import MAX_NAME_CHARS, MAX_SEGMENT_KERNELS, GemmShape, Hotspot
from skill_server.profiles.models import KernelResources, KernelVariant, LaunchOp, ProfiledHotspot, ProfileSummary
from skill_server.profiles.moe_stages import infer_stages
from skill_server.cards.vocabulary import Vocabulary, vocabulary
from skill_server.settings import SettingsError, settings
from trace_readers.source import MAX_BYTES_ENV

ProfileError = TraceReadError
_GFX = re.compile(r"\bgfx[0-9a-f]{3,4}\b", re.IGNORECASE)


def setting_max_bytes() -> int | None:
    """The profile size limit the deployment set (``SKILL_SERVER_PROFILE_MAX_BYTES``), else None
    (``trace_readers``' default); a value that does not parse is a ``ProfileError`` naming it."""
    try:
        return settings().profile_max_bytes
    except SettingsError as exc:
        if exc.variable != MAX_BYTES_ENV:
            raise
        raise ProfileError(str(exc), where=MAX_BYTES_ENV, expected="a positive integer byte count") from None


def _check_limits(top: int, min_pct: float) -> None:
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ProfileError(f"top={str(top)[:40]!r}", where="top", expected="an integer >= 1")
    if (isinstance(min_pct, bool) or not isinstance(min_pct, (int, float)) or not math.isfinite(min_pct)
            or not 0.0 <= min_pct <= 100.0):
        raise ProfileError(f"min_pct={str(min_pct)[:40]!r}", where="min_pct", expected="a percentage between 0 and 100")


def device_generation(names: list[str], vocab: Vocabulary) -> str | None:
    """The generation all the trace's devices resolve to (e.g. ``AMD Instinct MI355X
    (gfx950)`` -> gfx950, ``NVIDIA H200`` -> sm_90), else None."""
    gens = set()
    for name in names:
        candidates = [name, *(m.group(0) for m in _GFX.finditer(name)), *re.split(r"[()]", name)]
        gen = next((vocab.generation(c) for c in candidates if c.strip() and vocab.is_known_generation(c)), None)
        gens.add(gen)
    return gens.pop() if len(gens) == 1 and None not in gens else None


def load_profile(
    path: str | Path | None = None,
    content: str | bytes | None = None,
    format: str | None = None,
    top: int = 20,
    min_pct: float = 0.0,
    *,
    max_bytes: int | None = None,
) -> ProfileSummary:
    """Read a profile and rank its kernels by share of GPU time.

    Give ``path`` (a file; ``.gz`` or not) or ``content`` (its text or bytes; gzip'd and
    SQLite bytes accepted). The format is detected from the content unless ``format``
    names it (``trace_readers.FORMATS`` or an alias). Kernels are aggregated by full name
    and ranked by total time; those under ``min_pct`` percent of GPU time are dropped,
    and at most ``top`` are returned. Inputs over ``max_bytes`` (default:
    ``$SKILL_SERVER_PROFILE_MAX_BYTES`` or 512 MiB, also applied to the decompressed
    size) are refused. Every problem with the input raises ``ProfileError``.
    """
    _check_limits(top, min_pct)
    trace = read_trace(path, content, format, max_bytes=max_bytes if max_bytes is not None else setting_max_bytes())
    vocab = vocabulary()
    with paused_gc():
        stages, bases = infer_stages(trace, vocab)
        profile = aggregate(trace, stages if stages.count(None) < len(stages) else None)
    gen = device_generation(trace.device_names, vocab)
    notes = list(trace.notes)
    if trace.device_names and gen is None:
        notes.append(f"device {', '.join(trace.device_names)} is not one known generation: hotspot.gen left empty")
    basis = _bases(trace, stages, bases)
    shown: list[ProfiledHotspot] = []
    for rank, k in enumerate(profile.kernels, start=1):
        pct = _pct(k.total_ns, profile.total_ns)
        if pct < min_pct or len(shown) >= top:
            continue
        shown.append(_hotspot(k, rank, pct, profile, gen, basis, vocab))
    return ProfileSummary(
        format=trace.format,  # type: ignore[arg-type]
        source=trace.source,
        total_gpu_time_ns=profile.total_ns,
        dispatch_count=profile.dispatch_count,
        kernel_count=len(profile.kernels),
        hotspots=shown,
        omitted_kernels=len(profile.kernels) - len(shown),
        skipped=dict(trace.skipped),
        device_names=list(trace.device_names),
        device_gen=gen,
        segment_rule=profile.segment_rule,
        notes=notes,
    )


def _bases(trace, stages, bases) -> dict[tuple[str, str | None], str]:
    """(kernel name, stage) -> the most common basis for it."""
    placed = list(map(is_not, bases, repeat(None)))
    seen = Counter(zip(compress(trace.columns.name, placed), compress(stages, placed), compress(bases, placed)))
    best: dict[tuple[str, str | None], tuple[int, str]] = {}
    for (name, stage, why), n in seen.items():
        if (name, stage) not in best or n > best[(name, stage)][0]:
            best[(name, stage)] = (n, why)
    return {key: why for key, (_, why) in best.items()}



def _pct(part: int, whole: int) -> float:
    return min(100.0, max(0.0, round(100.0 * part / whole, 4)))


def _only(values) -> object:
    distinct = {v for v in values if v is not None}
    return distinct.pop() if len(distinct) == 1 else None


def _hotspot(k, rank: int, pct: float, profile: Profile, gen: str | None, basis: dict, vocab: Vocabulary) -> ProfiledHotspot:
    op_name = short_name(k.name)
    variants = []
    for v in k.variants:
        g = v.gemm
        shape = GemmShape(M=g.M, N=g.N, K=g.K, groups=g.groups) if g is not None else None
        dtype = g.dtype if g is not None and g.dtype and vocab.is_known_dtype(g.dtype) else None
        fmt = g.scale_format if g is not None and g.scale_format and vocab.is_known_scale_format(g.scale_format) else None
        stage = v.stage or (g.stage if g is not None else None)
        variants.append(KernelVariant(
            shape=shape, stage=stage, stage_basis=basis.get((k.name, v.stage)) or (
                f"named in {v.source_op!r}" if g is not None and g.stage else None),
            calls=v.calls, total_ns=v.total_ns, pct_gpu=_pct(v.total_ns, profile.total_ns),
            source_op=v.source_op, dtype=dtype, scale_format=fmt))
    variants = _merge(variants, profile.total_ns)
    placed_calls = sum(v.calls for v in variants)
    placed_ns = sum(v.total_ns for v in variants)
    segment: list[str] = []
    for other in k.mates:
        short = short_name(other)
        if short != op_name and short not in segment:
            segment.append(short[:MAX_NAME_CHARS])
        if len(segment) >= MAX_SEGMENT_KERNELS:
            break
    launch_names = sorted({op.name for op, _ in k.launch_ops})
    # a stage only when every call was placed in it: a MoE GEMM name both stages share, with
    # some calls placed by launch order and the rest not, is not one stage's kernel
    stage = _only(v.stage for v in variants) if placed_calls == k.calls else None
    hotspot = Hotspot(
        op_name=op_name[:MAX_NAME_CHARS],
        launch_op=launch_names[0][:MAX_NAME_CHARS] if len(launch_names) == 1 else None,
        gen=gen,
        dtype=_only(v.dtype for v in variants),
        scale_format=_only(v.scale_format for v in variants),
        shape=_only(v.shape for v in variants),
        stage=stage,
        stage_basis=(basis.get((k.name, stage)) if stage else basis.get((k.name, None))),
        segment_kernels=segment,
        pct_gpu=pct,
        label=k.scopes.most_common(1)[0][0][:MAX_NAME_CHARS] if k.scopes else None,
    )
    resources = None
    if k.resources:
        resources = KernelResources(**k.resources)
    by_name: dict[str, LaunchOp] = {}
    for op, n in k.launch_ops:  # most calls first: each name keeps its most frequent inputs
        if op.name in by_name:
            by_name[op.name].calls += n
            continue
        by_name[op.name] = LaunchOp(
            name=op.name, calls=n, input_dims=op.input_dims if isinstance(op.input_dims, list) else None,
            input_types=[str(t) for t in op.input_types] if isinstance(op.input_types, list) else None,
            concrete_inputs=op.concrete_inputs if isinstance(op.concrete_inputs, list) else None)
    launch_ops = sorted(by_name.values(), key=lambda o: (-o.calls, o.name))
    return ProfiledHotspot(
        rank=rank, hotspot=hotspot, full_name=k.name, demangled_name=demangle(k.name), calls=k.calls,
        total_ns=k.total_ns, avg_ns=k.total_ns / k.calls, min_ns=k.min_ns, max_ns=k.max_ns, resources=resources,
        launch_ops=launch_ops, scopes=[name for name, _ in k.scopes.most_common()], variants=variants,
        unplaced_calls=k.calls - placed_calls, unplaced_ns=max(0, k.total_ns - placed_ns),
        segment_known=profile.segment_known,
    )


def _merge(variants: list[KernelVariant], total: int) -> list[KernelVariant]:
    """Variants that differ only in what the vocabulary dropped (an unknown dtype name) are one."""
    merged: dict[tuple, KernelVariant] = {}
    for v in variants:
        if v.shape is None and v.stage is None:
            continue
        key = (v.shape, v.stage, v.source_op, v.dtype, v.scale_format)
        if key in merged:
            m = merged[key]
            merged[key] = m.model_copy(update={"calls": m.calls + v.calls, "total_ns": m.total_ns + v.total_ns,
                                               "pct_gpu": _pct(m.total_ns + v.total_ns, total)})
        else:
            merged[key] = v
    return sorted(merged.values(), key=lambda v: (-v.total_ns, str(v.shape), v.source_op or "", v.stage or ""))

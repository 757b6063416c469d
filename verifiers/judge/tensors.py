"""Tensor guards for the candidate contract: plain tensors, cloning, poisoning, bitwise checks.

Everything here works on any device; nothing here knows about problems or arms.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import torch

Tensors = dict[str, "torch.Tensor"]

# Poison values per run: a float output is NaN-filled (no correct output contains NaN);
# integer and bool outputs get a different sentinel in each run, so an element still
# holding run 1's sentinel *and* run 2's sentinel was never written.
POISON_RUNS = (0, 1)


def plain_tensor_problem(value: Any, where: str, device: "torch.device | None" = None) -> str | None:
    """Why ``value`` is not a plain ``torch.Tensor`` with real storage, or None if it is."""
    import torch

    if type(value) is not torch.Tensor:
        return f"{where}: expected a plain torch.Tensor, got {type(value).__module__}.{type(value).__qualname__}"
    if value.is_meta:
        return f"{where}: is a meta tensor (no storage)"
    if value.layout is not torch.strided:
        return f"{where}: layout {value.layout} is not strided"
    if device is not None and value.device.type != device.type:
        return f"{where}: on {value.device}, expected {device.type}"
    if value.numel() > 0:
        try:
            storage = value.untyped_storage()
        except Exception as exc:  # functional / fake tensors raise here
            return f"{where}: has no real storage ({exc})"
        if storage.data_ptr() == 0:
            return f"{where}: storage pointer is null"
        needed = (value.storage_offset() + _span(value)) * value.element_size()
        if storage.nbytes() < needed:
            return f"{where}: storage holds {storage.nbytes()} bytes, view needs {needed}"
    return None


def _span(t: "torch.Tensor") -> int:
    if t.numel() == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))


def check_plain(tensors: Mapping[str, Any], what: str, device: "torch.device | None" = None) -> list[str]:
    problems = []
    for name, value in tensors.items():
        reason = plain_tensor_problem(value, f"{what}[{name!r}]", device)
        if reason:
            problems.append(reason)
    return problems


def clone_tensors(tensors: Mapping[str, "torch.Tensor"]) -> Tensors:
    """Independent copies that keep dtype, shape and strides (own storage each)."""
    return {name: t.detach().clone() for name, t in tensors.items()}


def copy_into(dst: Mapping[str, "torch.Tensor"], src: Mapping[str, "torch.Tensor"], names: list[str] | None = None) -> None:
    """Overwrite ``dst`` values in place (same pointers) with ``src`` values."""
    for name in names if names is not None else list(dst):
        dst[name].copy_(src[name])


def _bytes(t: "torch.Tensor") -> "torch.Tensor":
    """The raw bytes of ``t`` as a flat uint8 tensor."""
    import torch

    return t.detach().contiguous().reshape(-1).view(torch.uint8)


_INT_VIEWS = ((8, "int64"), (4, "int32"), (2, "int16"), (1, "uint8"))


def _words(t: "torch.Tensor") -> "torch.Tensor":
    """The raw bytes of ``t`` viewed as the widest integer type that divides them
    (comparing uint8 element by element is ~1000x slower on CPU)."""
    import torch

    raw = _bytes(t)
    for size, name in _INT_VIEWS:
        if raw.numel() % size == 0:
            return raw.view(getattr(torch, name))
    return raw  # pragma: no cover


def bitwise_equal(a: "torch.Tensor", b: "torch.Tensor") -> bool:
    """True when shape, dtype and every byte agree (NaN payloads included)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return not bool(bitwise_differs(a, b).item())


#: elements per chunk of ``content_digest`` (its int64 temporaries: 8 bytes each)
DIGEST_CHUNK = 1 << 24


def content_digest(t: "torch.Tensor") -> tuple[int, ...]:
    """A digest of ``t``'s bytes computed where ``t`` lives, chunk by chunk, without a copy of
    it: per chunk, the wrapping int64 sum of its words and of its words weighted by position
    (a changed word changes the first sum, moved words the second). For checking that trusted
    code left a tensor alone (an authoring mistake, not an adversary): the judge's check of a
    problem's refresh against what it declares, at 7 GiB of MoE expert weights no clone fits."""
    import torch

    words = _words(t).reshape(-1)
    sums = []
    for start in range(0, words.numel(), DIGEST_CHUNK):
        x = words[start:start + DIGEST_CHUNK].to(torch.int64)
        weight = torch.arange(start, start + x.numel(), device=x.device, dtype=torch.int64) % 65521 + 1
        sums.append(torch.stack([x.sum(), (x * weight).sum()]))
    digest = torch.cat(sums).tolist() if sums else []
    return (str(t.dtype), tuple(t.shape), *digest)


def bitwise_differs(a: "torch.Tensor", b: "torch.Tensor") -> "torch.Tensor":
    """A 0-d bool tensor on ``a``'s device: any byte differs (same shape and dtype assumed).
    Nothing is read back, so a GPU caller can queue it and look after a block of calls."""
    wa, wb = _words(a), _words(b.to(a.device))
    return (wa != wb).any()


def count_bit_differences(a: "torch.Tensor", b: "torch.Tensor") -> int:
    """Elements whose bytes differ (NaN payloads included)."""
    if a.numel() == 0:
        return 0
    ab = _bytes(a).reshape(a.numel(), -1)
    bb = _bytes(b.to(a.device)).reshape(b.numel(), -1)
    return int((ab != bb).any(dim=-1).sum().item())


def changed_tensors(current: Mapping[str, "torch.Tensor"], pristine: Mapping[str, "torch.Tensor"]) -> list[str]:
    """Names whose bytes differ from the pristine copy."""
    return [name for name, t in pristine.items() if not bitwise_equal(current[name], t)]


def poison(outputs: Mapping[str, "torch.Tensor"], run: int) -> None:
    """Fill every output with the poison of run ``run`` (0 or 1)."""
    import torch

    for t in outputs.values():
        if t.dtype.is_floating_point or t.dtype.is_complex:
            t.fill_(float("nan"))
        elif t.dtype is torch.bool:
            t.fill_(run == 0)
        else:
            info = torch.iinfo(t.dtype)
            t.fill_(info.min if run == 0 else info.max)


def poison_value(t: "torch.Tensor", run: int) -> float | int | bool | None:
    """The sentinel ``poison`` writes into an integer/bool tensor in run ``run`` (None for floats)."""
    import torch

    if t.dtype.is_floating_point or t.dtype.is_complex:
        return None
    if t.dtype is torch.bool:
        return run == 0
    info = torch.iinfo(t.dtype)
    return info.min if run == 0 else info.max


def count_nan(t: "torch.Tensor") -> int:
    import torch

    if not (t.dtype.is_floating_point or t.dtype.is_complex):
        return 0
    wide = t.to(torch.complex128 if t.dtype.is_complex else torch.float64)
    return int(torch.isnan(wide).sum().item())


def count_unwritten_pair(first: "torch.Tensor", second: "torch.Tensor") -> int:
    """Integer/bool outputs: elements that held run 0's sentinel in run 0 and run 1's in run 1."""
    s0, s1 = poison_value(first, 0), poison_value(second, 1)
    if s0 is None or s1 is None:
        return 0
    return int(((first == s0) & (second == s1)).sum().item())


def describe(t: "torch.Tensor") -> str:
    return f"{tuple(t.shape)} {str(t.dtype).replace('torch.', '')} on {t.device}"

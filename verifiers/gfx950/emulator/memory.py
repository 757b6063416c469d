"""Global memory (the kernel's argument buffers) and the workgroup's LDS.

Global memory: every argument tensor's storage is mapped at a virtual address of its
own (deterministic: ``GLOBAL_BASE + i * REGION_STRIDE``); pointers in the kernarg are
those virtual addresses, so a kernel can only ever reach the bytes we mapped. A lane
access is allowed only inside an argument's own extent (or the kernarg segment);
anything else is a ``MemoryAccessError`` naming the instruction, lane and address.
Reads and writes go straight into the tensors' storage (numpy views, no copies).

LDS: bytes plus a per-byte poison flag (LDS starts poisoned, as on silicon it holds
whatever the previous workgroup left), and per-dword race bookkeeping (which wave
wrote it in which barrier epoch, which waves read it in the current epoch).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verifiers.gfx950.emulator.errors import MemoryAccessError

GLOBAL_BASE = 1 << 40
REGION_STRIDE = 1 << 36  # 64 GiB between mapped storages
KERNARG_BASE = 1 << 39


@dataclass
class Extent:
    lo: int
    hi: int
    name: str
    region: "Region"


@dataclass
class Region:
    base: int
    data: np.ndarray  # uint8, writable view of the storage
    name: str

    @property
    def end(self) -> int:
        return self.base + self.data.size


class GlobalMemory:
    def __init__(self) -> None:
        self.regions: list[Region] = []
        self.extents: list[Extent] = []
        self._by_storage: dict[int, Region] = {}
        self._starts = np.zeros(0, dtype=np.int64)

    # ------------------------------------------------------------------ mapping
    def map_tensor(self, tensor, name: str) -> int:  # noqa: ANN001 - torch.Tensor
        """Map a CPU tensor's storage (once per storage) and allow its extent; returns its VA."""
        import torch

        if tensor.device.type != "cpu":
            raise MemoryAccessError(f"argument {name}: tensor is on {tensor.device}; the emulator needs CPU tensors")
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        region = self._by_storage.get(key)
        if region is None:
            raw = torch.empty(0, dtype=torch.uint8).set_(storage)  # byte view sharing the storage
            region = Region(GLOBAL_BASE + len(self.regions) * REGION_STRIDE, raw.numpy(), name)
            self.regions.append(region)
            self._by_storage[key] = region
        offset = tensor.data_ptr() - key
        nbytes = _extent_bytes(tensor)
        va = region.base + offset
        self._allow(Extent(va, va + nbytes, name, region))
        return va

    def map_bytes(self, data: np.ndarray, name: str, base: int) -> int:
        region = Region(base, data, name)
        self.regions.append(region)
        self._allow(Extent(base, base + data.size, name, region))
        return base

    def _allow(self, ext: Extent) -> None:
        self.extents.append(ext)
        self.extents.sort(key=lambda e: e.lo)
        self._starts = np.array([e.lo for e in self.extents], dtype=np.int64)

    # ------------------------------------------------------------------ access
    def _extent_for(self, addrs: np.ndarray, size: int, what: str) -> list[tuple[np.ndarray, Extent]]:
        """Group lane addresses by the extent holding [addr, addr+size); error otherwise."""
        lo, hi = int(addrs.min()), int(addrs.max()) + size
        idx = int(np.searchsorted(self._starts, lo, side="right")) - 1
        if idx >= 0:
            e = self.extents[idx]
            if lo >= e.lo and hi <= e.hi:
                return [(np.ones(addrs.shape, dtype=bool), e)]
        # slow path: lane by lane
        out: dict[int, list[int]] = {}
        for lane, a in enumerate(addrs.tolist()):
            j = int(np.searchsorted(self._starts, a, side="right")) - 1
            if j < 0 or not (self.extents[j].lo <= a and a + size <= self.extents[j].hi):
                j = self._containing(a, size)
            if j is None:
                raise MemoryAccessError(self._describe_miss(a, size, what))
            out.setdefault(j, []).append(lane)
        groups = []
        for j, lanes in out.items():
            m = np.zeros(addrs.shape, dtype=bool)
            m[lanes] = True
            groups.append((m, self.extents[j]))
        return groups

    def _containing(self, a: int, size: int) -> int | None:
        for j, e in enumerate(self.extents):  # overlapping extents (aliasing views): any that holds it
            if e.lo <= a and a + size <= e.hi:
                return j
        return None

    def _describe_miss(self, a: int, size: int, what: str) -> str:
        near = min(self.extents, key=lambda e: min(abs(a - e.lo), abs(a - e.hi)), default=None)
        where = ""
        if near is not None:
            if a >= near.hi:
                where = f"; nearest is argument {near.name} [0x{near.lo:x}, 0x{near.hi:x}), {a - near.hi} bytes past its end"
            elif a + size > near.hi:
                where = f"; it straddles the end of argument {near.name} ({near.hi - near.lo} bytes)"
            else:
                where = f"; nearest is argument {near.name}, {near.lo - a} bytes before its start"
        return f"{what}: access [0x{a:x}, 0x{a + size:x}) is outside every argument's buffer{where}"

    def load(self, addrs: np.ndarray, size: int, what: str) -> np.ndarray:
        """Bytes [len(addrs), size] at the given virtual addresses (int64)."""
        out = np.empty((addrs.size, size), dtype=np.uint8)
        if addrs.size == 0:
            return out
        groups = self._extent_for(addrs, size, what)
        if len(groups) == 1:  # every lane in one extent: gather without a mask
            off = addrs - groups[0][1].region.base
            words = _dword_view(groups[0][1].region.data, off, size)
            if words is not None:  # aligned whole dwords: a quarter of the index work
                return words[(off >> 2)[:, None] + np.arange(size >> 2)].view(np.uint8).reshape(addrs.size, size)
            return groups[0][1].region.data[off[:, None] + np.arange(size, dtype=np.int64)]
        cols = np.arange(size, dtype=np.int64)
        for mask, ext in groups:
            off = addrs[mask] - ext.region.base
            out[mask] = ext.region.data[off[:, None] + cols]
        return out

    def store(self, addrs: np.ndarray, data: np.ndarray, what: str) -> None:
        if addrs.size == 0:
            return
        size = data.shape[1]
        groups = self._extent_for(addrs, size, what)
        if len(groups) == 1:
            off = addrs - groups[0][1].region.base
            words = _dword_view(groups[0][1].region.data, off, size)
            if words is not None:
                words[(off >> 2)[:, None] + np.arange(size >> 2)] = \
                    np.ascontiguousarray(data).view(np.uint32).reshape(addrs.size, size >> 2)
                return
            groups[0][1].region.data[off[:, None] + np.arange(size, dtype=np.int64)] = data
            return
        cols = np.arange(size, dtype=np.int64)
        for mask, ext in groups:
            off = addrs[mask] - ext.region.base
            ext.region.data[off[:, None] + cols] = data[mask]


def _dword_view(data: np.ndarray, off: np.ndarray, size: int) -> np.ndarray | None:
    """``data`` as uint32 words when the accesses at byte offsets ``off`` are whole aligned
    dwords of it (and its buffer allows the view); else None (byte-wise access)."""
    if size & 3 or data.size & 3 or data.ctypes.data & 3 or (off & 3).any():
        return None
    return data.view(np.uint32)


def _extent_bytes(t) -> int:  # noqa: ANN001
    if t.numel() == 0:
        return 0
    last = sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    return (last + 1) * t.element_size()


class LdsBank:
    """The LDS of several workgroups, one row each, so that batched DS instructions
    (``ops.ds``) index all of them at once; each workgroup's ``Lds`` is a view of its row."""

    def __init__(self, groups: int, nbytes: int) -> None:
        n = max(nbytes, 4)
        dw = (n + 3) // 4
        self.dwords = dw
        # whole dwords (the tail past ``nbytes`` is never in bounds), so batched DS accesses can
        # use the dword views: ``words`` the data, ``pwords`` the 4 per-byte poison flags of a dword
        self.data = np.zeros((groups, 4 * dw), dtype=np.uint8)
        self.poison = np.ones((groups, 4 * dw), dtype=bool)
        self.words = self.data.view(np.uint32).reshape(-1)
        self.pwords = self.poison.view(np.uint32).reshape(-1)
        self.writer = np.full((groups, dw), -1, dtype=np.int16)
        self.write_epoch = np.full((groups, dw), -1, dtype=np.int32)
        self.readers = np.zeros((groups, dw), dtype=np.uint32)
        self.read_epoch = np.full((groups, dw), -1, dtype=np.int32)
        self.pending = np.full((groups, dw), -1, dtype=np.int16)


class Lds:
    """One workgroup's LDS with poison and race bookkeeping (its own arrays, or row ``row``
    of a ``LdsBank``)."""

    def __init__(self, nbytes: int, bank: LdsBank | None = None, row: int = 0) -> None:
        self.size = nbytes
        self.bank, self.row = bank, row
        if bank is None:
            bank, row = LdsBank(1, nbytes), 0
        self.data = bank.data[row]
        self.poison = bank.poison[row]
        self.writer = bank.writer[row]
        self.write_epoch = bank.write_epoch[row]
        self.readers = bank.readers[row]
        self.read_epoch = bank.read_epoch[row]
        self.pending = bank.pending[row]  # wave with an outstanding DMA into the dword

    def in_bounds(self, addrs: np.ndarray, size: int) -> np.ndarray:
        """Lanes whose access lies inside the allocation. The hardware range-checks LDS
        against the workgroup's allocation: outside reads return 0, writes are dropped
        (Triton relies on it to mask buffer->LDS copies), so this is not an error."""
        return (addrs >= 0) & (addrs + size <= self.size)

    def dwords(self, addrs: np.ndarray, size: int) -> np.ndarray:
        """The LDS dwords the lanes' [addr, addr + size) accesses touch (a dword several lanes
        touch appears once per lane: every use is an idempotent index or assignment)."""
        first = addrs // 4
        if size % 4 == 0 and not (addrs & 3).any():  # aligned: exactly size / 4 dwords per lane
            return (first[:, None] + np.arange(size // 4)).ravel()
        last = (addrs + size - 1) // 4
        span = int((last - first).max()) + 1 if addrs.size else 0
        d = first[:, None] + np.arange(span)
        return d[d <= last[:, None]]

    def note_read(self, d: np.ndarray, wave: int, epoch: int) -> np.ndarray:
        """Record a read of dwords ``d``; return the dwords another wave wrote this epoch."""
        racy = d[(self.write_epoch[d] == epoch) & (self.writer[d] != wave) & (self.writer[d] >= 0)]
        fresh = self.read_epoch[d] != epoch
        self.readers[d[fresh]] = 0
        self.read_epoch[d] = epoch
        self.readers[d] |= np.uint32(1 << wave)  # duplicates in d: the same OR, idempotent
        return racy

    def note_reads(self, d: np.ndarray, waves: np.ndarray, epoch: int) -> np.ndarray:
        """``note_read`` for several waves at once (``waves``: the reading wave of each entry
        of ``d``); returns the mask of entries another wave wrote this epoch."""
        racy = (self.write_epoch[d] == epoch) & (self.writer[d] != waves) & (self.writer[d] >= 0)
        fresh = self.read_epoch[d] != epoch
        self.readers[d[fresh]] = 0
        self.read_epoch[d] = epoch
        np.bitwise_or.at(self.readers, d, np.left_shift(np.uint32(1), waves.astype(np.uint32)))
        return racy

    def note_write(self, d: np.ndarray, wave: int, epoch: int) -> np.ndarray:
        """Record a write; return the dwords another wave read or wrote this epoch."""
        me = np.uint32(1 << wave)
        other_read = (self.read_epoch[d] == epoch) & ((self.readers[d] & ~me) != 0)
        other_write = (self.write_epoch[d] == epoch) & (self.writer[d] != wave) & (self.writer[d] >= 0)
        racy = d[other_read | other_write]
        self.writer[d] = wave
        self.write_epoch[d] = epoch
        return racy

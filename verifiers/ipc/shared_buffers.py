"""Buffers the judge owns and an arm process maps: one set per ``build``.

The judge allocates every input and output tensor of a build, fills and poisons them,
and reads the outputs itself after each call. The arm receives a description of the
set and maps the same memory:

- CPU: one ``memfd`` per set, ``mmap``-ed ``MAP_SHARED`` in both processes; each tensor
  is a strided view at a 256-byte aligned offset. The descriptor travels with the build
  message (``SCM_RIGHTS``).
- CUDA / ROCm (HIP behind ``torch.cuda``): each tensor is allocated in the judge's
  context and shared by device IPC (``torch.multiprocessing``'s own reduction, pickled
  judge -> arm only; the judge never unpickles anything an arm sends).

Tensors keep the dtype, shape and strides ``make_inputs`` / ``make_outputs`` gave them, so
the arm sees exactly what an in-process caller would, as plain tensors.
"""
from __future__ import annotations

import base64
import mmap
import os
import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import torch

ALIGN = 256


def _span_elements(shape: tuple[int, ...], stride: tuple[int, ...]) -> int:
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(shape, stride))


def _dtype_name(dtype: "torch.dtype") -> str:
    return str(dtype).replace("torch.", "")


def _dtype(name: str) -> "torch.dtype":
    import torch

    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return value


@dataclass
class SharedSet:
    """One build's buffers as the judge holds them, and what the arm needs to map them."""

    inputs: dict[str, "torch.Tensor"]
    outputs: dict[str, "torch.Tensor"]
    wire: dict[str, Any]
    fds: list[int] = field(default_factory=list)
    _keep: list[Any] = field(default_factory=list)

    def close_descriptors(self) -> None:
        """The judge keeps its mapping; the descriptor was only needed to send it."""
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []

    def close(self) -> None:
        """Drop the judge's references; a GPU buffer is scrubbed first, so a segment the
        pool hands out again holds no earlier arm's results."""
        for kept in self._keep:
            if getattr(kept, "is_cuda", False):
                kept.fill_(0xFF)
        self._keep = []
        self.inputs, self.outputs = {}, {}
        self.close_descriptors()


def allocate(inputs_like: Mapping[str, "torch.Tensor"], outputs_like: Mapping[str, "torch.Tensor"],
             device: "torch.device") -> SharedSet:
    """Empty buffers shaped like the given tensors (values are the caller's to write)."""
    if device.type == "cpu":
        return _allocate_cpu(inputs_like, outputs_like)
    return _allocate_gpu(inputs_like, outputs_like, device)


def _layout(groups: Mapping[str, Mapping[str, "torch.Tensor"]]) -> tuple[list[dict[str, Any]], int]:
    specs, offset = [], 0
    for group, tensors in groups.items():
        for name, t in tensors.items():
            shape, stride = tuple(int(s) for s in t.shape), tuple(int(s) for s in t.stride())
            if any(st < 0 for st in stride):
                raise ValueError(f"{group}[{name!r}] has a negative stride {stride}")
            nbytes = max(_span_elements(shape, stride), 1) * t.element_size()
            specs.append({"group": group, "name": name, "dtype": _dtype_name(t.dtype), "shape": list(shape),
                          "stride": list(stride), "offset": offset, "nbytes": nbytes})
            offset += (nbytes + ALIGN - 1) // ALIGN * ALIGN
    return specs, max(offset, ALIGN)


def _views(base: "torch.Tensor", specs: list[dict[str, Any]]) -> dict[str, dict[str, "torch.Tensor"]]:
    """Strided views into one flat uint8 buffer (CPU mmap or GPU allocation)."""
    import torch

    out: dict[str, dict[str, torch.Tensor]] = {"inputs": {}, "outputs": {}}
    for s in specs:
        if s.get("group") not in out:
            raise ValueError(f"unknown tensor group {s.get('group')!r}")
        flat = base[int(s["offset"]): int(s["offset"]) + int(s["nbytes"])].view(_dtype(s["dtype"]))
        out[s["group"]][s["name"]] = torch.as_strided(flat, list(s["shape"]), list(s["stride"]), flat.storage_offset())
    return out


def _allocate_cpu(inputs_like, outputs_like) -> SharedSet:
    import torch

    specs, size = _layout({"inputs": inputs_like, "outputs": outputs_like})
    fd = os.memfd_create("verifier-buffers", os.MFD_CLOEXEC)
    os.ftruncate(fd, size)
    mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    views = _views(torch.frombuffer(mm, dtype=torch.uint8), specs)
    wire = {"kind": "memfd", "size": size, "tensors": specs}
    return SharedSet(views["inputs"], views["outputs"], wire, [fd], [mm])


_POOLS: dict[int, Any] = {}


def _shared_pool(device: "torch.device") -> Any:
    """A memory pool that holds nothing but shared buffer sets: an arm maps a whole
    allocation segment, so no judge-private tensor (an oracle output) may share one."""
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _POOLS:
        _POOLS[index] = torch.cuda.MemPool() if hasattr(torch.cuda, "MemPool") else None
    return _POOLS[index]


def _allocate_gpu(inputs_like, outputs_like, device) -> SharedSet:
    import contextlib

    import torch
    from torch.multiprocessing.reductions import reduce_tensor

    specs, size = _layout({"inputs": inputs_like, "outputs": outputs_like})
    pool = _shared_pool(device)
    use = getattr(torch.cuda, "use_mem_pool", None)
    ctx = use(pool, device=device) if pool is not None and use is not None else contextlib.nullcontext()
    with ctx:
        buf = torch.zeros(size, dtype=torch.uint8, device=device)
    views = _views(buf, specs)
    torch.cuda.synchronize(device)
    handle = base64.b64encode(pickle.dumps(reduce_tensor(buf))).decode()
    wire = {"kind": "ipc", "size": size, "buffer": handle, "tensors": specs, "pooled": pool is not None}
    return SharedSet(views["inputs"], views["outputs"], wire, [], [buf])


def open_in_arm(wire: Mapping[str, Any], fds: list[int]) -> tuple[dict[str, "torch.Tensor"], dict[str, "torch.Tensor"], Any]:
    """The arm's view of a set: (inputs, outputs, an object to keep alive while they are used)."""
    import torch

    if wire.get("kind") == "memfd":
        if len(fds) != 1:
            raise ValueError(f"a memfd buffer set needs one descriptor, got {len(fds)}")
        mm = mmap.mmap(fds[0], int(wire["size"]), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(fds[0])
        views = _views(torch.frombuffer(mm, dtype=torch.uint8), list(wire["tensors"]))
        return views["inputs"], views["outputs"], mm
    if wire.get("kind") == "ipc":
        rebuild, args = pickle.loads(base64.b64decode(wire["buffer"]))  # from the judge: trusted
        buf = rebuild(*args)
        views = _views(buf, list(wire["tensors"]))
        return views["inputs"], views["outputs"], buf
    raise ValueError(f"unknown buffer kind {wire.get('kind')!r}")

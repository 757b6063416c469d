"""Load a gfx950 code object: ELF + AMDGPU metadata note + kernel descriptors.

``load_code_object(bytes | path)`` -> ``CodeObject`` with one ``KernelInfo`` per kernel:
the kernarg layout (every argument's offset, size and value kind, hidden ones included),
LDS and scratch sizes, wavefront size, the decoded kernel descriptor and the kernel's
machine code. Anything that is not a usable gfx950 code object is a ``CodeObjectError``
that says why, before anything runs.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from verifiers.gfx950.emulator.descriptor import DESCRIPTOR_BYTES, KernelDescriptor, parse_descriptor
from verifiers.gfx950.emulator.elf import GFX950, NT_AMDGPU_METADATA, ElfFile
from verifiers.gfx950.emulator.errors import CodeObjectError
from verifiers.gfx950.emulator.msgpack_reader import unpack

STT_FUNC = 2


class KernargSpec(BaseModel):
    """One kernel argument slot from the metadata note (``.args``)."""

    model_config = ConfigDict(frozen=True)

    index: int
    offset: int
    size: int
    value_kind: str  # global_buffer, by_value, hidden_block_count_x, ...
    address_space: str | None = None
    name: str | None = None

    @property
    def hidden(self) -> bool:
        return self.value_kind.startswith("hidden_")


class KernelInfo(BaseModel):
    """What the emulator needs to launch one kernel of a code object."""

    model_config = ConfigDict(frozen=True)

    name: str
    args: tuple[KernargSpec, ...]
    kernarg_segment_size: int
    group_segment_fixed_size: int
    private_segment_fixed_size: int
    wavefront_size: int
    max_flat_workgroup_size: int | None = None
    reqd_workgroup_size: tuple[int, int, int] | None = None
    descriptor: KernelDescriptor
    code_address: int  # virtual address of the first instruction
    code_size: int

    @property
    def explicit_args(self) -> tuple[KernargSpec, ...]:
        return tuple(a for a in self.args if not a.hidden)


class CodeObject(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    origin: str
    digest: str  # sha256 of the bytes: the decode cache key
    target: str
    kernels: dict[str, KernelInfo]
    data: bytes

    def kernel(self, name: str) -> KernelInfo:
        if name not in self.kernels:
            raise CodeObjectError(f"{self.origin}: no kernel {name!r}; kernels in it: {sorted(self.kernels)}")
        return self.kernels[name]

    def code(self, kernel: KernelInfo) -> bytes:
        return ElfFile(self.data, self.origin).read_vaddr(kernel.code_address, kernel.code_size, f"code of {kernel.name}")


def load_code_object(source: bytes | bytearray | str | Path) -> CodeObject:
    """Parse and validate a gfx950 code object given as bytes or a file path."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, origin = bytes(source), "code object (bytes)"
    else:
        path = Path(source)
        if not path.is_file():
            raise CodeObjectError(f"code object {str(path)!r} does not exist or is not a file")
        data, origin = path.read_bytes(), str(path)
    elf = ElfFile(data, origin)
    if elf.mach != GFX950:
        raise CodeObjectError(
            f"{origin}: code object is for {elf.mach_name}, not gfx950; the emulator runs gfx950 (CDNA4) code only "
            "(compile for GPUTarget('hip', 'gfx950', 64) / FLYDSL_GPU_ARCH=gfx950)"
        )
    meta = _metadata(elf)
    target = str(meta.get("amdhsa.target", ""))
    if target and "gfx950" not in target:
        raise CodeObjectError(f"{origin}: metadata target {target!r} is not gfx950")
    kernels: dict[str, KernelInfo] = {}
    for k in meta.get("amdhsa.kernels", []) or []:
        info = _kernel_info(elf, k, origin)
        kernels[info.name] = info
    if not kernels:
        raise CodeObjectError(f"{origin}: the metadata note lists no kernels")
    return CodeObject(origin=origin, digest=hashlib.sha256(data).hexdigest(), target=target, kernels=kernels, data=data)


def _metadata(elf: ElfFile) -> dict:
    for owner, typ, desc in elf.notes():
        if owner == "AMDGPU" and typ == NT_AMDGPU_METADATA:
            meta = unpack(desc)
            if not isinstance(meta, dict):
                raise CodeObjectError(f"{elf.origin}: AMDGPU metadata note is not a map")
            return meta
    raise CodeObjectError(f"{elf.origin}: no AMDGPU metadata note (NT_AMDGPU_METADATA): not a code object v3+")


def _kernel_info(elf: ElfFile, meta: dict, origin: str) -> KernelInfo:
    name = meta.get(".name")
    symbol = meta.get(".symbol", f"{name}.kd")
    if not isinstance(name, str):
        raise CodeObjectError(f"{origin}: a kernel in the metadata note has no .name")
    kd_sym = elf.symbol(symbol)
    if kd_sym is None:
        raise CodeObjectError(f"{origin}: kernel {name!r}: descriptor symbol {symbol!r} not in the symbol table")
    desc = parse_descriptor(elf.read_vaddr(kd_sym.value, DESCRIPTOR_BYTES, f"descriptor {symbol}"), f"{origin}: {symbol}")
    entry = kd_sym.value + desc.entry_offset
    fn = next((s for s in elf.symbols if s.value == entry and s.type == STT_FUNC and s.size), None)
    size = fn.size if fn else _section_end(elf, entry) - entry
    if size <= 0:
        raise CodeObjectError(f"{origin}: kernel {name!r}: entry 0x{entry:x} has no code")
    elf.read_vaddr(entry, size, f"code of {name}")  # bounds check now, not mid-run
    args = []
    for i, a in enumerate(meta.get(".args", []) or []):
        try:
            args.append(KernargSpec(index=i, offset=int(a[".offset"]), size=int(a[".size"]),
                                    value_kind=str(a[".value_kind"]), address_space=a.get(".address_space"),
                                    name=a.get(".name")))
        except (KeyError, TypeError, ValueError) as exc:
            raise CodeObjectError(f"{origin}: kernel {name!r}: argument {i} of the metadata is malformed ({exc})") from None
    wave = int(meta.get(".wavefront_size", 64))
    if wave != 64 or desc.wavefront_size32:
        raise CodeObjectError(f"{origin}: kernel {name!r} is wave{wave}; gfx950 kernels run wave64")
    reqd = meta.get(".reqd_workgroup_size")
    return KernelInfo(
        name=name,
        args=tuple(args),
        kernarg_segment_size=int(meta.get(".kernarg_segment_size", desc.kernarg_size)),
        group_segment_fixed_size=int(meta.get(".group_segment_fixed_size", desc.group_segment_fixed_size)),
        private_segment_fixed_size=int(meta.get(".private_segment_fixed_size", desc.private_segment_fixed_size)),
        wavefront_size=wave,
        max_flat_workgroup_size=meta.get(".max_flat_workgroup_size"),
        reqd_workgroup_size=tuple(int(x) for x in reqd) if isinstance(reqd, list) and len(reqd) == 3 else None,
        descriptor=desc,
        code_address=entry,
        code_size=size,
    )


def _section_end(elf: ElfFile, addr: int) -> int:
    for sec in elf.sections:
        if sec.addr and sec.addr <= addr < sec.addr + sec.size:
            return sec.addr + sec.size
    raise CodeObjectError(f"{elf.origin}: kernel entry 0x{addr:x} is in no section")

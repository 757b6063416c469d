"""A minimal ELF64 reader for AMDGPU code objects: sections, symbols and notes.

Only what the emulator needs, with bounds checks everywhere so that a truncated or
corrupt file is a ``CodeObjectError`` naming the broken part, never a ``struct.error``.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from verifiers.gfx950.emulator.errors import CodeObjectError

EM_AMDGPU = 224
ELFOSABI_AMDGPU_HSA = 64
EF_AMDGPU_MACH = 0xFF
#: e_flags machine numbers (LLVM's EF_AMDGPU_MACH_AMDGCN_*) for the messages
MACH_NAMES = {0x2F: "gfx908", 0x30: "gfx90a", 0x4C: "gfx942", 0x4F: "gfx950", 0x40: "gfx940", 0x41: "gfx1100"}
GFX950 = 0x4F
NT_AMDGPU_METADATA = 32
SHT_SYMTAB, SHT_NOTE, SHT_DYNSYM, SHT_NOBITS = 2, 7, 11, 8


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    addr: int
    offset: int
    size: int


@dataclass(frozen=True)
class Symbol:
    name: str
    value: int
    size: int
    type: int  # STT_*: 1 object, 2 func
    section: int


class ElfFile:
    """Parsed view over the bytes of one ELF64 little-endian file."""

    def __init__(self, data: bytes, origin: str = "code object") -> None:
        self.data = bytes(data)
        self.origin = origin
        if len(self.data) < 64:
            raise CodeObjectError(f"{origin}: {len(self.data)} bytes is too short for an ELF header (64 bytes)")
        if self.data[:4] != b"\x7fELF":
            raise CodeObjectError(f"{origin}: not an ELF file (magic {self.data[:4]!r}, expected b'\\x7fELF')")
        if self.data[4] != 2 or self.data[5] != 1:
            raise CodeObjectError(f"{origin}: not a 64-bit little-endian ELF (class {self.data[4]}, data {self.data[5]})")
        (self.e_type, self.e_machine, _ver, _entry, _phoff, self.e_shoff, self.e_flags, _ehsize, _phentsize,
         _phnum, self.e_shentsize, self.e_shnum, self.e_shstrndx) = struct.unpack_from("<HHIQQQIHHHHHH", self.data, 16)
        if self.e_machine != EM_AMDGPU:
            raise CodeObjectError(f"{origin}: ELF machine {self.e_machine} is not AMDGPU ({EM_AMDGPU})")
        self.sections = self._read_sections()
        self.symbols = self._read_symbols()

    # ------------------------------------------------------------------ helpers
    def _slice(self, offset: int, size: int, what: str) -> bytes:
        if offset < 0 or size < 0 or offset + size > len(self.data):
            raise CodeObjectError(
                f"{self.origin}: {what} at bytes [{offset}, {offset + size}) lies past the end of the "
                f"file ({len(self.data)} bytes): the code object is truncated or corrupt"
            )
        return self.data[offset : offset + size]

    def _read_sections(self) -> list[Section]:
        if self.e_shentsize != 64 or self.e_shnum == 0:
            raise CodeObjectError(f"{self.origin}: no usable section header table (shentsize {self.e_shentsize}, shnum {self.e_shnum})")
        table = self._slice(self.e_shoff, 64 * self.e_shnum, "section header table")
        raw = [struct.unpack_from("<IIQQQQIIQQ", table, 64 * i) for i in range(self.e_shnum)]
        if self.e_shstrndx >= len(raw):
            raise CodeObjectError(f"{self.origin}: section-name table index {self.e_shstrndx} out of range")
        strtab = raw[self.e_shstrndx]
        names = self._slice(strtab[4], strtab[5], "section name table")
        out = []
        for name_off, typ, _flags, addr, off, size, *_ in raw:
            if typ != SHT_NOBITS:
                self._slice(off, size, f"section at offset {off}")
            out.append(Section(_cstr(names, name_off), typ, addr, off, size))
        return out

    def _read_symbols(self) -> list[Symbol]:
        syms: list[Symbol] = []
        for sec in self.sections:
            if sec.type not in (SHT_SYMTAB, SHT_DYNSYM):
                continue
            link = struct.unpack_from("<I", self.data, self.e_shoff + 64 * self.sections.index(sec) + 40)[0]
            if link >= len(self.sections):
                raise CodeObjectError(f"{self.origin}: symbol table {sec.name} links to missing string table {link}")
            strs = self._slice(self.sections[link].offset, self.sections[link].size, "symbol string table")
            body = self._slice(sec.offset, sec.size, f"symbol table {sec.name}")
            for i in range(sec.size // 24):
                name_off, info, _other, shndx, value, size = struct.unpack_from("<IBBHQQ", body, 24 * i)
                syms.append(Symbol(_cstr(strs, name_off), value, size, info & 0xF, shndx))
        return syms

    # ------------------------------------------------------------------ queries
    @property
    def mach(self) -> int:
        return self.e_flags & EF_AMDGPU_MACH

    @property
    def mach_name(self) -> str:
        return MACH_NAMES.get(self.mach, f"machine 0x{self.mach:x}")

    def symbol(self, name: str) -> Symbol | None:
        for s in self.symbols:
            if s.name == name:
                return s
        return None

    def read_vaddr(self, addr: int, size: int, what: str) -> bytes:
        """Bytes at a virtual address (inside some allocated section)."""
        for sec in self.sections:
            if sec.type != SHT_NOBITS and sec.addr <= addr and addr + size <= sec.addr + sec.size and sec.addr:
                return self._slice(sec.offset + addr - sec.addr, size, what)
        raise CodeObjectError(f"{self.origin}: {what} at address 0x{addr:x} (+{size}) is in no section")

    def notes(self) -> list[tuple[str, int, bytes]]:
        """``(owner, type, descriptor bytes)`` of every note in SHT_NOTE sections."""
        out = []
        for sec in self.sections:
            if sec.type != SHT_NOTE:
                continue
            body = self._slice(sec.offset, sec.size, f"note section {sec.name}")
            pos = 0
            while pos + 12 <= len(body):
                namesz, descsz, typ = struct.unpack_from("<III", body, pos)
                pos += 12
                name_end = pos + namesz
                desc_start = pos + _align4(namesz)
                desc_end = desc_start + descsz
                if desc_end > len(body):
                    raise CodeObjectError(f"{self.origin}: note in {sec.name} runs past its section (truncated)")
                out.append((body[pos:name_end].rstrip(b"\0").decode("ascii", "replace"), typ, body[desc_start:desc_end]))
                pos = desc_start + _align4(descsz)
        return out


def _align4(n: int) -> int:
    return (n + 3) & ~3


def _cstr(table: bytes, offset: int) -> str:
    if offset >= len(table):
        return ""
    end = table.find(b"\0", offset)
    return table[offset : end if end >= 0 else len(table)].decode("utf-8", "replace")

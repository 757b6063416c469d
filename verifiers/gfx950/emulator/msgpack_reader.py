"""A MessagePack decoder for the AMDGPU metadata note (``NT_AMDGPU_METADATA``).

The note is a MessagePack map (code object v3+); this reads the subset the format uses:
maps, arrays, strings, binary, integers, floats, booleans, nil. Malformed input is a
``CodeObjectError``.
"""
from __future__ import annotations

import struct
from typing import Any

from verifiers.gfx950.emulator.errors import CodeObjectError


def unpack(data: bytes) -> Any:
    value, pos = _read(data, 0)
    return value


def _need(data: bytes, pos: int, n: int) -> None:
    if pos + n > len(data):
        raise CodeObjectError(f"AMDGPU metadata note: MessagePack value at byte {pos} is truncated")


def _read(data: bytes, pos: int) -> tuple[Any, int]:  # noqa: C901 - one dispatch over the type byte
    _need(data, pos, 1)
    b = data[pos]
    pos += 1
    if b <= 0x7F:
        return b, pos
    if b >= 0xE0:
        return b - 0x100, pos
    if 0x80 <= b <= 0x8F:
        return _map(data, pos, b & 0x0F)
    if 0x90 <= b <= 0x9F:
        return _array(data, pos, b & 0x0F)
    if 0xA0 <= b <= 0xBF:
        return _str(data, pos, b & 0x1F)
    simple = {0xC0: None, 0xC2: False, 0xC3: True}
    if b in simple:
        return simple[b], pos
    fixed = {0xCC: "B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: "b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q",
             0xCA: ">f", 0xCB: ">d"}
    if b in fixed:
        size = struct.calcsize(fixed[b])
        _need(data, pos, size)
        return struct.unpack_from(fixed[b], data, pos)[0], pos + size
    lengths = {0xD9: (1, "str"), 0xDA: (2, "str"), 0xDB: (4, "str"), 0xC4: (1, "bin"), 0xC5: (2, "bin"),
               0xC6: (4, "bin"), 0xDC: (2, "arr"), 0xDD: (4, "arr"), 0xDE: (2, "map"), 0xDF: (4, "map")}
    if b in lengths:
        width, kind = lengths[b]
        _need(data, pos, width)
        n = int.from_bytes(data[pos : pos + width], "big")
        pos += width
        if kind == "str":
            return _str(data, pos, n)
        if kind == "bin":
            _need(data, pos, n)
            return bytes(data[pos : pos + n]), pos + n
        return (_array if kind == "arr" else _map)(data, pos, n)
    raise CodeObjectError(f"AMDGPU metadata note: unsupported MessagePack type byte 0x{b:02x} at byte {pos - 1}")


def _str(data: bytes, pos: int, n: int) -> tuple[str, int]:
    _need(data, pos, n)
    return data[pos : pos + n].decode("utf-8", "replace"), pos + n


def _array(data: bytes, pos: int, n: int) -> tuple[list, int]:
    out = []
    for _ in range(n):
        v, pos = _read(data, pos)
        out.append(v)
    return out, pos


def _map(data: bytes, pos: int, n: int) -> tuple[dict, int]:
    out = {}
    for _ in range(n):
        k, pos = _read(data, pos)
        v, pos = _read(data, pos)
        out[k] = v
    return out, pos

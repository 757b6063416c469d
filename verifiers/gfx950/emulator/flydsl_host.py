"""Run a FlyDSL ``@flyc.jit`` launcher's host side without a GPU.

FlyDSL lowers the launcher to a tiny host function in the LLVM dialect (kept by the
compile step as ``<kernel>.host.mlir``) that computes the grid from the runtime
arguments and calls ``gpu.launch_func`` with the kernel's arguments. This module
interprets that function (integer arithmetic, compares, selects, casts, struct
access: the subset FlyDSL emits; anything else is a clear error) so the grid, block
and kernel arguments come from the launcher itself, never from a copy of its formula.

Host arguments are what the compiled launcher is called with (torch tensors, Python
ints, the stream last). A torch tensor becomes FlyDSL's C ABI pair: the pointer and the
dynamic-layout struct (every dim's size as i32, then the stride of every dim but the
unit-stride one as i64), as ``flydsl.compiler.jit_argument.TorchTensorJitArg`` packs it.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any

from verifiers.gfx950.emulator.decoder import split_top_level
from verifiers.gfx950.emulator.errors import LaunchArgumentError

_FUNC = re.compile(r"llvm\.func @(?P<name>[\w.$]+)\((?P<params>.*?)\)\s*(?:attributes\s*\{[^}]*\})?\s*\{", re.S)
_PARAM = re.compile(r"(%arg\d+)\s*:\s*(!llvm\.struct<packed \((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)>|!llvm\.ptr(?:<\d+>)?|i\d+|f32|f64)")
_LOC = re.compile(r"\s*loc\((?:[^()]|\([^()]*\))*\)")
_LAUNCH = re.compile(
    r"gpu\.launch_func\s*(?:<[^>]*>\s*)?@\w+::@(?P<kernel>[\w.$]+)\s+blocks in \((?P<grid>[^)]*)\)\s+threads in "
    r"\((?P<block>[^)]*)\)\s*(?:dynamic_shared_memory_size\s+(?P<dyn>%\w+)\s*)?:\s*\w+\s*args\((?P<args>.*)\)\s*$"
)


@dataclass(frozen=True)
class HostLaunch:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: list[Any]  # torch tensors, ints, bytes (struct values), in kernel argument order
    dynamic_lds_bytes: int = 0


def _strip(text: str) -> str:
    return _LOC.sub("", text)


def _struct_shape(ty: str) -> list[int]:
    """Bit widths of the leaves of a packed struct type, in order."""
    return [int(w) for w in re.findall(r"\bi(\d+)\b", ty)]


def _pack_struct(ty: str, values: list[int]) -> bytes:
    widths = _struct_shape(ty)
    if len(widths) != len(values):
        raise LaunchArgumentError(f"layout struct {ty} needs {len(widths)} values, got {len(values)}")
    fmt = "<" + "".join({8: "b", 16: "h", 32: "i", 64: "q"}[w] for w in widths)
    return struct.pack(fmt, *values)


def tensor_layout_values(t) -> list[int]:  # noqa: ANN001 - torch.Tensor
    """FlyDSL's dynamic layout of a torch tensor: sizes (i32), then non-unit strides (i64)."""
    shape, strides = list(t.shape), list(t.stride())
    unit = next((i for i, s in enumerate(strides) if s == 1), None)
    if unit is None:
        raise LaunchArgumentError(f"tensor of shape {tuple(shape)} has no unit-stride dimension; FlyDSL needs one")
    return shape + [s for i, s in enumerate(strides) if i != unit]


class HostFunction:
    """One parsed host launcher: parameters and body lines."""

    def __init__(self, module_text: str, kernel: str) -> None:
        text = _strip(module_text)
        self.kernel = kernel
        for m in _FUNC.finditer(text):
            body = text[m.end(): _matching_brace(text, m.end() - 1)]
            if re.search(rf"@kernels::@{re.escape(kernel)}\b", body):
                self.name = m.group("name")
                self.params = _PARAM.findall(m.group("params"))
                self.body = [ln.strip() for ln in body.splitlines() if ln.strip()]
                return
        raise LaunchArgumentError(f"host module has no launcher that launches kernel {kernel!r}")

    def bind(self, host_args: tuple) -> dict[str, Any]:
        """Map the launcher's Python arguments onto the function parameters."""
        import torch

        env: dict[str, Any] = {}
        params = list(self.params)
        i = 0
        for pos, value in enumerate(host_args):
            if i >= len(params):
                raise LaunchArgumentError(f"launcher {self.name}: {len(host_args)} arguments given, it takes fewer")
            name, ty = params[i]
            if isinstance(value, torch.Tensor):
                if not ty.startswith("!llvm.ptr"):
                    raise LaunchArgumentError(f"launcher {self.name}: argument {pos} is a tensor, the launcher expects {ty}")
                env[name] = value
                i += 1
                if i < len(params) and params[i][1].startswith("!llvm.struct"):
                    sname, sty = params[i]
                    vals = tensor_layout_values(value)
                    env[sname] = _pack_struct(sty, vals)
                    i += 1
            elif value is None and ty.startswith("!llvm.ptr"):
                env[name] = None
                i += 1
            elif isinstance(value, (int, bool)) and re.fullmatch(r"i\d+", ty):
                env[name] = _wrap(int(value), int(ty[1:]))
                i += 1
            else:
                raise LaunchArgumentError(f"launcher {self.name}: argument {pos} ({type(value).__name__}) does not fit "
                                          f"parameter {ty}")
        for name, ty in params[i:]:  # the trailing stream (and nothing else) may be left out
            if ty != "!llvm.ptr":
                raise LaunchArgumentError(f"launcher {self.name}: missing argument for parameter {name} : {ty}")
            env[name] = None
        return env

    def run(self, host_args: tuple) -> HostLaunch:
        env = self.bind(host_args)
        for line in self.body:
            if line.startswith("llvm.return") or line == "}":
                continue
            if line.startswith("gpu.launch_func"):
                return self._launch(line, env)
            _step(line, env, self.name)
        raise LaunchArgumentError(f"launcher {self.name}: no gpu.launch_func reached")

    def _launch(self, line: str, env: dict) -> HostLaunch:
        m = _LAUNCH.search(line)
        if not m:
            raise LaunchArgumentError(f"launcher {self.name}: cannot parse `{line[:200]}`")
        grid = tuple(int(_val(v.strip(), env)) for v in m.group("grid").split(","))
        block = tuple(int(_val(v.strip(), env)) for v in m.group("block").split(","))
        args = []
        for item in split_top_level(m.group("args"), ",", "<(", ">)"):
            ref = item.split(":", 1)[0].strip()
            args.append(env[ref])
        dyn = int(_val(m.group("dyn"), env)) if m.group("dyn") else 0
        return HostLaunch(m.group("kernel"), grid, block, args, dyn)


def _matching_brace(text: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def _wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if bits > 1 and v >> (bits - 1) else v


def _val(tok: str, env: dict) -> Any:
    tok = tok.strip()
    if tok in env:
        return env[tok]
    raise LaunchArgumentError(f"host launcher uses undefined value {tok}")


_ASSIGN = re.compile(r"^(%\w+)\s*=\s*([\w.]+)\s*(.*?)\s*:\s*([^:]+?)(?:\s+to\s+(\S+))?$")
_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b, "sle": lambda a, b: a <= b,
        "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b}


def _tdiv(a: int, b: int) -> int:
    if b == 0:
        raise LaunchArgumentError("host launcher divides by zero (a grid from a zero-sized dimension?)")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _bits(ty: str) -> int:
    ty = ty.strip()
    if ty in ("i1",):
        return 1
    m = re.fullmatch(r"i(\d+)", ty)
    return int(m.group(1)) if m else 64


def _step(line: str, env: dict, fname: str) -> None:  # noqa: C901 - one dispatch over the op names
    m = _ASSIGN.match(line)
    if not m:
        raise LaunchArgumentError(f"launcher {fname}: unsupported host operation `{line[:160]}`")
    dst, opname, rest, ty, to_ty = m.groups()
    ops = [t.strip() for t in rest.split(",")] if rest else []
    if opname == "llvm.mlir.constant":
        lit = re.match(r"\((.*?)(?:\s*:\s*\w+)?\)", rest).group(1).strip()
        env[dst] = {"true": 1, "false": 0}.get(lit, None)
        if env[dst] is None:
            env[dst] = int(lit) if re.fullmatch(r"-?\d+", lit) else float(lit)
        return
    bits = _bits(ty.split(",")[-1])
    if opname in ("llvm.sext", "llvm.zext", "llvm.trunc"):
        v = _val(ops[0], env)
        width = _bits(to_ty)
        if opname == "llvm.zext":
            v &= (1 << _bits(ty)) - 1
        env[dst] = _wrap(v, width)
        return
    if opname == "llvm.icmp":
        pred = re.match(r'"(\w+)"\s*(.*)', rest)
        p, args = pred.group(1), [t.strip() for t in pred.group(2).split(",")]
        a, b = (_val(t, env) for t in args)
        if p.startswith("u"):
            mask = (1 << bits) - 1
            a, b, p = a & mask, b & mask, "s" + p[1:]
        env[dst] = int(_CMP[p](a, b))
        return
    if opname == "llvm.select":
        c, a, b = (_val(t, env) for t in ops)
        env[dst] = a if c else b
        return
    binops = {
        "llvm.add": lambda a, b: a + b, "llvm.sub": lambda a, b: a - b, "llvm.mul": lambda a, b: a * b,
        "llvm.sdiv": _tdiv, "llvm.srem": lambda a, b: a - _tdiv(a, b) * b,
        "llvm.udiv": lambda a, b: (a % (1 << bits)) // (b % (1 << bits)),
        "llvm.urem": lambda a, b: (a % (1 << bits)) % (b % (1 << bits)),
        "llvm.and": lambda a, b: a & b, "llvm.or": lambda a, b: a | b, "llvm.xor": lambda a, b: a ^ b,
        "llvm.shl": lambda a, b: a << b, "llvm.ashr": lambda a, b: a >> b,
        "llvm.lshr": lambda a, b: (a % (1 << bits)) >> b,
    }
    if opname in binops:
        a, b = (_val(t, env) for t in ops[:2])
        env[dst] = _wrap(binops[opname](a, b), bits)
        return
    raise LaunchArgumentError(f"launcher {fname}: host operation {opname} is not supported by the emulator's "
                              f"launcher interpreter (`{line[:160]}`)")

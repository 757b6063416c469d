"""Decode a kernel's machine code into typed instructions, using LLVM's own disassembler.

Why LLVM's disassembler rather than our own decoder: ``llvm-objdump --mcpu=gfx950`` is
the reference decoder the compilers we validate against are tested with (every
encoding, literal, modifier and operand-size rule of CDNA4 in one place), so the
emulator never disagrees with the toolchain about what an instruction *is*; what it
executes is then ours (``ops/``). We parse its text into ``Instruction`` objects and take
sizes, addresses and immediate fields straight from the printed encoding words.

Decoded programs are cached by code-object digest, in memory and on disk
(``$SKILL_SERVER_CACHE/gfx950/emulator/decoded/<digest>.json`` or the repo's .cache).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from verifiers.gfx950.emulator.code_object import CodeObject, KernelInfo
from verifiers.gfx950.emulator.errors import CodeObjectError
from verifiers.gfx950.emulator.operands import Operand, parse_operand
from verifiers.gfx950.env import cache_root
from verifiers.settings import verifier_settings

OBJDUMP_CANDIDATES = ("/usr/lib/llvm-22/bin/llvm-objdump", "llvm-objdump-22")
_LINE = re.compile(r"^\s+(?P<text>\S.*?)\s*//\s*(?P<addr>[0-9A-Fa-f]+):\s*(?P<words>(?:[0-9A-Fa-f]{8}\s*)+)(?:<[^>]*>)?\s*$")
_FORMAT_VERSION = 3
_MODIFIER = re.compile(r"^[a-z_][a-z_0-9]*:")  # name:value (a register range has '[' before its ':')
_FLAG_MODIFIERS = frozenset({"offen", "idxen", "lds", "glc", "slc", "nt", "sc0", "sc1", "clamp", "gds", "tfe", "lwe"})  # bump when the cached JSON layout or parsing changes


@dataclass
class Instruction:
    address: int
    size: int
    text: str
    mnemonic: str
    operands: list[Operand]
    modifiers: dict[str, object]
    words: tuple[int, ...]
    #: filled by the program builder: index of the branch target, the bound handler
    target: int | None = None
    handler: object = field(default=None, repr=False)
    #: the batched handler (``ops.batched``) the lockstep executor may use, or None
    batch: object = field(default=None, repr=False)

    @property
    def simm16(self) -> int:
        """The SOPP/SOPK 16-bit immediate, sign-extended (from the encoding word)."""
        v = self.words[0] & 0xFFFF
        return v - 0x10000 if v & 0x8000 else v


def find_objdump() -> str:
    override = str(verifier_settings().llvm_objdump or "") or None
    if override:
        return override
    for cand in OBJDUMP_CANDIDATES:
        if os.path.isabs(cand) and os.access(cand, os.X_OK):
            return cand
        found = shutil.which(cand)
        if found:
            return found
    raise CodeObjectError(
        "no llvm-objdump that knows gfx950 (looked for /usr/lib/llvm-22/bin/llvm-objdump and llvm-objdump-22); "
        "install it with `apt-get install -y llvm-22` (scripts/setup.sh) or set SKILL_SERVER_LLVM_OBJDUMP"
    )


def split_top_level(s: str, sep: str, opens: str = "[(", closes: str = "])") -> list[str]:
    """Split ``s`` at ``sep`` outside brackets; empty pieces dropped, pieces stripped."""
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in opens:
            depth += 1
        elif ch in closes:
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [p.strip() for p in out if p.strip()]


def _modifier(tok: str) -> tuple[str, object]:
    if ":" in tok:
        name, val = tok.split(":", 1)
        if val.startswith("[") and val.endswith("]"):
            return name, tuple(int(x, 0) for x in val[1:-1].split(","))
        try:
            return name, int(val, 0)
        except ValueError:
            return name, val
    return tok, True


def parse_line(text: str) -> tuple[str, list[Operand], dict[str, object]]:
    """Mnemonic, operands and modifiers of one disassembled instruction."""
    parts = text.split(None, 1)
    mnemonic = parts[0]
    if len(parts) == 1:
        return mnemonic, [], {}
    rest = parts[1]
    if mnemonic in ("s_waitcnt", "s_setreg_imm32_b32", "s_setreg_b32", "s_getreg_b32", "s_sendmsg"):
        return mnemonic, [], {"raw": rest}  # fields come from the encoding
    chunks = split_top_level(rest, ",")
    operands: list[Operand] = []
    modifiers: dict[str, object] = {}
    for i, chunk in enumerate(chunks):
        toks = split_top_level(chunk, " ")
        if not toks:
            continue
        if i < len(chunks) - 1:
            operands.append(parse_operand(chunk))
            continue
        # last chunk: one operand then space-separated modifiers (or only modifiers)
        first, mods = toks[0], toks[1:]
        if _MODIFIER.match(first) or first in _FLAG_MODIFIERS:
            mods = toks
        else:
            operands.append(parse_operand(first))
        for m in mods:
            k, v = _modifier(m)
            modifiers[k] = v
    return mnemonic, operands, modifiers


def disassemble(code_object: CodeObject, kernel: KernelInfo) -> list[Instruction]:
    """Run llvm-objdump over the code object and keep the kernel's instructions."""
    objdump = find_objdump()
    with tempfile.NamedTemporaryFile(suffix=".hsaco") as f:
        f.write(code_object.data)
        f.flush()
        try:
            proc = subprocess.run([objdump, "-d", "--mcpu=gfx950", f.name], capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise CodeObjectError(f"{code_object.origin}: llvm-objdump did not finish within 300 s") from None
        except OSError as exc:
            raise CodeObjectError(f"cannot run llvm-objdump ({objdump}): {exc}") from None
    if proc.returncode != 0:
        raise CodeObjectError(f"{code_object.origin}: llvm-objdump failed: {proc.stderr.strip()[-500:]}")
    lo, hi = kernel.code_address, kernel.code_address + kernel.code_size
    out: list[Instruction] = []
    for line in proc.stdout.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        addr = int(m.group("addr"), 16)
        if not lo <= addr < hi:
            continue
        words = tuple(int(w, 16) for w in m.group("words").split())
        text = m.group("text")
        mnemonic, operands, modifiers = parse_line(text)
        out.append(Instruction(addr, 4 * len(words), text, mnemonic, operands, modifiers, words))
    if not out:
        raise CodeObjectError(f"{code_object.origin}: llvm-objdump produced no instructions for kernel {kernel.name!r}")
    return out


# --------------------------------------------------------------------------- cache

_MEMORY: dict[tuple[str, str], list[tuple]] = {}


def _cache_dir() -> Path:

    return cache_root() / "emulator" / "decoded"


def decode(code_object: CodeObject, kernel: KernelInfo) -> list[Instruction]:
    """The kernel's instructions (fresh objects each call; the parse is cached by digest)."""
    key = (code_object.digest, kernel.name)
    rows = _MEMORY.get(key)
    path = _cache_dir() / f"{code_object.digest}-{_safe(kernel.name)}.json"
    if rows is None and path.is_file():
        try:
            doc = json.loads(path.read_text())
            if doc.get("version") == _FORMAT_VERSION:
                rows = [tuple(r) for r in doc["rows"]]
        except (OSError, ValueError, KeyError):
            rows = None
    if rows is None:
        ins = disassemble(code_object, kernel)
        rows = [(i.address, i.text, list(i.words)) for i in ins]
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"version": _FORMAT_VERSION, "rows": rows}))
            os.replace(tmp, path)
        except OSError:
            pass  # the cache is an optimisation only
    _MEMORY[key] = rows
    out = []
    for addr, text, words in rows:
        mnemonic, operands, modifiers = parse_line(text)
        out.append(Instruction(addr, 4 * len(words), text, mnemonic, operands, modifiers, tuple(words)))
    return out


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:100]

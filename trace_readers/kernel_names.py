"""Kernel names: a readable short name for matching and display, the full one kept beside it.

Profilers write C++ kernel names either demangled with every template argument
(``void ck::kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle<ck::Gridwise...>(...)``,
often several kilobytes) or still mangled (hand-written assembly kernels, e.g.
``_ZN5aiter43fp8gemm_bf16_blockscale_BpreShuffle_128x128E.kd``). The short name keeps the
qualified function name and drops the return type, template arguments and parameters:
``ck::kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle``. Names that are not
C++ (Triton, FlyDSL) pass through unchanged. A generic entry point (``ck_tile::kentry``,
``cutlass::device_kernel``) is named by the kernel class it launches
(``ck_tile::MoeFlatmmKernel``), else every ck_tile kernel would read the same. A trailing ``[clone .kd]`` (older rocprof
tools append it to every kernel of ``results.stats.csv``) is dropped from the short name.
"""
from __future__ import annotations

import re

MAX_SHORT_NAME = 160
_CLONE_SUFFIX = re.compile(r"(?:\s*\[clone [^\[\]]*\])+\s*$")
_OPEN = {"<": ">", "(": ")", "[": "]"}
_CLOSE = {v: k for k, v in _OPEN.items()}


def _parse_source_names(s: str, i: int) -> tuple[list[str], int] | None:
    """Itanium ``<source-name>``s (``<len><id>``) from ``s[i:]``; stops at the first non-digit."""
    parts: list[str] = []
    while i < len(s) and s[i].isdigit():
        j = i
        while j < len(s) and s[j].isdigit():
            j += 1
        n = int(s[i:j])
        if n <= 0 or j + n > len(s):
            return None
        parts.append(s[j:j + n])
        i = j + n
    return (parts, i) if parts else None


def demangle(name: str) -> str:
    """Demangle the simple Itanium names kernels use (``_Z`` + plain or nested source names).

    Gives the qualified function name without parameters (``aiter::fp8gemm_...``). Anything
    richer (templates, substitutions, operators) is returned unchanged: the profilers
    already demangle those, and a half-demangled name would be worse than the raw one."""
    base = strip_clone_suffix(name).split(".", 1)[0]  # ".kd" (kernel descriptor) and similar clone suffixes
    if not base.startswith("_Z") or len(base) < 4:
        return name
    s = base[2:]
    if s[0] == "N":
        got = _parse_source_names(s, 1)
        if got is None or got[1] >= len(s) or s[got[1]] != "E":
            return name
        return "::".join(got[0])
    got = _parse_source_names(s, 0)
    if got is None or len(got[0]) != 1 or s[got[1]:got[1] + 1] == "I":
        return name
    return got[0][0]


def _mangled_prefix(name: str) -> str | None:
    """The leading qualified name of a mangled name even when templates follow it."""
    base = name.split(".", 1)[0]
    if not base.startswith("_Z") or len(base) < 4:
        return None
    s = base[2:]
    got = _parse_source_names(s, 1 if s[0] == "N" else 0)
    return "::".join(got[0]) if got else None


def _strip_templates(text: str) -> str:
    """Remove every top-level ``<...>`` group; ``>`` inside parentheses (``(3>2)``) does not close one."""
    out: list[str] = []
    angle = paren = 0
    for ch in text:
        if angle:
            if ch == "(":
                paren += 1
            elif ch == ")":
                paren = max(0, paren - 1)
            elif paren == 0 and ch == "<":
                angle += 1
            elif paren == 0 and ch == ">":
                angle -= 1
            continue
        if ch == "<":
            angle, paren = 1, 0
            continue
        out.append(ch)
    return text if angle else "".join(out)


def _balanced(text: str) -> bool:
    depth = {"(": 0, "[": 0}
    for ch in text:
        if ch in depth:
            depth[ch] += 1
        elif ch == ")" or ch == "]":
            key = "(" if ch == ")" else "["
            depth[key] -= 1
            if depth[key] < 0:
                return False
    return not any(depth.values())


def _cut_parameters(text: str) -> str:
    """Drop a trailing ``(...)`` parameter list, matching brackets from the end."""
    t = text.rstrip()
    for qualifier in (" const", " volatile"):
        if t.endswith(qualifier):
            t = t[: -len(qualifier)].rstrip()
    if not t.endswith(")"):
        return t
    depth = 0
    for i in range(len(t) - 1, -1, -1):
        ch = t[i]
        if ch in _CLOSE:
            depth += 1
        elif ch in _OPEN:
            depth -= 1
            if depth == 0:
                head = t[:i].rstrip()
                # "(anonymous namespace)" or a bare "(...)" is not a parameter list
                return head if head and not head.endswith("::") else t
    return t


def _after_return_type(text: str) -> str:
    """Drop a leading return type: the part before the last space outside brackets."""
    depth = 0
    cut = -1
    for i, ch in enumerate(text):
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(0, depth - 1)
        elif ch == " " and depth == 0:
            cut = i
    return text[cut + 1:] if cut >= 0 else text


def strip_clone_suffix(name: str) -> str:
    """``foo(int) [clone .kd]`` -> ``foo(int)``: GCC-style clone markers are not part of the name."""
    return _CLONE_SUFFIX.sub("", name) if name.endswith("]") else name


# Generic entry points whose template argument is the kernel proper: every ck_tile kernel is a
# ``ck_tile::kentry<N, Kernel, Args>`` and every CUTLASS 3 kernel a ``cutlass::device_kernel<Op>``,
# so their short names would all read the same. Their short name is the launched class.
LAUNCHERS = frozenset({"ck_tile::kentry", "cutlass::device_kernel", "cutlass::Kernel", "cutlass::Kernel2"})
_NUMBER = re.compile(r"\(?[\w:]*\)?\s*-?\d+[uUlL]*|true|false")


def _launched(head: str, launcher: str) -> str | None:
    """The first type among the launcher's top-level template arguments, templates stripped."""
    start = head.find(launcher + "<")
    if start < 0:
        return None
    depth, arg, args = 0, [], []
    for ch in head[start + len(launcher) + 1:]:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            if depth == 0:
                args.append("".join(arg))
                break
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(arg))
            arg = []
            continue
        arg.append(ch)
    for a in args:
        a = a.strip()
        if a and not _NUMBER.fullmatch(a):
            name = _strip_templates(a).strip()
            return name.removeprefix("struct ").removeprefix("class ").strip() or None
    return None


def short_name(name: str) -> str:
    """A short, readable kernel name (see the module docstring); never empty."""
    raw = strip_clone_suffix(name.strip())
    if not raw:
        return name
    prefix = _mangled_prefix(raw)
    if prefix:
        text = prefix
    elif not _balanced(raw):
        text = raw  # not a C++ signature we can take apart safely
    else:
        head = _cut_parameters(raw)
        text = _after_return_type(_strip_templates(head).strip()).strip()
        if text in LAUNCHERS:  # ck_tile::kentry<2, ck_tile::MoeFlatmmKernel<...>, ...>: the kernel is the argument
            text = _launched(head, text) or text
    if not text:
        text = raw
    if len(text) > MAX_SHORT_NAME:
        text = text[: MAX_SHORT_NAME - 3] + "..."
    return text

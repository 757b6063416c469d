"""Compile a Triton kernel for gfx950 on this machine (no GPU) and cache the code object.

``compile_for_gfx950(fn, signature, constexprs, options)`` -> ``TritonBinary`` (HSACO
bytes, kernel name, dynamic LDS bytes, warps). Cache: ``<cache_root>/emulator/triton/
<key>.hsaco`` + ``.json``, keyed by the kernel's source, the signature, constexprs,
options and the Triton version.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
from dataclasses import dataclass
from pathlib import Path

from verifiers.gfx950.env import cache_root


@dataclass(frozen=True)
class TritonBinary:
    hsaco: bytes
    name: str
    shared: int  # dynamic LDS bytes Triton passes at launch
    num_warps: int

    @property
    def block(self) -> tuple[int, int, int]:
        return (64 * self.num_warps, 1, 1)


def _cache_dir() -> Path:

    return cache_root() / "emulator" / "triton"


def compile_for_gfx950(fn, signature: dict, constexprs: dict, options: dict,  # noqa: ANN001
                       divisible: tuple[str, ...] = ()) -> TritonBinary:
    """Pointers (and the integer arguments named in ``divisible``) are declared multiples
    of 16 (``tt.divisibility``), as Triton's launcher specialises them for real tensors,
    so the loads vectorise as they would on hardware."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src = inspect.getsource(fn.fn if hasattr(fn, "fn") else fn)
    key_doc = json.dumps({"src": src, "sig": signature, "cx": constexprs, "opt": options, "div": list(divisible),
                          "triton": triton.__version__},
                         sort_keys=True, default=str)
    key = hashlib.sha256(key_doc.encode()).hexdigest()[:24]
    d = _cache_dir()
    hs, meta = d / f"{key}.hsaco", d / f"{key}.json"
    if hs.is_file() and meta.is_file():
        m = json.loads(meta.read_text())
        return TritonBinary(hs.read_bytes(), m["name"], m["shared"], m["num_warps"])
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # silence 3.9's default-change warning
    full_sig = dict(signature)
    for k in constexprs:
        full_sig[k] = "constexpr"
    names = list(inspect.signature(fn.fn if hasattr(fn, "fn") else fn).parameters)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n, t in signature.items()
             if t.startswith("*") or n in divisible}
    k = triton.compile(ASTSource(fn, signature=full_sig, constexprs=constexprs, attrs=attrs),
                       target=GPUTarget("hip", "gfx950", 64), options=options)
    binary = TritonBinary(k.asm["hsaco"], k.metadata.name, int(k.metadata.shared), int(k.metadata.num_warps))
    d.mkdir(parents=True, exist_ok=True)
    tmp = hs.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(binary.hsaco)
    os.replace(tmp, hs)
    meta.write_text(json.dumps({"name": binary.name, "shared": binary.shared, "num_warps": binary.num_warps}))
    return binary

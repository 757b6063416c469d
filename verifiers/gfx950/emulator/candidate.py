"""FlyDSL candidates on CPU: compile a rewrite for gfx950 and run it on the emulator.

The contract of a FlyDSL candidate verified with ``--device gfx950-emulated`` is the
ordinary one (``build(inputs, outputs) -> launch``, CPU tensors, outputs written in place);
its ``build`` compiles its kernel for gfx950 with :func:`compile_for_emulator` and its
``launch`` calls the returned kernel with the launcher arguments the compiled FlyDSL
function takes on a GPU (the stream omitted)::

    from verifiers.gfx950.emulator.candidate import compile_for_emulator

    def build(inputs, outputs):
        M, K = inputs["a"].shape
        def make():                                   # runs under the compile-only environment
            from my_kernels import compile_args       # import flydsl inside, never at module level
            return compile_args(M, N, K)              # -> (flyc.jit function, placeholder args)
        gemm = compile_for_emulator(make, key=(M, N, K))
        args = (...)                                  # from inputs / outputs
        return lambda: gemm(*args)

The compile runs in the candidate's own process (its arm), with ``ARCH=gfx950``,
``COMPILE_ONLY=1`` and ``ROCM_PATH`` holding an ld.lld for gfx950, exactly as the gates'
compile subprocess sets them; FlyDSL links the code object with that ld.lld (a child
process that ends before ``build`` returns). Kernels are cached per process by ``key``
(``build`` is called twice per parity case).
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from verifiers.gfx950 import env
from verifiers.gfx950.compile import read_dump
from verifiers.gfx950.emulator.errors import EmulatorError
from verifiers.gfx950.emulator.flydsl_arm import EmulatedKernel

_CACHE: dict[Hashable, dict[str, Any]] = {}


def compile_for_emulator(make: Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]], *, key: Hashable,
                         kernel: str | None = None):  # noqa: ANN201 - flydsl_arm.EmulatedKernel
    """Compile ``make()``'s ``(jit function, args)`` for gfx950 in this process and return the
    ``EmulatedKernel`` (``kernel`` names one when the compile yields several)."""
    kernels = _CACHE.get(key)
    if kernels is None:
        kernels = _CACHE[key] = _compile(make)
    if kernel is None:
        if len(kernels) != 1:
            raise EmulatorError(f"the compile yielded kernels {sorted(kernels)}: name one with kernel=")
        return next(iter(kernels.values()))
    if kernel not in kernels:
        raise EmulatorError(f"no kernel {kernel!r} in the compile; it yielded {sorted(kernels)}")
    return kernels[kernel]


def _compile(make: Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]) -> dict[str, Any]:

    missing = env.toolchain_problem()
    if missing:
        raise EmulatorError(f"FlyDSL cannot compile for gfx950 here: {missing}")
    with tempfile.TemporaryDirectory(prefix="flydsl-emulated-") as tmp:
        dump = Path(tmp) / "dump"
        os.environ.update(env.compile_only_env(dump_dir=dump))
        os.environ["FLYDSL_RUNTIME_ENABLE_CACHE"] = "0"  # the dumps are the output; FlyDSL's cache would skip them
        import flydsl.compiler as flyc

        fn, args = make()
        flyc.compile(fn, *args)
        found = read_dump(dump)
    if not found:
        raise EmulatorError("the FlyDSL compile produced no gfx950 kernel (no .amdhsa_kernel in the final ISA)")
    out = {}
    for k in found:
        if not k.code_object:
            raise EmulatorError(f"the FlyDSL compile of {k.kernel} left no linked code object (gpu.binary stage)")
        out[k.kernel] = EmulatedKernel(k.code_object, k.host_ir, k.kernel, {})
    return out

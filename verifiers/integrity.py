"""Tamper evidence: what the candidate may not change in the harness process.

``Snapshot.take`` runs in the worker after the harness, the problem and the arms are
imported and before the candidate is. It keeps strong references to every callable in the
guarded modules and classes (timers, synchronise, comparisons, the torch namespace, the
harness's own functions and their code objects) plus interpreter state a candidate could
use to intercept work (trace/profile hooks, torch function/dispatch modes, Python-registered
operator kernels). ``Snapshot.changes`` lists anything replaced since. A Python candidate in
the same process could still defeat this with enough effort; the harness files are hashed
by the parent process too (``harness_digest``), and the report carries a nonce the
candidate never sees.
"""
from __future__ import annotations

import hashlib
import os
import sys
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GUARDED_MODULES = (
    "builtins", "time", "gc", "threading", "os", "math", "json", "random",
    "numpy", "numpy.random", "pydantic",
    "torch", "torch.cuda", "torch.testing", "torch.profiler", "torch.autograd.profiler",
    "torch.nn.functional", "torch.linalg", "torch.library", "torch.fft", "torch.special",
)
GUARDED_CLASSES = (
    ("torch", "Tensor"), ("torch.cuda", "Event"), ("torch.cuda", "Stream"),
    ("torch.profiler", "profile"), ("threading", "Thread"), ("pydantic", "BaseModel"),
)
HARNESS_PACKAGE = "verifiers"


@dataclass
class _Entry:
    label: str
    holder: Any  # module or class
    attr: str
    value: Any
    code: Any = None
    defaults: Any = None
    kwdefaults: Any = None


def _is_guarded_value(value: Any) -> bool:
    return callable(value) or isinstance(value, (types.ModuleType, type, staticmethod, classmethod, property))


def _function_parts(value: Any) -> tuple[Any, Any, Any]:
    func = value
    if isinstance(value, (staticmethod, classmethod)):
        func = value.__func__
    if isinstance(func, types.FunctionType):
        return func.__code__, func.__defaults__, func.__kwdefaults__
    return None, None, None


@dataclass
class Snapshot:
    entries: list[_Entry] = field(default_factory=list)
    class_keys: dict[str, tuple[Any, frozenset[str]]] = field(default_factory=dict)
    modules: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def take(cls, extra_modules: tuple[str, ...] = ()) -> "Snapshot":
        snap = cls()
        names = list(GUARDED_MODULES) + list(extra_modules)
        names += sorted(n for n in sys.modules if n == HARNESS_PACKAGE or n.startswith(HARNESS_PACKAGE + "."))
        for name in names:
            module = sys.modules.get(name)
            if module is None:
                continue
            snap.modules[name] = module
            for attr, value in list(vars(module).items()):
                if _is_guarded_value(value):
                    snap._add(f"{name}.{attr}", module, attr, value)
                # classes defined by the harness: guard their methods too
                if isinstance(value, type) and name.startswith(HARNESS_PACKAGE) and value.__module__ == name:
                    snap._add_class(f"{name}.{attr}", value)
        for mod_name, cls_name in GUARDED_CLASSES:
            module = sys.modules.get(mod_name)
            klass = getattr(module, cls_name, None) if module is not None else None
            if isinstance(klass, type):
                snap._add_class(f"{mod_name}.{cls_name}", klass)
        snap.state = _interpreter_state()
        return snap

    def _add(self, label: str, holder: Any, attr: str, value: Any) -> None:
        code, defaults, kwdefaults = _function_parts(value)
        self.entries.append(_Entry(label, holder, attr, value, code, defaults, kwdefaults))

    def _add_class(self, label: str, klass: type) -> None:
        if label in self.class_keys:
            return
        self.class_keys[label] = (klass, frozenset(vars(klass)))
        for attr, value in list(vars(klass).items()):
            if _is_guarded_value(value):
                self._add(f"{label}.{attr}", klass, attr, value)

    def changes(self) -> list[str]:
        """Human-readable list of everything replaced, added or removed since ``take``."""
        found: list[str] = []
        for e in self.entries:
            holder_dict = vars(e.holder)
            if e.attr not in holder_dict:
                found.append(f"{e.label} was deleted")
                continue
            now = holder_dict[e.attr]
            if now is not e.value:
                if not _benign_torch_wrapper(now, e.value):
                    found.append(f"{e.label} was replaced")
                continue
            code, defaults, kwdefaults = _function_parts(now)
            if code is not e.code:
                found.append(f"{e.label}.__code__ was replaced")
            elif defaults is not e.defaults or kwdefaults is not e.kwdefaults:
                found.append(f"{e.label} defaults were replaced")
        for label, (klass, keys) in self.class_keys.items():
            added = sorted(set(vars(klass)) - keys)
            if added:
                found.append(f"{label} gained attributes {added}")
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                found.append(f"sys.modules[{name!r}] was replaced")
        now_state = _interpreter_state()
        for key, before in self.state.items():
            after = now_state.get(key)
            if after != before:
                found.append(f"{key} changed: {before!r} -> {after!r}")
        return found


def _benign_torch_wrapper(now: Any, before: Any) -> bool:
    """torch's own lazy imports wrap a few functions on first use (torch._dynamo wraps
    ``torch.manual_seed`` when the profiler or torch.compile first imports it); such a
    wrapper calls the original and is not a patch."""
    return getattr(now, "__wrapped__", None) is before and str(getattr(now, "__module__", "")).startswith("torch.")


def _interpreter_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "sys.gettrace()": repr(sys.gettrace()),
        "sys.getprofile()": repr(sys.getprofile()),
        "threading trace hook": repr(getattr(threading, "_trace_hook", None)),
        "threading profile hook": repr(getattr(threading, "_profile_hook", None)),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            state["torch function modes"] = int(torch._C._len_torch_function_stack())
            state["torch dispatch modes"] = int(torch._C._len_torch_dispatch_stack())
        except Exception:  # pragma: no cover - older torch
            pass
        try:  # global numerics switches: flipping one changes what the oracle computes
            state["float32 matmul precision"] = torch.get_float32_matmul_precision()
            state["cuda matmul allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
            state["cudnn allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
            state["cuda reduced-precision reductions"] = (
                bool(torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction),
                bool(torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction),
            )
            state["default dtype"] = str(torch.get_default_dtype())
        except Exception:  # pragma: no cover - attribute drift across torch versions
            pass
        library = sys.modules.get("torch.library")
        impls = getattr(library, "_impls", None) if library is not None else None
        if impls is not None:
            # aten kernels (re)registered from Python: an override of aten::mm for the
            # device would change what the oracle computes. Meta kernels compute nothing,
            # and torch's own subsystems register new namespaces on import.
            aten = sorted(str(x) for x in impls if str(x).startswith("aten/") and not str(x).endswith("/Meta"))
            state["Python-registered aten kernels"] = tuple(aten)
    return state


# ---- threads -------------------------------------------------------------------------

def python_threads() -> dict[int, str]:
    """Live Python threads: ident -> name."""
    return {t.ident: t.name for t in threading.enumerate() if t.ident is not None and t.is_alive()}


def os_thread_count() -> int:
    """Native threads of this process (Linux /proc), else the Python count."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def new_threads(before: dict[int, str]) -> dict[int, str]:
    now = python_threads()
    return {ident: name for ident, name in now.items() if ident not in before}


# ---- harness files -------------------------------------------------------------------

def harness_files(extra: list[Path] | None = None) -> list[Path]:
    root = Path(__file__).resolve().parent
    files = sorted(root.glob("*.py"))
    return files + [p.resolve() for p in (extra or []) if p.exists()]


def harness_digest(extra: list[Path] | None = None) -> str:
    """sha256 over the harness's own source files (and any extra file, e.g. the problem)."""
    h = hashlib.sha256()
    for path in harness_files(extra):
        h.update(str(path.name).encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()

"""Is more than one HIP (or CUDA) runtime library loaded in this process?

FlyDSL's runtime loads ``libamdhip64.so.7`` by name while a ROCm 6 build of torch carries
its own ``libamdhip64.so.6``: both load, each with its own device state, and a stream or
pointer made by one is an invalid handle to the other. The same happens with two copies of
one version from different folders (a system ROCm and one vendored in a wheel). The loaded
files are read off ``/proc/<pid>/maps``, where the kernel shows each mapped file by its real
path (symlinks resolved), so one library reached through several names counts once.

:func:`check_runtimes` is pure (maps text in, verdict out); :func:`check_this_process`
reads this process's maps. Call it after torch and the kernel libraries are imported
(``skill-server doctor`` does); a library not loaded yet cannot be seen.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

Family = Literal["hip", "cuda"]
# basename -> family; wheels vendor copies with a hash (libcudart-9335f6a2.so.12)
_LIBRARY = re.compile(r"^lib(?P<name>amdhip64|cudart)(?:-[0-9a-f]{6,})?\.so(?:\.(?P<version>[0-9][0-9.]*))?$")
_FAMILY: dict[str, Family] = {"amdhip64": "hip", "cudart": "cuda"}
_WHAT = {"hip": "HIP runtimes (libamdhip64)", "cuda": "CUDA runtimes (libcudart)"}


class RuntimeLibrary(BaseModel):
    family: Family
    path: str = Field(description="the mapped file, as the kernel shows it (real path)")
    version: str | None = Field(None, description="from the file name: 6.2.60200 for libamdhip64.so.6.2.60200")

    @property
    def label(self) -> str:
        return f"{Path(self.path).name} ({self.path})"


class RuntimeCheck(BaseModel):
    checked: bool = Field(description="False when the process maps could not be read (then nothing is known)")
    libraries: list[RuntimeLibrary] = Field(default_factory=list)
    problem: str | None = Field(None, description="one line when a family has more than one library loaded")
    note: str | None = Field(None, description="why nothing could be checked")

    @property
    def ok(self) -> bool:
        return self.checked and self.problem is None


def loaded_runtimes(maps_text: str) -> list[RuntimeLibrary]:
    """The distinct HIP/CUDA runtime files mapped in a ``/proc/<pid>/maps`` text, in order of first mapping."""
    seen: dict[str, RuntimeLibrary] = {}
    for line in maps_text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or not fields[5].startswith("/"):
            continue
        path = fields[5].removesuffix(" (deleted)")
        m = _LIBRARY.match(path.rsplit("/", 1)[-1])
        if m and path not in seen:
            seen[path] = RuntimeLibrary(family=_FAMILY[m["name"]], path=path, version=m["version"])
    return list(seen.values())


def check_runtimes(maps_text: str) -> RuntimeCheck:
    """Verdict on one maps text: a problem line when any family has two or more files loaded."""
    libraries = loaded_runtimes(maps_text)
    problems = []
    for family in ("hip", "cuda"):
        libs = [lib for lib in libraries if lib.family == family]
        if len(libs) > 1:
            versions = {lib.version for lib in libs}
            how = "different versions" if len(versions) > 1 else "one version from several folders"
            problems.append(
                f"{len(libs)} {_WHAT[family]} loaded in one process ({how}): {', '.join(lib.label for lib in libs)}; "
                "streams and device pointers from one are invalid in the other: make torch and the kernel "
                "libraries (FlyDSL, aiter) load the same runtime (one ROCm/CUDA install, LD_LIBRARY_PATH)"
            )
    return RuntimeCheck(checked=True, libraries=libraries, problem="; ".join(problems) or None)


def check_this_process(maps_path: str | Path = "/proc/self/maps") -> RuntimeCheck:
    """:func:`check_runtimes` on this process (``checked`` is False where there is no procfs)."""
    try:
        text = Path(maps_path).read_text(errors="replace")
    except OSError as exc:
        return RuntimeCheck(checked=False, note=f"cannot list the loaded libraries: {maps_path}: {exc.strerror or exc}")
    return check_runtimes(text)

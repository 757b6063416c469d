"""What this card's ROCm baseline needs from the box (``skill-server doctor`` finds ``CHECKS``).

The baseline ``ck_blockscale`` runs aiter's production CK block-scale GEMM, dispatched the
way aiter dispatches it (``ck_baseline.py``); its CK modules are built on first use, which
takes minutes, so the doctor says which are missing before a verification waits on them.

A check is ``function(box) -> dict``: ``box.build()`` is ``rocm``, ``cuda`` or ``cpu``;
``box.gpu_ready()`` says a usable GPU was found. The dict has ``status`` (ok, warn, missing,
failed, not_applicable), ``finding``, and optionally ``fix``, ``version``, ``path``.
"""
from __future__ import annotations

import importlib.util
from importlib.metadata import PackageNotFoundError, version as dist_version
from pathlib import Path
from typing import Any

from .problem import SHAPES

AITER_INSTALL = ("install aiter on the ROCm box (git clone --recursive https://github.com/ROCm/aiter; "
                 "pip install -e aiter)")


def _prepare_command() -> str:
    from .ck_baseline import PREPARE_COMMAND

    return PREPARE_COMMAND + "".join(f" --shape {s['M']}x{s['N']}x{s['K']}" for s in SHAPES)


def _dispatch(aiter: Any, shape: dict[str, int]) -> tuple[str, str | None, bool]:
    """(kernel instance, aiter module, module built) that production dispatch picks for ``shape``."""
    import torch  # the doctor's check process has torch; this module is imported only there

    from . import ck_baseline as ck

    row = ck.tuned_row_for(aiter, shape["M"], shape["N"], shape["K"], torch.device("cuda"))
    dispatch = ck.choose_dispatch(row, ck._takes(getattr(aiter, ck.PUBLIC_ENTRY, None), "out"))
    return dispatch.kernel_instance, dispatch.module, ck.module_built(dispatch.module)


def ck_blockscale_modules(box: Any) -> dict[str, Any]:
    try:
        version = dist_version("aiter")
    except PackageNotFoundError:
        version = None
    present = importlib.util.find_spec("aiter") is not None
    build = box.build()
    if build != "rocm":
        here = "installed but unused" if present else "not installed"
        return dict(status="not_applicable", version=version,
                    finding=f"aiter is ROCm-only ({here}): on a {build} box the block-scale card's baseline is "
                    + ("cuBLAS" if build == "cuda" else "the torch dequant arm"))
    if not present:
        return dict(status="missing", version=version, fix=f"{AITER_INSTALL}; then {_prepare_command()}",
                    finding="aiter is not installed: the block-scale card's ROCm baseline (ck_blockscale, the "
                    "production CK kernel) cannot run")
    try:
        import aiter
    except Exception as exc:  # noqa: BLE001 - a broken install is a finding
        return dict(status="failed", version=version, fix="reinstall aiter against this torch and ROCm",
                    finding=f"import aiter failed: {type(exc).__name__}: {exc}"[:300])
    path = str(Path(aiter.__file__).parent)
    if not box.gpu_ready():
        return dict(status="warn", version=version, path=path,
                    finding=f"aiter {version} imports, but with no GPU its tuned dispatch cannot be looked up")
    unbuilt: dict[str, list[str]] = {}
    instances = []
    for s in SHAPES:
        label = f"{s['M']}x{s['N']}x{s['K']}"
        try:
            instance, module, built = _dispatch(aiter, s)
        except Exception as exc:  # noqa: BLE001
            return dict(status="failed", version=version, path=path,
                        fix="reinstall aiter (its tuned CSV or gemm_a8w8 ops are missing)",
                        finding=f"aiter's tuned dispatch for {label} failed: {type(exc).__name__}: {exc}"[:300])
        instances.append(f"{label}: {instance}")
        if not built:
            unbuilt.setdefault(module or "?", []).append(label)
    if unbuilt:
        what = "; ".join(f"{m} (for {', '.join(v)})" for m, v in unbuilt.items())
        return dict(status="missing", version=version, path=path, fix=_prepare_command(),
                    finding=f"aiter {version}: the CK block-scale modules the card's shapes need are not built: "
                    f"{what}; the ck_blockscale baseline refuses until they are (first build: minutes)")
    return dict(status="ok", version=version, path=path,
                finding=f"aiter {version}; CK block-scale modules built; dispatch: {'; '.join(instances)}"[:600])


#: check id -> (title, function)
CHECKS = {"aiter": ("aiter (CK block-scale baseline)", ck_blockscale_modules)}

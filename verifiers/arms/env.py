"""The environment an arm process starts with: an allow-list, never the server's own.

The zygote (and every arm it forks) is exec'd with this environment, so its initial
environment block -- what ``/proc/self/environ`` shows for the life of the process, whatever
later ``os.environ`` edits do -- holds no token, database URL, cloud credential or other
secret of the server's. Allowed: the system basics and the variables GPU runtimes, compilers
and numeric libraries read (CUDA, ROCm/HIP, torch, Triton, FlyDSL, aiter, CK, OpenMP/BLAS);
the verifier's own switches the arm side reads; and whatever the operator names in
``SKILL_SERVER_ARM_ENV`` (comma-separated names, ``PREFIX*`` for a prefix), for a kernel that
needs one more. A name that looks like a secret (token, secret, password, credential) is
dropped even when a prefix allows it; the operator can still name it exactly.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping

EXTRA_ENV = "SKILL_SERVER_ARM_ENV"

BASICS = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR", "SHELL", "LD_LIBRARY_PATH",
    "CONDA_PREFIX", "VIRTUAL_ENV", "CC", "CXX",
    # the verifier's own switches and tool paths, read on the arm side (none is a secret)
    "SKILL_SERVER_SANDBOX", "SKILL_SERVER_REQUIRE_SANDBOX", "SKILL_SERVER_LD_LLD", "SKILL_SERVER_LLVM_OBJDUMP",
})
PREFIXES = (
    "LC_", "XDG_",
    "CUDA_", "NVIDIA_", "CUBLAS", "CUDNN_", "NCCL_", "NVTE_", "PTXAS_",
    "HIP_", "HIPBLASLT_", "ROCM_", "ROCR_", "ROCBLAS_", "HSA_", "HCC_", "AMD_", "GPU_", "MIOPEN_", "TENSILE_",
    "TORCH_", "PYTORCH_", "TORCHINDUCTOR_", "TRITON_", "FLYDSL_", "MLIR_", "LLVM_", "AITER_", "CK_",
    "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_",
)
_SECRET_LOOKING = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE|API_?KEY|AUTH", re.I)


def operator_extras(text: str | None) -> tuple[set[str], tuple[str, ...]]:
    names, prefixes = set(), []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        if item.endswith("*"):
            prefixes.append(item[:-1])
        else:
            names.add(item)
    return names, tuple(p for p in prefixes if p)


def arm_environment(source: Mapping[str, str] | None = None, cpu: bool = False) -> dict[str, str]:
    """What of ``source`` (default: this process's environment) an arm may see. ``cpu``: the
    arms run on CPU tensors, where a Triton kernel can only run in Triton's interpreter, so
    ``TRITON_INTERPRET=1`` unless the operator set it (Triton reads it when a kernel module is
    imported: a twin that needs it would otherwise refuse, and the card FAIL, on any CPU box)."""
    env = dict(os.environ if source is None else source)
    names, prefixes = operator_extras(env.get(EXTRA_ENV))
    out = {}
    for key, value in env.items():
        if key in names:
            out[key] = value  # named exactly by the operator
        elif (key in BASICS or key.startswith(PREFIXES) or key.startswith(prefixes)) and not _SECRET_LOOKING.search(key):
            out[key] = value
    if cpu:
        out.setdefault("TRITON_INTERPRET", "1")
    # numpy's OpenBLAS pool keeps its threads spinning after a call returns: CPU time of the
    # arm's process outside launch(), which the CPU clock check reads as work the arm's own clock
    # did not see (the honest Triton twin, whose interpreter calls numpy, FAILed it by 6-8 ms
    # per call on a quiet 2-core box). One thread unless the operator says otherwise.
    out.setdefault("OPENBLAS_NUM_THREADS", "1")
    return out

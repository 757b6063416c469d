"""Which paths a GPU runtime needs inside the arm sandbox: opens the device in forked children,
each confined by the arm's policy plus one extra grant, and prints which variant works.

    python bench/sandbox_gpu_probe.py [--strace OUT.txt]

Run on a GPU box (CUDA or ROCm torch). Each child enters the sandbox exactly as an arm does
(verifiers.arms.sandbox.arm_policy + landlock.restrict), then initialises the device and allocates.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402  (imported before any fork, as the zygote does; CUDA not initialised)

from verifiers.arms import landlock  # noqa: E402
from verifiers.arms import sandbox

ALL = "/"
EXTRAS = {
    "as is": [],
    "+ /proc (write)": [("/proc", "write")],
    "+ /proc/self (write: this process's own /proc directory)": [("/proc/self", "write")],
    "+ /proc/driver (write)": [("/proc/driver", "write")],
}


def child(extra) -> int:
    scratch = Path(tempfile.mkdtemp(prefix="probe-scratch-"))
    prefix = Path(tempfile.mkdtemp(prefix="probe-prefix-"))
    policy = sandbox.arm_policy("baseline", scratch, prefix, True, [], list(sys.path), True, [])
    rules = [(r.path, sandbox.RIGHTS[r.access]) for r in policy.rules]
    version = sandbox.support().abi
    if isinstance(extra, str) and extra.startswith("abi"):
        version = int(extra[3:])
    elif extra == "nnp":
        version = 0
    else:
        rules += [(p, sandbox.RIGHTS[a]) for p, a in extra if os.path.exists(p)]
    for k, v in policy.env.items():
        os.environ[k] = v
    if version:
        landlock.restrict(version, rules)
    else:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)
    try:
        n = torch.cuda.device_count()
        x = torch.ones(1024, device="cuda")
        torch.cuda.synchronize()
        print(f"    ok: {n} device(s), sum {float(x.sum())}", flush=True)
        return 0
    except Exception as exc:
        print(f"    FAILED: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        return 1


def main() -> int:
    print("devices:", sorted(p for p in os.listdir("/dev") if "nvidia" in p or p in ("kfd", "dri")))
    status = sandbox.support()
    print("landlock:", status.text if isinstance(status.text, str) else status.text())
    for name, extra in EXTRAS.items():
        print(f"  {name}", flush=True)
        pid = os.fork()
        if pid == 0:
            os._exit(child(extra))
        os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What an arm process may touch, and the Landlock domain that enforces it.

Every arm process (candidate, its import probe, baselines) runs under the verifier's
user, so file permissions protect nothing from it. The zygote's child therefore enters a
Landlock domain (``verifiers.arms.landlock``) right after ``fork`` and before any arm code is
imported, built from an allow-list (``arm_policy``), never from a list of things to hide:

read + execute
    the Python installation (prefixes, ``sys.path``), the harness (``verifiers/``), the
    card kernels and the problem's and candidate's own folders, system software
    (``/usr``, ``/lib*``, ``/bin``, ``/opt``, toolkits named by ``ROCM_PATH``,
    ``CUDA_HOME``, ``FLYDSL_COMPILE_LLVM_DIR``, ``LD_LIBRARY_PATH``)
read
    ``/proc``, ``/sys``, the few ``/etc`` files loaders and runtimes read
devices (read, write, ioctl)
    ``/dev/null`` and friends; on GPUs ``/dev/nvidia*``, ``/dev/kfd``, ``/dev/dri`` and
    ``/dev/shm`` (torch's CUDA IPC reference counters live there)
write
    the arm's own fresh scratch folder (``TMPDIR``, ``HOME``, every JIT cache variable
    point into it); a trusted baseline also writes its bytecode prefix, the verifier's
    private baseline compile cache (``<cache>/verifier-jit``) and the caller's
    ``~/.aiter`` / ``~/.flydsl`` (what the judge's prepare step built), none of which a
    candidate can write.

Any read root that *contains* a secret (the verifier's cache, the judge's work folder, the
paths the calling application registered with ``protect``: the server registers its state
folder with the ledger and the signing key) is replaced by its other children, recursively:
a checkout on ``sys.path`` is readable except ``var/`` and ``.cache/``. A write root that contains a secret is a
harness error. With ABI >= 4 no TCP port may be bound or connected; with ABI >= 6
abstract Unix sockets and signals are scoped to the domain. Landlock also refuses
``ptrace`` (and ``/proc/<pid>/mem``) of any process outside the domain, root included.
Descriptors opened before the domain (the judge's socket, the log pipe, buffer memfds)
keep working.

Where the kernel has no Landlock (or the operator set ``SKILL_SERVER_SANDBOX=off``) the arm
runs unconfined and the report says so (``SandboxStatus.text``);
``SKILL_SERVER_REQUIRE_SANDBOX=1`` (or ``VerifyOptions.require_sandbox``) makes the judge
refuse instead. Neither is a client option: an MCP client can ask for more confinement,
never for less.
"""
from __future__ import annotations

import glob
import os
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from verifiers import locations
from verifiers.arms import landlock
from verifiers.settings import verifier_settings

REQUIRE_ENV = "SKILL_SERVER_REQUIRE_SANDBOX"
#: the operator's way out (a toolkit the allow-list misses; testing the fallback defences): ``off``
SWITCH_ENV = "SKILL_SERVER_SANDBOX"
Access = Literal["read", "read_exec", "device", "write", "own_proc"]
_WRITE = (landlock.FS_ABI1 | landlock.REFER | landlock.TRUNCATE) & ~(landlock.MAKE_CHAR | landlock.MAKE_BLOCK)
RIGHTS: dict[str, int] = {
    "read": landlock.READ,
    "read_exec": landlock.READ_EXEC,
    "device": landlock.READ | landlock.WRITE_FILE | landlock.TRUNCATE | landlock.IOCTL_DEV,
    "write": _WRITE,
    # the arm's own /proc/<pid>: the CUDA driver writes there while it initialises (measured on
    # the H200: cudaGetDeviceCount fails with error 304 without it; bench/sandbox_gpu_probe.py)
    "own_proc": landlock.READ | landlock.WRITE_FILE | landlock.TRUNCATE,
}
SYSTEM_SOFTWARE = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ld.so.preload", "localtime", "timezone", "nsswitch.conf",
             "passwd", "group", "hosts", "host.conf", "gai.conf", "alternatives", "OpenCL", "vulkan", "os-release",
             "lsb-release", "debian_version", "mime.types", "ssl", "ca-certificates", "nvidia", "amd", "rocm",
             "modprobe.d", "fonts", "machine-id")
PLAIN_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/kfd", "/dev/dri")
TOOLKIT_ENV = ("ROCM_PATH", "HIP_PATH", "CUDA_HOME", "CUDA_PATH", "FLYDSL_COMPILE_LLVM_DIR", "TRITON_PTXAS_PATH",
               "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH")
#: environment variables of the caller that an arm never sees (paths to the state, the ledger)
HIDDEN_ENV_PREFIX = "SKILL_SERVER_"
_registered: set[str] = set()


class SandboxError(ValueError):
    """The policy cannot be built safely (a write root would expose a secret)."""


class PathRule(BaseModel):
    path: str
    access: Access


class SandboxPolicy(BaseModel):
    """One arm process's confinement, built by the judge, applied by the zygote's child."""

    role: str
    scratch: str = Field(description="the arm's own fresh folder: the only place an untrusted arm writes")
    rules: list[PathRule]
    env: dict[str, str] = Field(description="variables set in the arm (temporary and JIT cache folders)")
    required: bool = False


class SandboxStatus(BaseModel):
    """What confined a process: ``landlock ABI 7: fs, net, scope`` or ``unavailable: <why>``."""

    abi: int = 0
    layers: list[str] = Field(default_factory=list)
    reason: str | None = None

    @property
    def active(self) -> bool:
        return self.abi > 0 and self.reason is None

    def text(self) -> str:
        return f"landlock ABI {self.abi}: {', '.join(self.layers)}" if self.active else f"unavailable: {self.reason}"


def required() -> bool:
    """The operator's setting: refuse to run arms that cannot be confined."""
    return verifier_settings().require_sandbox


def support() -> SandboxStatus:
    """What this kernel would give an arm (nothing is restricted by asking)."""
    if not verifier_settings().sandbox:
        return SandboxStatus(reason=f"turned off by the operator ({SWITCH_ENV}=off)")
    version, why = landlock.abi()
    if version <= 0:
        return SandboxStatus(reason=why or "Landlock unavailable")
    return SandboxStatus(abi=version, layers=landlock.Handled.for_abi(version).layers())


def may_use_gpu(choice: str) -> bool:
    """Whether the device option can resolve to a GPU, decided without importing torch."""
    choice = choice.strip().lower()
    if choice in ("cpu", "gfx950-emulated"):  # the emulated platform runs on CPU tensors
        return False
    if choice != "auto":
        return True
    return any(Path(p).exists() for p in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg"))


# -- secrets ------------------------------------------------------------------------------
def protect(path: Path | str) -> None:
    """Register a folder or file no arm may ever read. The seam through which the calling
    application hands over its secrets (its state folder, a ledger's and a key's folder):
    the verifier does not know where an application keeps them. Registered paths stay
    registered for the life of the process; the runner passes them all to the judge."""
    _registered.add(str(Path(path).expanduser().resolve()))


def secret_paths() -> list[str]:
    """The verifier's cache folder and whatever the caller registered with :func:`protect`:
    passed from the caller to the judge in the job."""
    return sorted({str(locations.cache_dir().resolve())} | _registered)


def _grant_around(root: Path, secrets: list[Path], depth: int = 0) -> list[Path]:
    """``root`` itself, or -- when it contains a secret -- its other children, recursively."""
    try:
        root = root.resolve()
        if not root.exists():
            return []
    except (OSError, RuntimeError):
        return []
    if any(root.is_relative_to(s) for s in secrets):
        return []
    if not root.is_dir() or not any(s.is_relative_to(root) for s in secrets):
        return [root]
    if depth > 16:
        return []
    out: list[Path] = []
    try:
        children = sorted(root.iterdir())
    except OSError:
        return []
    for child in children:
        out += _grant_around(child, secrets, depth + 1)
    return out


# -- the policy ---------------------------------------------------------------------------
def jit_environment(scratch: Path, jit: Path) -> dict[str, str]:
    """Temporary folders in ``scratch``; every compile cache we know of in ``jit``."""
    tmp, home = scratch / "tmp", scratch / "home"
    env = {"TMPDIR": tmp, "TMP": tmp, "TEMP": tmp, "HOME": home, "XDG_CONFIG_HOME": home / ".config",
           "XDG_DATA_HOME": home / ".local/share", "XDG_STATE_HOME": home / ".local/state",
           "XDG_CACHE_HOME": jit / "xdg", "TRITON_HOME": home, "TRITON_CACHE_DIR": jit / "triton",
           "TRITON_DUMP_DIR": scratch / "triton-dump", "TRITON_OVERRIDE_DIR": scratch / "triton-override",
           "FLYDSL_RUNTIME_CACHE_DIR": jit / "flydsl", "FLYDSL_DUMP_DIR": scratch / "flydsl-dump",
           "FLYDSL_AUTOTUNE_CACHE_DIR": jit / "flydsl-autotune", "CUDA_CACHE_PATH": jit / "cuda",
           "PYTORCH_KERNEL_CACHE_PATH": jit / "torch-kernels", "TORCHINDUCTOR_CACHE_DIR": jit / "inductor",
           "TORCH_EXTENSIONS_DIR": jit / "torch-extensions", "AMD_COMGR_CACHE_DIR": jit / "comgr",
           "MIOPEN_USER_DB_PATH": jit / "miopen", "MIOPEN_CUSTOM_CACHE_DIR": jit / "miopen",
           locations.CACHE_ENV: jit / "skill-server"}
    return {k: str(v) for k, v in env.items()}


def baseline_cache() -> Path:
    """The compile cache trusted baselines share across runs; no arm of a candidate can reach it."""
    return locations.cache_dir().resolve() / "verifier-jit"


def arm_policy(role: str, scratch: Path, prefix: Path, trusted: bool, code: list[Path], sys_path: list[str],
               gpu: bool, secrets: list[str], require: bool = False) -> SandboxPolicy:
    """The allow-list of one arm process (see the module docstring)."""
    guarded = [Path(s).resolve() for s in secrets]
    reads: dict[Path, Access] = {}

    def read(path: Path | str, access: Access) -> None:
        for granted in _grant_around(Path(path), guarded):
            if reads.get(granted) != "read_exec":
                reads[granted] = access

    for p in [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys_path, *sys.path]:
        if p:
            read(p, "read_exec")
    read(os.path.realpath(sys.executable), "read_exec")
    for p in [locations.CODE_ROOT / "verifiers", locations.CODE_ROOT / "skill_kernels", locations.KERNELS_DIR, *code]:
        read(p, "read_exec")
    for p in SYSTEM_SOFTWARE:
        read(p, "read_exec")
    for var in TOOLKIT_ENV:
        if os.environ.get(var):
            read(os.environ[var], "read_exec")
    for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        if p:
            read(p, "read_exec")
    for p in ["/proc", "/sys", *(f"/etc/{name}" for name in ETC_FILES)]:
        read(p, "read")
    rules = [PathRule(path=str(p), access=a) for p, a in reads.items()]
    devices = list(PLAIN_DEVICES) + ([d for pattern in GPU_DEVICES for d in glob.glob(pattern)] if gpu else [])
    rules += [PathRule(path=d, access="device") for d in devices]
    if gpu:  # "/proc/self" is opened by the arm itself when it enters the domain: its own directory
        rules.append(PathRule(path="/proc/self", access="own_proc"))
    jit = baseline_cache() if trusted else scratch / "jit"
    writes = [scratch] + ([prefix, jit] if trusted else []) + ([Path("/dev/shm")] if gpu else [])
    env = jit_environment(scratch, jit)
    if trusted:  # a baseline keeps the caller's HOME for what the judge's prepare step built there
        # (aiter's ~/.aiter/jit when its package folder is read-only; FlyDSL's staged toolkit):
        # written by trusted processes only, since no candidate may write there
        home = Path(os.environ.get("HOME") or Path.home())
        env["HOME"] = str(home)
        writes += [home / ".aiter", home / ".flydsl"] + ([Path(os.environ["AITER_JIT_DIR"])]
                                                          if os.environ.get("AITER_JIT_DIR") else [])
    else:
        env["AITER_JIT_DIR"] = str(jit / "aiter")
    for w in writes:
        w = w.resolve()
        exposed = [s for s in guarded if s.is_relative_to(w)]
        if exposed:
            raise SandboxError(f"the {role} arm would write to {w}, which holds {exposed[0]}: "
                               "move the verifier's work folder or state out of it")
        rules.append(PathRule(path=str(w), access="write"))
    if not trusted:
        rules.append(PathRule(path=str(prefix.resolve()), access="read"))
    return SandboxPolicy(role=role, scratch=str(scratch), rules=rules, env=env, required=require)


# -- inside the arm -------------------------------------------------------------------------
def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def enter(policy: SandboxPolicy) -> SandboxStatus:
    """Point temporary and cache folders into the scratch folder and restrict this process
    for good. Called by the zygote's child before any arm code is imported."""
    import tempfile

    status = support()  # before the operator's variables leave the environment
    for key in [k for k in os.environ if k.startswith(HIDDEN_ENV_PREFIX)]:
        del os.environ[key]
    for key, value in policy.env.items():
        os.environ[key] = value
    for key in ("TMPDIR", "TRITON_CACHE_DIR", "HOME"):
        if key != "HOME" or Path(policy.env[key]).is_relative_to(policy.scratch):
            Path(policy.env[key]).mkdir(parents=True, exist_ok=True)
    tempfile.tempdir = policy.env["TMPDIR"]  # the zygote may have cached /tmp already
    if not status.active:
        return status
    if _threads() > 1:  # restrict_self applies to the calling thread only
        return SandboxStatus(reason=f"the arm process has {_threads()} threads before confinement")
    try:
        landlock.restrict(status.abi, [(r.path, RIGHTS[r.access]) for r in policy.rules])
    except landlock.LandlockError as exc:
        return SandboxStatus(reason=str(exc))
    return status

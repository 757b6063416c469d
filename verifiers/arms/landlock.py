"""Linux Landlock through raw system calls (ctypes): ruleset, rules, restrict-self.

Only what ``verifiers.arms.sandbox`` needs: which ABI the kernel offers, and a ruleset that
handles every access right of that ABI, grants the given path rules and no network port,
and scopes abstract Unix sockets and signals. The system-call numbers are those of the
unified table (the same on x86_64 and aarch64). Nothing here runs at import.
"""
from __future__ import annotations

import ctypes
import os
import platform
from dataclasses import dataclass

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

# filesystem rights, with the ABI that introduced them
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
FS_ABI1 = (1 << 13) - 1
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

#: rights that may be granted on a file (not a directory) rule
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
READ = READ_FILE | READ_DIR
READ_EXEC = READ | EXECUTE


class LandlockError(OSError):
    """A Landlock system call failed (the message names which, and errno)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc: ctypes.CDLL | None = None


def _syscall(number: int, *args) -> int:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    result = _libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise LandlockError(err, f"syscall {number}: {os.strerror(err)}")
    return int(result)


def abi() -> tuple[int, str | None]:
    """(ABI version, None), or (0, why Landlock cannot be used here)."""
    if platform.system() != "Linux":
        return 0, f"not Linux ({platform.system()})"
    if platform.machine() not in ("x86_64", "aarch64", "arm64", "riscv64"):
        return 0, f"architecture {platform.machine()} not supported by this module"
    try:
        return _syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION)), None
    except LandlockError as exc:
        why = {38: "the kernel has no Landlock (ENOSYS)",
               95: "Landlock is built in but not enabled (EOPNOTSUPP: add landlock to the lsm= boot list)"}
        return 0, why.get(exc.errno or 0, f"landlock_create_ruleset: {exc.strerror}")


@dataclass(frozen=True)
class Handled:
    """Everything one ABI lets a ruleset deny."""

    fs: int
    net: int
    scoped: int

    @classmethod
    def for_abi(cls, version: int) -> "Handled":
        fs = FS_ABI1
        if version >= 2:
            fs |= REFER
        if version >= 3:
            fs |= TRUNCATE
        if version >= 5:
            fs |= IOCTL_DEV
        net = NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0
        scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0
        return cls(fs, net, scoped)

    def layers(self) -> list[str]:
        return ["fs"] + (["net"] if self.net else []) + (["scope"] if self.scoped else [])


def restrict(version: int, rules: list[tuple[str, int]]) -> Handled:
    """Deny this thread (and everything it starts) every right the ABI handles except the
    ``(path, rights)`` rules; no TCP port is granted. Paths that do not exist are skipped;
    on a file only file rights are kept. Call it while the process has one thread."""
    handled = Handled.for_abi(version)
    attr = _RulesetAttr(handled.fs, handled.net, handled.scoped)
    size = 8 if version < 4 else 16 if version < 6 else 24  # older kernels reject unknown fields
    ruleset = _syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                allowed = rights & handled.fs
                if not os.path.isdir(f"/proc/self/fd/{fd}"):
                    allowed &= FILE_RIGHTS
                if not allowed:
                    continue
                rule = _PathBeneathAttr(allowed, fd)
                try:
                    _syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                             ctypes.byref(rule), ctypes.c_uint32(0))
                except LandlockError as exc:
                    raise LandlockError(exc.errno, f"landlock_add_rule({path}): {exc.strerror}") from None
            finally:
                os.close(fd)
        if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:  # type: ignore[union-attr]
            err = ctypes.get_errno()
            raise LandlockError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
        _syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return handled

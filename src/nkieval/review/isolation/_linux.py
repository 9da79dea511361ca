"""Thin ctypes wrappers for the Linux system calls the sandbox needs (Python 3.11 has no
``os.unshare``, ``mount`` or ``capset``). Every wrapper raises ``OSError`` with the call's name."""

from __future__ import annotations

import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)

CLONE_THREAD = 0x00010000
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
SYS_MOUNT_SETATTR = 442  # the same number on every architecture that has it (x86_64, aarch64, ...)

TIOCSTI = 0x5412
TIOCLINUX = 0x541C


def _fail(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    if _libc.unshare(ctypes.c_int(flags)) != 0:
        raise _fail(f"unshare({flags:#x})")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(s: str | None) -> bytes | None:
        return None if s is None else s.encode()

    if _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        raise _fail(f"mount({source!r} on {target!r})")


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> int:
    res = _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3),
                      ctypes.c_ulong(0), ctypes.c_ulong(0))
    if res < 0:
        raise _fail(f"prctl({option})")
    return int(res)


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def readonly_tree(path: str = "/") -> None:
    """Make every mount under ``path`` read-only and nosuid, and private (mount_setattr(2),
    Linux 5.12+, one atomic call for the whole tree)."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, MS_PRIVATE, 0)
    res = _libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), path.encode(),
                        ctypes.c_uint(AT_RECURSIVE), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)))
    if res != 0:
        raise _fail("mount_setattr(AT_RECURSIVE, MOUNT_ATTR_RDONLY)")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def drop_all_capabilities() -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable capability sets."""
    last_cap = 63
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last_cap = int(f.read())
    except OSError:
        pass
    for cap in range(last_cap + 1):
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            pass
    try:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), data) != 0:
        raise _fail("capset")


OPEN_TREE_CLONE = 1
O_CLOEXEC = 0o2000000
MOVE_MOUNT_F_EMPTY_PATH = 4
SYS_OPEN_TREE = 428
SYS_MOVE_MOUNT = 429


def clone_tree(path: str) -> int:
    """A detached copy of the mount tree at ``path`` (open_tree(2) with OPEN_TREE_CLONE), as an
    fd: opened while the caller can still reach ``path``, attached later with :func:`attach_tree`."""
    fd = _libc.syscall(ctypes.c_long(SYS_OPEN_TREE), ctypes.c_int(AT_FDCWD), path.encode(),
                       ctypes.c_uint(OPEN_TREE_CLONE | AT_RECURSIVE | O_CLOEXEC))
    if fd < 0:
        raise _fail(f"open_tree({path!r})")
    return int(fd)


def attach_tree(fd: int, target: str) -> None:
    res = _libc.syscall(ctypes.c_long(SYS_MOVE_MOUNT), ctypes.c_int(fd), b"", ctypes.c_int(AT_FDCWD),
                        target.encode(), ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH))
    if res != 0:
        raise _fail(f"move_mount(onto {target!r})")


PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def load_bpf(program: bytes) -> None:
    """Install a compiled seccomp BPF program (8-byte ``struct sock_filter`` entries) on the
    calling thread. Requires no_new_privs (or CAP_SYS_ADMIN)."""
    if not program or len(program) % 8:
        raise ValueError("not a BPF program")
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if _libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER),
                   ctypes.byref(prog), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        raise _fail("prctl(PR_SET_SECCOMP)")

"""The worker's seccomp filter (through ``pyseccomp``, a ctypes binding of the system's
libseccomp). Default: allow. Blocked calls kill the whole worker process (SIGSYS); ``clone3``
answers ENOSYS so glibc falls back to ``clone``, whose flags (a register, unlike clone3's
struct) are checked: only thread creation (``CLONE_THREAD`` set) is allowed."""

from __future__ import annotations

import errno
import os

from nkieval.review.isolation import _linux

#: System calls that kill the worker. Grouped by what they would let a candidate do.
BLOCKED_SYSCALLS: dict[str, tuple[str, ...]] = {
    "new processes and programs": ("fork", "vfork", "execve", "execveat"),
    "other processes' memory": ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
                                "pidfd_open", "pidfd_getfd", "pidfd_send_signal"),
    "network and local sockets": ("socket", "socketpair", "connect", "bind", "listen", "accept",
                                  "accept4"),
    "file systems and namespaces": ("mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
                                    "mount_setattr", "move_mount", "open_tree", "fsopen", "fsmount",
                                    "fsconfig", "fspick", "open_by_handle_at", "name_to_handle_at",
                                    "quotactl", "swapon", "swapoff"),
    "kernel attack surface": ("bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
                              "io_uring_enter", "io_uring_register", "keyctl", "add_key",
                              "request_key", "personality", "kexec_load", "kexec_file_load",
                              "init_module", "finit_module", "delete_module", "reboot", "acct",
                              "iopl", "ioperm", "syslog", "lookup_dcookie", "move_pages",
                              "migrate_pages", "mbind", "settimeofday", "clock_settime",
                              "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
                              "vhangup", "uselib", "nfsservctl"),
}


def blocked_names() -> list[str]:
    return [name for group in BLOCKED_SYSCALLS.values() for name in group]


def build() -> tuple[object, dict[str, object]]:
    """The filter, not yet loaded (the zygote builds it once; each worker only loads it), and a
    description of it: the blocked calls known on this architecture and any skipped."""
    import pyseccomp as sc

    flt = sc.SyscallFilter(sc.ALLOW)
    kill = sc.KILL_PROCESS
    installed: list[str] = []
    unknown: list[str] = []
    for name in blocked_names():
        try:
            flt.add_rule(kill, name)
            installed.append(name)
        except (OSError, ValueError):
            unknown.append(name)  # not a system call on this architecture
    flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    # clone without CLONE_THREAD creates a process: kill. (arg 0 is the flags on x86_64 and arm64)
    flt.add_rule(kill, "clone", sc.Arg(0, sc.MASKED_EQ, _linux.CLONE_THREAD, 0))
    # ioctls that push input into a terminal
    for req in (_linux.TIOCSTI, _linux.TIOCLINUX):
        flt.add_rule(kill, "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, req))
    # the parent-death signal is what guarantees the worker dies with its supervisor
    flt.add_rule(kill, "prctl", sc.Arg(0, sc.EQ, _linux.PR_SET_PDEATHSIG))
    return flt, {"action": "kill-process", "blocked": installed, "unknown_on_this_arch": unknown,
                 "clone3": "ENOSYS", "clone": "CLONE_THREAD only",
                 "ioctl": "TIOCSTI/TIOCLINUX blocked", "prctl": "PR_SET_PDEATHSIG blocked"}


def compile_bpf(flt: object) -> bytes:
    """The filter as the raw BPF program libseccomp would load. Generating it costs ~20 ms, so
    the zygote does it once and each worker installs the bytes (:func:`load`)."""
    fd = os.memfd_create("nkieval-seccomp", os.MFD_CLOEXEC)
    with os.fdopen(fd, "w+b") as f:
        flt.export_bpf(f)  # type: ignore[attr-defined]
        f.seek(0)
        return f.read()


def load(program: bytes) -> None:
    """Install on the calling thread (threads it starts later inherit it). Sets no_new_privs
    first (the kernel requires it without CAP_SYS_ADMIN)."""
    _linux.prctl(_linux.PR_SET_NO_NEW_PRIVS, 1)
    _linux.load_bpf(program)


def build_and_load() -> dict[str, object]:
    flt, info = build()
    load(compile_bpf(flt))
    return info

"""The zygote's own isolation: preload, then user/net/mount/ipc/uts namespaces, hidden paths,
read-only root, non-dumpable. Also used, step by step and recording failures, by ``probe()``."""

from __future__ import annotations

import functools
import importlib
import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nkieval.review.isolation import _linux

NOBODY = 65534


class SetupError(Exception):
    def __init__(self, step: str, reason: str) -> None:
        super().__init__(f"{step}: {reason}")
        self.step = step
        self.reason = reason


class Steps:
    """Runs setup steps by name; strict: the first failure raises, else failures are recorded."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.results: dict[str, list[Any]] = {}

    def run(self, name: str, fn: Callable[..., Any], *args: Any) -> bool:
        try:
            fn(*args)
        except Exception as e:
            reason = f"{type(e).__name__}: {e}"
            self.results[name] = [False, reason]
            if self.strict:
                raise SetupError(name, reason) from e
            return False
        self.results[name] = [True, ""]
        return True


# ---------------------------------------------------------------- zygote set-up

@dataclass(frozen=True)
class Handler:
    """A pool's handler as the zygote loaded it: ``run`` (``module:function``, called with each request's bytes in a
    fresh worker) and the module's optional ``prepare()``, which each standby worker calls once it is sandboxed and
    before its request arrives: request-independent work that would otherwise be done while the judge waits (the
    first writes to the zygote's pages that a request makes, each a page copied into the fresh fork). ``prepare``
    is harness code and runs before any of the request's; an exception from it fails the worker's set-up."""

    run: Callable[[bytes], bytes]
    prepare: Callable[[], None] | None = None


def _preload(handler: str) -> Handler:
    import numpy  # noqa: F401
    import pyseccomp  # noqa: F401  (loads libseccomp now, while the whole file system is reachable)

    import nkieval.frontends
    import nkieval.sim

    nkieval.frontends.install(force=True)
    import select  # noqa: F401
    import shutil  # noqa: F401
    import socket  # noqa: F401  (sethostname; the worker cannot create sockets anyway)
    import tempfile
    import threading  # noqa: F401

    tempfile.tempdir = None
    mod_name, _, fn_name = handler.partition(":")
    mod = importlib.import_module(mod_name)
    fn = getattr(mod, fn_name)
    if not callable(fn):
        raise TypeError(f"{handler} is not callable")
    warm_up = getattr(mod, "warm_up", None)  # the handler's module may pay its first-call costs here, once
    if callable(warm_up):
        warm_up()
    prepare = getattr(mod, "prepare", None)
    return Handler(fn, prepare if callable(prepare) else None)


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


@functools.cache
def needed_paths() -> tuple[str, ...]:
    """:func:`_needed_paths` of the installed package, computed once per process (the zygote computes it after its
    isolation and before it forks, so every supervisor and worker reads it from memory)."""
    return tuple(_needed_paths(""))


def _needed_paths(handler: str) -> list[str]:
    """Directories the interpreter may read from after isolation (lazy imports)."""
    import nkieval

    cands = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.dirname(os.path.abspath(nkieval.__file__)))}
    cands.update(p for p in sys.path if p)
    mod = sys.modules.get(handler.partition(":")[0])
    if mod is not None and getattr(mod, "__file__", None):
        cands.add(os.path.dirname(os.path.abspath(mod.__file__)))  # type: ignore[arg-type,type-var]
    out = {os.path.realpath(p) for p in cands if os.path.isdir(p)}
    return sorted(p for p in out if p != "/")


def _plan_exposure(needed: list[str], hide: list[str]) -> tuple[list[str], list[str]]:
    """(tops, expose): directories to cover with an empty read-only tmpfs (``hide``, plus any
    ancestor of a needed path that "other" cannot traverse) and the needed paths inside them,
    bound back in."""
    tops: set[str] = set()
    for p in needed:
        parts = p.split("/")
        for i in range(2, len(parts)):
            anc = "/".join(parts[:i])
            if not os.stat(anc).st_mode & stat.S_IXOTH:
                tops.add(anc)
                break
    for h in hide:
        if h and os.path.isdir(h) and os.path.realpath(h) != "/":
            tops.add(os.path.realpath(h))
    tops = {t for t in tops if not any(t != o and _under(t, o) for o in tops)}
    expose = [p for p in needed if any(_under(p, t) for t in tops)]
    expose = [p for p in expose if not any(p != q and _under(p, q) for q in expose)]
    return sorted(tops), sorted(expose)


def _write_file(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _user_ns() -> None:
    uid, gid = os.getuid(), os.getgid()
    if uid == 0:  # never keep real root: the namespace's root is "nobody" outside
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
        uid = gid = NOBODY
    _linux.prctl(_linux.PR_SET_DUMPABLE, 1)  # so this process may write its own id maps
    _linux.unshare(_linux.CLONE_NEWUSER)
    _write_file("/proc/self/setgroups", "deny")
    _write_file("/proc/self/uid_map", f"0 {uid} 1")
    _write_file("/proc/self/gid_map", f"0 {gid} 1")


def _mount_ns() -> None:
    _linux.unshare(_linux.CLONE_NEWNS)
    _linux.mount(None, "/", None, _linux.MS_REC | _linux.MS_PRIVATE)


def _uts_ns() -> None:
    import socket

    _linux.unshare(_linux.CLONE_NEWUTS)
    socket.sethostname("nkieval-sandbox")


def _hide_and_expose(tops: list[str], expose: dict[str, int]) -> None:
    for t in tops:
        _linux.mount("tmpfs", t, "tmpfs", _linux.MS_NOSUID | _linux.MS_NODEV, "size=64k,mode=755")
    for p, fd in expose.items():
        os.makedirs(p, exist_ok=True)
        _linux.attach_tree(fd, p)
        os.close(fd)


def _check_readable(needed: list[str]) -> None:
    bad = []
    for p in needed:
        try:
            os.listdir(p)
        except OSError as e:
            bad.append(f"{p} ({e.strerror})")
    if bad:
        raise PermissionError("not readable by the sandbox user: " + ", ".join(bad))


def enter_sandbox(handler: str, hide: list[str], steps: Steps) -> dict[str, Any]:
    """Isolate the calling (single-threaded) process. Returns what is in force."""
    nthreads = len(os.listdir("/proc/self/task"))
    if nthreads != 1:
        raise SetupError("user_ns", f"the zygote has {nthreads} threads; unshare(CLONE_NEWUSER) needs one")
    needed = _needed_paths(handler)
    tops, expose = _plan_exposure(needed, hide)
    fds: dict[str, int] = {}
    steps.run("hidden_paths_prepare", lambda: fds.update({p: _linux.clone_tree(p) for p in expose}))
    outside_uid = NOBODY if os.getuid() == 0 else os.getuid()
    ok_user = steps.run("user_ns", _user_ns)
    steps.run("net_ns", _linux.unshare, _linux.CLONE_NEWNET)
    ok_mnt = steps.run("mount_ns", _mount_ns)
    steps.run("ipc_ns", _linux.unshare, _linux.CLONE_NEWIPC)
    steps.run("uts_ns", _uts_ns)
    if ok_user and ok_mnt:
        steps.run("hidden_paths", _hide_and_expose, tops, fds)
        steps.run("readonly_root", _linux.readonly_tree, "/")
    else:
        steps.results["hidden_paths"] = [False, "requires user_ns and mount_ns"]
        steps.results["readonly_root"] = [False, "requires user_ns and mount_ns"]
    steps.run("readable_install", _check_readable, needed)
    steps.run("non_dumpable", _linux.prctl, _linux.PR_SET_DUMPABLE, 0)
    os.chdir("/")
    return {"outside_uid": outside_uid, "hidden": tops, "exposed_read_only": sorted(expose)}

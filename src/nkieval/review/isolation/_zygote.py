"""The sandbox's zygote, supervisor and worker (run as ``python -I -m nkieval.review.isolation._zygote``).

Process tree, one request at a time::

    judge ──pipes── zygote Z            user+net+mount+ipc+uts namespaces, read-only /, non-dumpable
                      └─ supervisor M   one per request: new pid + mount namespace, deadline, caps
                           └─ worker W  pid 1 of its own pid namespace, fresh /proc /tmp /dev/shm,
                                        rlimits, no capabilities, no_new_privs, seccomp; runs handler

Z is started by the judge as a fresh interpreter (nothing of the judge's heap is inherited), with a
clean environment; it imports NumPy, nkieval and the handler's module once, then isolates itself and
forks M for every request. M and Z run only this file's code; W runs the handler (hostile code).
"""

from __future__ import annotations

import errno
import gc
import importlib
import json
import os
import resource
import signal
import stat
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from nkieval.review.isolation import _linux
from nkieval.review.isolation._frames import FrameError, read_frame, write_frame

NOBODY = 65534
OUTPUT_FILE = ".nkieval-output"  # the worker's stdout+stderr, in its private /tmp
_META_CAP = 1 << 20

# Worker -> supervisor record kinds (first byte of the response pipe)
_OK, _ERROR, _MEMORY = b"R", b"E", b"M"

#: Python operations that end in a blocked system call; the worker logs the last one it saw to
#: its stderr (an audit hook), so a seccomp kill can say what was attempted. Best effort only.
_AUDITED = ("os.system", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn",
            "subprocess.Popen", "socket.__new__", "socket.connect", "socket.bind", "ctypes.dlsym",
            "os.kill", "os.killpg", "pty.spawn")


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

def _preload(handler: str) -> Callable[[bytes], bytes]:
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
    fn = getattr(importlib.import_module(mod_name), fn_name)
    if not callable(fn):
        raise TypeError(f"{handler} is not callable")
    return fn  # type: ignore[no-any-return]


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


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


# ---------------------------------------------------------------- worker

_FILTER: bytes | None = None  # the seccomp BPF program, compiled once by the zygote, loaded by each worker


def _private_tmp(tmp_mb: int) -> None:
    opts = f"size={tmp_mb}m,mode=1777"
    _linux.mount("tmpfs", "/tmp", "tmpfs", _linux.MS_NOSUID | _linux.MS_NODEV, opts)
    if os.path.isdir("/dev/shm"):
        _linux.mount("tmpfs", "/dev/shm", "tmpfs", _linux.MS_NOSUID | _linux.MS_NODEV, opts)


def _fresh_proc() -> None:
    """Mount a /proc of the caller's pid namespace (the caller must be in it: the worker)."""
    _linux.mount("proc", "/proc", "proc",
                 _linux.MS_NOSUID | _linux.MS_NODEV | _linux.MS_NOEXEC | _linux.MS_RDONLY)


def _worker_mounts(tmp_mb: int) -> None:
    _private_tmp(tmp_mb)
    _fresh_proc()


def _set_rlimits(policy: dict[str, Any], timeout_s: float, sandbox: bool = True) -> None:
    cpu = policy.get("cpu_s") or int(timeout_s) + 2
    mb = 1 << 20
    limits = {
        resource.RLIMIT_AS: policy["memory_mb"] * mb,
        resource.RLIMIT_CPU: cpu,
        resource.RLIMIT_FSIZE: policy["max_file_bytes"],
        resource.RLIMIT_NOFILE: policy["max_open_files"],
        resource.RLIMIT_CORE: 0,
    }
    if sandbox:  # counted per user namespace there; outside, it would count all of the user's processes
        limits[resource.RLIMIT_NPROC] = policy["max_threads"]
    for res, soft in limits.items():
        hard = soft + 1 if res == resource.RLIMIT_CPU else soft
        resource.setrlimit(res, (soft, hard))


def _record(fd: int, kind: bytes, body: bytes) -> None:
    try:
        write_frame(fd, kind + body)
    except OSError:
        pass


def _audit_hook(event: str, args: tuple[Any, ...]) -> None:
    if event.startswith(_AUDITED):
        try:
            os.write(2, f"\n[nkieval-sandbox] attempted: {event}{str(args)[:120]}\n".encode())
        except OSError:
            pass


def _worker(fn: Callable[[bytes], bytes], req_fd: int, resp_fd: int, setup_fd: int, out_fd: int,
            cfg: dict[str, Any], workdir: str) -> None:
    """Never returns. Forked ahead of its request (a standby): does the request-independent
    set-up, then blocks on ``req_fd``. A set-up failure is reported on ``setup_fd``, which is
    closed before the handler runs, so handler (candidate) code cannot claim a harness failure."""
    sandbox = cfg["mode"] != "none"
    policy = cfg["policy"]
    try:
        _linux.prctl(_linux.PR_SET_PDEATHSIG, signal.SIGKILL)
        if sandbox:
            _fresh_proc()
        os.environ["HOME"] = os.environ["TMPDIR"] = workdir
        import tempfile

        tempfile.tempdir = workdir
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        keep = sorted({0, 1, 2, req_fd, resp_fd, setup_fd})
        for lo, hi in zip(keep, [*keep[1:], 2**31 - 1]):
            os.closerange(lo + 1, hi)
        os.chdir(workdir)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over-long output: EFBIG, not a kill
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        meta = json.loads(read_frame(req_fd, _META_CAP))
        request = read_frame(req_fd, policy["max_request_bytes"])
        os.close(req_fd)
        _set_rlimits(policy, float(meta["timeout_s"]), sandbox)
        if sandbox:
            _linux.drop_all_capabilities()
        _linux.prctl(_linux.PR_SET_NO_NEW_PRIVS, 1)
        if sandbox and policy.get("seccomp", True):
            from nkieval.review.isolation import _seccomp

            if _FILTER is None:
                raise RuntimeError("no seccomp filter was built")
            _seccomp.load(_FILTER)
        sys.addaudithook(_audit_hook)
        os.close(setup_fd)
    except BaseException:
        try:
            os.write(setup_fd, traceback.format_exc()[-4000:].encode())
        except BaseException:
            pass
        os._exit(70)
    try:
        result = fn(request)
        if not isinstance(result, bytes | bytearray | memoryview):
            raise TypeError(f"the handler returned {type(result).__name__}, not bytes")
        _flush()
        write_frame(resp_fd, _OK + bytes(result))
        os._exit(0)
    except MemoryError:
        _flush()
        _record(resp_fd, _MEMORY, b"MemoryError")
        os._exit(3)
    except BaseException:
        try:
            text = traceback.format_exc()[-4000:]
        except BaseException:
            text = "exception (traceback unavailable)"
        _flush()
        _record(resp_fd, _ERROR, text.encode(errors="replace"))
        os._exit(1)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


# ---------------------------------------------------------------- supervisor

def _tail(fd: int, n: int) -> str:
    """The last ``n`` bytes of the worker's output, through the supervisor's own fd (the path may
    have been replaced by the worker)."""
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, n, max(0, size - n)).decode(errors="replace")
    except OSError:
        return ""


def _wait(pid: int, deadline: float) -> tuple[int | None, bool]:
    """(wait status, timed out): waits for ``pid`` until ``deadline``."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = -1
    import select

    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status, False
            wait = deadline - time.monotonic()
            if wait <= 0:
                return None, True
            if pidfd >= 0:
                select.select([pidfd], [], [], wait)
            else:
                time.sleep(min(wait, 0.005))
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def _supervise(fn: Callable[[bytes], bytes], cfg: dict[str, Any], in_fd: int, out_fd: int) -> None:
    """Prepare a fresh worker, wait for one request on ``in_fd``, run it, and write the (meta,
    payload) frames to ``out_fd``."""
    import select

    sandbox = cfg["mode"] != "none"
    policy = cfg["policy"]
    if sandbox:
        _linux.unshare(_linux.CLONE_NEWPID | _linux.CLONE_NEWNS)
        _private_tmp(policy["tmp_mb"])
        workdir = "/tmp"
    else:
        import tempfile

        workdir = tempfile.mkdtemp(prefix="nkieval-worker-")
    output = os.open(os.path.join(workdir, OUTPUT_FILE), os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    r, w = os.pipe()
    sr, sw = os.pipe()
    qr, qw = os.pipe()
    pid = os.fork()
    if pid == 0:
        for fd in (r, sr, qw, in_fd, out_fd):
            os.close(fd)
        _worker(fn, qr, w, sw, output, cfg, workdir)
    for fd in (w, sw, qr):
        os.close(fd)
    try:
        meta_bytes = read_frame(in_fd, _META_CAP)
        request = read_frame(in_fd, policy["max_request_bytes"])
    except FrameError:  # the zygote is shutting down
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return
    t0 = time.monotonic()
    timeout_s = float(json.loads(meta_bytes)["timeout_s"])
    try:
        write_frame(qw, meta_bytes)
        write_frame(qw, request)
    except OSError:
        pass  # the worker died in its set-up: reported on its set-up pipe
    os.close(qw)
    cap = policy["max_response_bytes"] + 1 + 8
    buf = bytearray()
    status = ""
    deadline = t0 + timeout_s
    while True:
        wait = deadline - time.monotonic()
        if wait <= 0:
            status = "timeout"
            break
        if not select.select([r], [], [], wait)[0]:
            continue
        chunk = os.read(r, 1 << 20)
        if not chunk:
            break
        buf += chunk
        if len(buf) > cap:
            status = "output-limit"
            break
    wstatus: int | None = None
    if not status:  # the worker closed its pipe: it still has to exit before the deadline
        wstatus, timed_out = _wait(pid, deadline)
        if timed_out:
            status = "timeout"
    if status:
        os.kill(pid, signal.SIGKILL)  # pid 1 of its namespace: everything in it goes too
        _, wstatus = os.waitpid(pid, 0)
    assert wstatus is not None
    wall = time.monotonic() - t0
    os.close(r)
    os.set_blocking(sr, False)
    try:
        setup_error = os.read(sr, 8000)
    except OSError:
        setup_error = b""
    os.close(sr)
    exit_code = os.WEXITSTATUS(wstatus) if os.WIFEXITED(wstatus) else None
    sig = os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) else None
    tail_n = policy["stderr_tail_bytes"]
    tail = _tail(output, tail_n)
    os.close(output)
    kind, body = b"", b""
    if len(buf) >= 8:
        size = int.from_bytes(buf[:8], "big")
        if len(buf) == 8 + size and size >= 1:
            kind, body = bytes(buf[8:9]), bytes(buf[9:])
    payload: bytes | None = None
    detail = ""
    if setup_error:
        status = "harness-error"
        detail = "worker set-up failed: " + setup_error.decode(errors="replace")
    elif status == "timeout":
        detail = f"wall-clock limit of {timeout_s:g} s"
    elif status == "output-limit":
        detail = f"response larger than {policy['max_response_bytes']} bytes"
    elif sig == signal.SIGSYS:
        status = "violation"
        attempted = [ln for ln in tail.splitlines() if ln.startswith("[nkieval-sandbox] attempted: ")]
        detail = "blocked system call (seccomp)"
        if attempted:
            detail += "; last audited operation: " + attempted[-1].split(": ", 1)[1]
    elif sig in (signal.SIGXCPU, signal.SIGKILL) and kind == b"":
        status = "timeout"
        detail = "CPU-time limit"
    elif kind == _MEMORY:
        status = "memory-limit"
        detail = f"address-space limit of {policy['memory_mb']} MiB"
    elif kind == _OK and exit_code == 0:
        status, payload = "ok", body
    elif kind == _ERROR:
        status = "crash"
        detail = body.decode(errors="replace")
        if "MemoryError" in detail:
            status = "memory-limit"
    else:
        status = "crash"
        detail = f"worker ended (exit code {exit_code}, signal {sig}) without a response"
    meta = {"status": status, "exit_code": exit_code, "signal": sig, "detail": detail[-4000:],
            "stderr_tail": tail[-tail_n:], "wall_s": wall}
    write_frame(out_fd, json.dumps(meta).encode())
    write_frame(out_fd, payload or b"")
    if not sandbox:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)


# ---------------------------------------------------------------- main loops

def _standby(fn: Callable[[bytes], bytes], cfg: dict[str, Any], in_fd: int,
             out_fd: int) -> tuple[int, int, int]:
    """Fork the supervisor (and, through it, the worker) for the next request ahead of time:
    (pid, request write fd, result read fd)."""
    qr, qw = os.pipe()
    rr, rw = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(qw)
            os.close(rr)
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, in_fd)  # keep 0-2 taken, so the worker's fds never land there
            os.close(null)
            os.close(out_fd)
            _linux.prctl(_linux.PR_SET_PDEATHSIG, signal.SIGKILL)
            _supervise(fn, cfg, qr, rw)
        except BaseException:
            traceback.print_exc()
            code = 70
        os._exit(code)
    os.close(qr)
    os.close(rw)
    return pid, qw, rr


def _serve(fn: Callable[[bytes], bytes], cfg: dict[str, Any], in_fd: int, out_fd: int) -> None:
    policy = cfg["policy"]
    standby = _standby(fn, cfg, in_fd, out_fd)
    while True:
        pid, qw, rr = standby
        try:
            meta = read_frame(in_fd, _META_CAP)
            request = read_frame(in_fd, policy["max_request_bytes"])
            float(json.loads(meta)["timeout_s"])
        except (FrameError, ValueError, KeyError, TypeError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return
        try:
            write_frame(qw, meta)
            write_frame(qw, request)
            res_meta = read_frame(rr, _META_CAP)
            res_payload = read_frame(rr, policy["max_response_bytes"])
        except (FrameError, OSError) as e:
            res_meta = json.dumps({"status": "harness-error", "detail": f"supervisor failed: {e}",
                                   "exit_code": None, "signal": None, "stderr_tail": "", "wall_s": 0.0}).encode()
            res_payload = b""
            os.kill(pid, signal.SIGKILL)
        os.close(qw)
        os.close(rr)
        write_frame(out_fd, res_meta)  # answer first: the supervisor's namespaces tear down meanwhile
        write_frame(out_fd, res_payload)
        os.waitpid(pid, 0)
        standby = _standby(fn, cfg, in_fd, out_fd)


def _probe(cfg: dict[str, Any], out_fd: int) -> None:
    """Try every isolation step, recording what fails and why (``nkieval doctor``)."""
    steps = Steps(strict=False)
    info: dict[str, Any] = {}
    if not steps.run("preload", lambda: info.update(fn=_preload(cfg["handler"]))):
        write_frame(out_fd, json.dumps({"steps": steps.results}).encode())
        return
    try:
        extra = enter_sandbox(cfg["handler"], cfg["hide"], steps)
    except SetupError as e:
        steps.results[e.step] = [False, e.reason]
        extra = {}
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        wsteps = Steps(strict=False)
        ok_pid = wsteps.run("pid_ns", _linux.unshare, _linux.CLONE_NEWPID | _linux.CLONE_NEWNS)
        if ok_pid:
            child = os.fork()
            if child:
                _, st = os.waitpid(child, 0)
                os._exit(os.WEXITSTATUS(st) if os.WIFEXITED(st) else 1)
        if ok_pid:  # never mount outside a namespace of our own
            wsteps.run("private_tmp_and_proc", _worker_mounts, cfg["policy"]["tmp_mb"])
        else:
            wsteps.results["private_tmp_and_proc"] = [False, "requires pid_ns"]
        wsteps.run("rlimits", _set_rlimits, cfg["policy"], 10.0)
        wsteps.run("capabilities_dropped", _linux.drop_all_capabilities)
        wsteps.run("no_new_privs", _linux.prctl, _linux.PR_SET_NO_NEW_PRIVS, 1)

        def _seccomp() -> None:
            from nkieval.review.isolation import _seccomp as sc

            sc.build_and_load()

        wsteps.run("seccomp", _seccomp)
        write_frame(w, json.dumps(wsteps.results).encode())
        os._exit(0)
    os.close(w)
    try:
        steps.results.update(json.loads(read_frame(r, _META_CAP, time.monotonic() + 60)))
    except (FrameError, ValueError) as e:
        steps.results["worker"] = [False, f"probe worker failed: {e}"]
    os.waitpid(pid, 0)
    write_frame(out_fd, json.dumps({"steps": steps.results, "extra": extra}).encode())


def main() -> int:
    cfg = json.loads(sys.argv[1])
    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints from imports must not corrupt the frames
    in_fd = 0
    if cfg["mode"] == "probe":
        _probe(cfg, out_fd)
        return 0
    try:
        fn = _preload(cfg["handler"])
        if cfg["mode"] == "sandbox":
            steps = Steps(strict=True)
            extra = enter_sandbox(cfg["handler"], cfg["hide"], steps)
            isolation = {"level": "full", "zygote": steps.results, **extra}
            if cfg["policy"].get("seccomp", True):
                from nkieval.review.isolation import _seccomp

                global _FILTER
                flt, isolation["seccomp_filter"] = _seccomp.build()
                _FILTER = _seccomp.compile_bpf(flt)
        else:
            isolation = {"level": "none"}
        gc.freeze()
    except SetupError as e:
        write_frame(out_fd, json.dumps({"ready": False, "step": e.step, "error": e.reason}).encode())
        return 1
    except Exception as e:
        write_frame(out_fd, json.dumps({"ready": False, "step": "preload",
                                        "error": f"{type(e).__name__}: {e}"}).encode())
        return 1
    write_frame(out_fd, json.dumps({"ready": True, "isolation": isolation, "pid": os.getpid()}).encode())
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a dead standby is an EPIPE to handle, not a kill
    try:
        _serve(fn, cfg, in_fd, out_fd)
    except OSError as e:
        if e.errno != errno.EPIPE:  # EPIPE: the judge went away
            raise
    return 0


if __name__ == "__main__":
    sys.exit(main())

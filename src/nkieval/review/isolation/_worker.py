"""Per request: the supervisor (own pid + mount namespace, deadline, verdict) and the worker (pid 1
of that namespace; fresh /proc, rlimits, no capabilities, seccomp; runs the handler)."""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
import traceback
from typing import Any

from nkieval.review.isolation import _linux
from nkieval.review.isolation._frames import FrameError, read_frame, write_frame
from nkieval.review.isolation._setup import Handler
from nkieval.review.isolation.starvation import longest_wait, starved

OUTPUT_FILE = ".nkieval-output"  # the worker's stdout+stderr, in its private /tmp
_META_CAP = 1 << 20

# Worker -> supervisor record kinds (first byte of a frame on the response pipe): any number of parts, then one
# final record
_OK, _ERROR, _MEMORY, _PART = b"R", b"E", b"M", b"P"
#: most parts one request may stream (each is forwarded to the judge as it arrives)
MAX_PARTS = 4096

#: the response pipe while the handler runs (None before): :func:`send_part` writes to it
_PART_FD: list[int | None] = [None]

#: Python operations that end in a blocked system call; the worker logs the last one it saw to
#: its stderr (an audit hook), so a seccomp kill can say what was attempted. Best effort only.
_AUDITED = ("os.system", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn",
            "subprocess.Popen", "socket.__new__", "socket.connect", "socket.bind", "ctypes.dlsym",
            "os.kill", "os.killpg", "pty.spawn")


FILTER: bytes | None = None  # the seccomp BPF program, compiled once by the zygote, loaded by each worker


def _private_tmp(tmp_mb: int) -> None:
    """Fresh tmpfs over /tmp and /dev/shm. What the interpreter still needs from there (the package of an
    install made in a temporary checkout, say) is cloned first and put back, read-only as it was."""
    from nkieval.review.isolation._setup import _under, needed_paths

    opts = f"size={tmp_mb}m,mode=1777"
    tops = ["/tmp"] + (["/dev/shm"] if os.path.isdir("/dev/shm") else [])
    keep = [p for p in needed_paths() if any(_under(p, t) and p != t for t in tops)]
    keep = [p for p in keep if not any(p != q and _under(p, q) for q in keep)]
    fds = {p: _linux.clone_tree(p) for p in keep}
    for t in tops:
        _linux.mount("tmpfs", t, "tmpfs", _linux.MS_NOSUID | _linux.MS_NODEV, opts)
    for p, fd in fds.items():
        os.makedirs(p, exist_ok=True)
        _linux.attach_tree(fd, p)
        os.close(fd)


def _fresh_proc() -> None:
    """Mount a /proc of the caller's pid namespace (the caller must be in it: the worker)."""
    _linux.mount("proc", "/proc", "proc",
                 _linux.MS_NOSUID | _linux.MS_NODEV | _linux.MS_NOEXEC | _linux.MS_RDONLY)


def _hide(paths: list[str] | tuple[str, ...]) -> None:
    """Cover ``paths`` with an empty read-only tmpfs: after /tmp is set up, so nothing re-exposed there (a
    checkout under /tmp) shows them again."""
    for h in paths:
        if os.path.isdir(h):
            _linux.mount("tmpfs", h, "tmpfs", _linux.MS_NOSUID | _linux.MS_NODEV | _linux.MS_RDONLY,
                         "size=4k,mode=555")


#: paths one request may ask to hide (a review hides its task's directory)
MAX_REQUEST_HIDES = 16


def _request_hides(paths: Any) -> list[str]:
    """The directories a request asks its worker to cover (the task under review: its reference and expert
    solution), minus any the interpreter needs (a directory holding the installed package cannot be covered
    without breaking the worker's imports)."""
    from nkieval.review.isolation._setup import _under, needed_paths

    if not isinstance(paths, list) or len(paths) > MAX_REQUEST_HIDES or not all(isinstance(p, str) for p in paths):
        raise ValueError("the request's hide list is not a short list of paths")
    needed = needed_paths()
    out = []
    for p in paths:
        real = os.path.realpath(p)
        if os.path.isabs(p) and real != "/" and not any(_under(n, real) for n in needed):
            out.append(real)
    return out


def _worker_mounts(tmp_mb: int, hide: list[str] | tuple[str, ...] = ()) -> None:
    _private_tmp(tmp_mb)
    _hide(hide)
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


def send_part(data: bytes) -> bool:
    """Send ``data`` to the judge now, ahead of the handler's response: a streamed part the judge may act on
    while the handler goes on (the tracer sends each shape's program as soon as it is recorded). False when
    not called in a sandbox worker's handler. A part is as untrusted as the response: the hostile code in
    the worker can send parts too, and the judge treats them so."""
    fd = _PART_FD[0]
    if fd is None:
        return False
    write_frame(fd, _PART + bytes(data))
    return True


#: event name -> whether it is escape-shaped (the hook runs on every audited event: the simulator raises two per
#: recorded instruction, and a lookup is cheaper than matching the prefixes each time)
_AUDITED_SEEN: dict[str, bool] = {}


def _audit_hook(event: str, args: tuple[Any, ...]) -> None:
    audited = _AUDITED_SEEN.get(event)
    if audited is None:
        audited = event.startswith(_AUDITED)
        if len(_AUDITED_SEEN) < 4096:  # (code can raise events of any name with ``sys.audit``)
            _AUDITED_SEEN[event] = audited
    if audited:
        try:
            os.write(2, f"\n[nkieval-sandbox] attempted: {event}{str(args)[:120]}\n".encode())
        except OSError:
            pass


def _run_worker(handler: Handler, req_fd: int, resp_fd: int, setup_fd: int, out_fd: int,
                cfg: dict[str, Any], workdir: str) -> None:
    """Never returns. Forked ahead of its request (a standby): does every request-independent step of its
    set-up (fresh /proc, descriptors, capabilities dropped, no_new_privs, seccomp, the handler's ``prepare``),
    then blocks on ``req_fd``; the request's own steps (its rlimits; its hidden paths, mounted by the
    supervisor) are all that is left once it arrives. A set-up failure is reported on ``setup_fd``, which is
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
        if sandbox:
            _linux.drop_all_capabilities()
        _linux.prctl(_linux.PR_SET_NO_NEW_PRIVS, 1)
        if sandbox and policy.get("seccomp", True):
            from nkieval.review.isolation import _seccomp

            if FILTER is None:
                raise RuntimeError("no seccomp filter was built")
            _seccomp.load(FILTER)
        sys.addaudithook(_audit_hook)
        if handler.prepare is not None:
            handler.prepare()
        meta = json.loads(read_frame(req_fd, _META_CAP))
        request = read_frame(req_fd, policy["max_request_bytes"])
        os.close(req_fd)
        _set_rlimits(policy, float(meta["timeout_s"]), sandbox)
        os.close(setup_fd)
    except BaseException:
        try:
            os.write(setup_fd, traceback.format_exc()[-4000:].encode())
        except BaseException:
            pass
        os._exit(70)
    try:
        _PART_FD[0] = resp_fd
        result = handler.run(request)
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


def _proc_device() -> int | None:
    try:
        return os.stat("/proc").st_dev
    except OSError:
        return None


def _worker_proc_entry(proc_dev: int | None) -> int | None:
    """The supervisor's only child, the worker, as the /proc mounted now numbers it. A sandboxed worker is pid 1
    of its own pid namespace and mounts that namespace's /proc in the mount namespace it shares with this
    supervisor: once it has (/proc is another file system than before the fork), it is /proc/1 there. Until then
    (a worker starved before its set-up got that far), and unsandboxed, /proc is the one this supervisor had,
    where ``/proc/self`` is this process and its thread's ``children`` file names the worker. None where neither
    can be read."""
    if proc_dev is not None and _proc_device() not in (None, proc_dev):
        return 1
    try:
        me = os.readlink("/proc/self")
        with open(f"/proc/{me}/task/{me}/children") as f:
            kids = f.read().split()
        return int(kids[0]) if len(kids) == 1 else None
    except (OSError, ValueError):
        return None


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


class _PartRelay:
    """The supervisor's side of streamed parts: each complete part frame at the head of the worker's response is
    forwarded to the zygote at once, as a (``{"part": n}``, bytes) pair of frames; the final record stays in the
    buffer. Bounds the parts' count and, with the final record, their bytes."""

    def __init__(self, out_fd: int, cap: int) -> None:
        self.out_fd, self.cap = out_fd, cap
        self.parts = 0
        self.forwarded = 0  # bytes

    def forward(self, buf: bytearray) -> str:
        """Forward what is complete; "" or the status that ends the request ("output-limit")."""
        while len(buf) >= 9 and buf[8:9] == _PART:
            size = int.from_bytes(buf[:8], "big")
            if self.forwarded + 8 + size > self.cap or self.parts >= MAX_PARTS:
                return "output-limit"
            if len(buf) < 8 + size:
                break
            write_frame(self.out_fd, json.dumps({"part": self.parts}).encode())
            write_frame(self.out_fd, bytes(buf[9:8 + size]))
            del buf[:8 + size]
            self.parts += 1
            self.forwarded += 8 + size
        return "output-limit" if self.forwarded + len(buf) > self.cap else ""


def _final_record(buf: bytearray) -> bool:
    """Whether ``buf`` (the worker's response after its forwarded parts) holds the whole final record: the
    request is answered; what the worker does after it (its exit) changes nothing."""
    return len(buf) >= 9 and buf[8:9] != _PART and len(buf) >= 8 + int.from_bytes(buf[:8], "big")


def _hide_requested(meta: dict[str, Any]) -> str:
    """Cover the directories the request hides ("" or what failed). The supervisor mounts them, in the mount
    namespace its worker shares, so that the worker has dropped its capabilities before the request arrives."""
    try:
        _hide(_request_hides(meta.get("hide", [])))
    except Exception as e:
        return f"hiding the request's paths failed: {type(e).__name__}: {e}"
    return ""


def _supervise(handler: Handler, cfg: dict[str, Any], in_fd: int, out_fd: int) -> None:
    """Prepare a fresh worker, wait for one request on ``in_fd``, run it, and write the (meta,
    payload) frames to ``out_fd``."""
    sandbox = cfg["mode"] != "none"
    policy = cfg["policy"]
    if sandbox:
        _linux.unshare(_linux.CLONE_NEWPID | _linux.CLONE_NEWNS)
        _private_tmp(policy["tmp_mb"])
        _hide(policy.get("hide_in_worker", ()))
        workdir = "/tmp"
    else:
        import tempfile

        workdir = tempfile.mkdtemp(prefix="nkieval-worker-")
    output = os.open(os.path.join(workdir, OUTPUT_FILE), os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    r, w = os.pipe()
    sr, sw = os.pipe()
    qr, qw = os.pipe()
    proc_dev = _proc_device()  # (/proc before the worker mounts its own: see _worker_proc_entry)
    pid = os.fork()
    if pid == 0:
        for fd in (r, sr, qw, in_fd, out_fd):
            os.close(fd)
        _run_worker(handler, qr, w, sw, output, cfg, workdir)
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
    meta_req = json.loads(meta_bytes)
    timeout_s = float(meta_req["timeout_s"])
    # (optional) how long the worker may go without a part: [before the first, between two]; the last
    # stretch ends with the final record
    part_timeouts = meta_req.get("part_timeout_s")
    hide_error = _hide_requested(meta_req) if sandbox else ""
    _pass_request(qw, meta_bytes, request, hide_error)
    relayed = _relay(r, out_fd, policy["max_response_bytes"] + 1 + 8, t0, timeout_s, part_timeouts)
    status, wstatus, delay = _stop_worker(pid, relayed, t0 + timeout_s, proc_dev)
    wall = time.monotonic() - t0
    os.close(r)
    setup_failed = _setup_error(sr)
    failed = hide_error or setup_failed  # (the request's own failure first)
    ended = _Ended(status, wstatus, delay, wall, "worker set-up failed: " + failed if failed else "",
                   _tail(output, policy["stderr_tail_bytes"]))
    os.close(output)
    status, detail, payload = _outcome(ended, relayed, timeout_s, part_timeouts, policy)
    meta = {"status": status, "exit_code": ended.exit_code, "signal": ended.signal, "detail": detail[-4000:],
            "stderr_tail": ended.tail[-policy["stderr_tail_bytes"]:], "wall_s": wall}
    write_frame(out_fd, json.dumps(meta).encode())
    write_frame(out_fd, payload or b"")
    if relayed.answered:
        os.waitpid(pid, 0)
    if not sandbox:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)


def _pass_request(qw: int, meta_bytes: bytes, request: bytes, hide_error: str) -> None:
    """Hand the request to the standby worker, which blocks on ``qw``'s other end, and close it. With
    ``hide_error`` the worker is given nothing: it reads no request and ends, and the request fails on that."""
    try:
        if not hide_error:
            write_frame(qw, meta_bytes)
            write_frame(qw, request)
    except OSError:
        pass  # the worker died in its set-up: reported on its set-up pipe
    os.close(qw)


class _Relayed:
    """What the worker's response pipe gave: its bytes after the parts already forwarded (``buf``), the status
    that ended the wait early ("" when it did not: "timeout", "output-limit"), how many parts went out, whether
    the deadline that passed was a part's (not the request's own), and whether the final record is whole
    (``answered``: the request's result is in, whatever the worker does next)."""

    __slots__ = ("answered", "buf", "part_deadline", "parts", "status")

    def __init__(self, buf: bytearray, status: str, parts: int, part_deadline: bool) -> None:
        self.buf, self.status, self.parts, self.part_deadline = buf, status, parts, part_deadline
        self.answered = not status and _final_record(buf)


def _relay(r: int, out_fd: int, cap: int, t0: float, timeout_s: float, part_timeouts: Any) -> _Relayed:
    """Read the worker's response until its final record is whole, the pipe closes, or a deadline passes
    (the request's, or with ``part_timeouts`` the next part's), forwarding each complete part to ``out_fd`` as
    it arrives; at most ``cap`` bytes in all."""
    import select

    buf = bytearray()
    status = ""
    deadline = end = t0 + timeout_s
    relay = _PartRelay(out_fd, cap)
    if part_timeouts:
        deadline = min(end, t0 + float(part_timeouts[0]))
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
        n_parts = relay.parts
        status = relay.forward(buf)
        if status:
            break
        if part_timeouts and relay.parts > n_parts:
            deadline = min(end, time.monotonic() + float(part_timeouts[1]))
        if _final_record(buf):
            break
    return _Relayed(buf, status, relay.parts, deadline < end)


def _stop_worker(pid: int, relayed: _Relayed, end: float, proc_dev: int | None
                 ) -> tuple[str, int | None, float | None]:
    """(status, the worker's wait status, the longest it waited for a core when it timed out). Answered: the
    result goes out now, and the worker is stopped, not waited for (its exit tears its address space down,
    about 3 ms, before its pipe would read as closed); its wait status is then None (it is reaped after the
    answer went out). Otherwise the worker closed its pipe without a whole result, and still has to exit before
    the deadline ``end``."""
    status = relayed.status
    wstatus: int | None = None
    if relayed.answered:
        os.kill(pid, signal.SIGKILL)  # (nothing of the worker runs on while the judge goes on)
    elif not status:
        wstatus, timed_out = _wait(pid, end)
        if timed_out:
            status = "timeout"
    # (read before the kill: a worker stopped at the wall clock after waiting for a core most of that time was
    # starved, the machine's fault)
    entry = _worker_proc_entry(proc_dev) if status == "timeout" else None
    delay = longest_wait(entry) if entry is not None else None
    if status:
        os.kill(pid, signal.SIGKILL)  # pid 1 of its namespace: everything in it goes too
        _, wstatus = os.waitpid(pid, 0)
    assert wstatus is not None or relayed.answered
    return status, wstatus, delay


def _setup_error(sr: int) -> str:
    """What the worker reported on its set-up pipe ("" when its set-up went through), the pipe then closed."""
    os.set_blocking(sr, False)
    try:
        setup_error = os.read(sr, 8000)
    except OSError:
        setup_error = b""
    os.close(sr)
    return setup_error.decode(errors="replace")


class _Ended:
    """How the worker's request ended, as the supervisor saw it: the status so far, the wait status, the longest
    wait for a core (a timeout only), the wall time, the harness's set-up failure ("" when none) and the tail of
    the worker's output."""

    __slots__ = ("delay", "setup_error", "status", "tail", "wall", "wstatus")

    def __init__(self, status: str, wstatus: int | None, delay: float | None, wall: float, setup_error: str,
                 tail: str) -> None:
        self.status, self.wstatus, self.delay, self.wall = status, wstatus, delay, wall
        self.setup_error, self.tail = setup_error, tail

    @property
    def exit_code(self) -> int | None:
        w = self.wstatus
        return os.WEXITSTATUS(w) if w is not None and os.WIFEXITED(w) else None

    @property
    def signal(self) -> int | None:
        w = self.wstatus
        return os.WTERMSIG(w) if w is not None and os.WIFSIGNALED(w) else None


def _outcome(ended: _Ended, relayed: _Relayed, timeout_s: float, part_timeouts: Any, policy: dict[str, Any]
             ) -> tuple[str, str, bytes | None]:
    """(status, detail, payload) of the request: the harness's failures first, then the limits, then the worker's
    final record (the payload only with status "ok")."""
    buf, status, sig = relayed.buf, ended.status, ended.signal
    kind, body = b"", b""
    if len(buf) >= 8:
        size = int.from_bytes(buf[:8], "big")
        if len(buf) == 8 + size and size >= 1:
            kind, body = bytes(buf[8:9]), bytes(buf[9:])
    if ended.setup_error:
        return "harness-error", ended.setup_error, None
    if status == "timeout":
        return _timeout(ended, relayed, timeout_s, part_timeouts)
    if status == "output-limit":
        return status, f"response larger than {policy['max_response_bytes']} bytes", None
    if sig == signal.SIGSYS:
        attempted = [ln for ln in ended.tail.splitlines() if ln.startswith("[nkieval-sandbox] attempted: ")]
        detail = "blocked system call (seccomp)"
        if attempted:
            detail += "; last audited operation: " + attempted[-1].split(": ", 1)[1]
        return "violation", detail, None
    if sig in (signal.SIGXCPU, signal.SIGKILL) and kind == b"":
        return "timeout", "CPU-time limit", None
    if kind == _MEMORY:
        return "memory-limit", f"address-space limit of {policy['memory_mb']} MiB", None
    if kind == _OK and (relayed.answered or ended.exit_code == 0):
        return "ok", "", body
    if kind == _ERROR:
        detail = body.decode(errors="replace")
        return ("memory-limit" if "MemoryError" in detail else "crash"), detail, None
    return "crash", f"worker ended (exit code {ended.exit_code}, signal {sig}) without a response", None


def _timeout(ended: _Ended, relayed: _Relayed, timeout_s: float, part_timeouts: Any) -> tuple[str, str, None]:
    """A request stopped at a deadline: the candidate's ("timeout"), unless the machine kept the worker waiting
    for a core most of the time (a starved worker: "harness-error", retry)."""
    detail = f"wall-clock limit of {timeout_s:g} s"
    if part_timeouts and relayed.part_deadline:
        detail = (f"no part within {float(part_timeouts[0 if relayed.parts == 0 else 1]):g} s"
                  f" (after {relayed.parts} parts)")
    delay, wall = ended.delay, ended.wall
    if starved(delay, wall):
        return "harness-error", (f"stopped at its {detail}, but the machine kept the worker waiting for a core "
                                 f"{delay:.1f} s of its {wall:.1f} s (an overloaded machine, not the candidate: "
                                 "retry)"), None
    if delay is not None:
        detail += f" (of its {wall:.1f} s, {delay:.1f} s waiting for a core)"
    return "timeout", detail, None

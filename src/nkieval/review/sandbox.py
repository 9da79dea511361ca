"""Run an untrusted candidate kernel in a separate process, one case after another, safely.

Why a process and not a thread or ``exec``: a candidate can loop forever, allocate 50 GB,
call ``os._exit``, print garbage, or poke at the harness's objects. Here it runs in a child
process with an address-space limit (``RLIMIT_AS``), a CPU-time backstop (``RLIMIT_CPU``), a
wall-clock timeout per case enforced by the parent, its stdout/stderr sent to files, and a job
directory that holds only its own source and the inputs: reference outputs stay in the parent,
and nothing but files (JSON, inert ``.npz``) crosses back. When the child dies or is killed in
case k, case k gets a specific verdict and a fresh child continues with case k+1, so one bad
shape never hides the others and the next review starts from a clean process.

Isolation modes: ``"forkserver"`` (default) forks each child from a clean zygote process that
has nkieval preloaded (see :mod:`nkieval.review.zygote`; milliseconds per start, no harness
state inherited); ``"subprocess"``
starts ``python -I -m nkieval.review.child`` (a fresh interpreter each time, ~0.5 s).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from nkieval.review import malloc, npzio
from nkieval.review.executor import replay_as_traced, traced_failure
from nkieval.review.isolation.starvation import longest_wait, longest_wait_since, run_queue_delays, starved
from nkieval.review.runs import STATUSES, CaseJob, CaseRun, SandboxLimits, skipped
from nkieval.review.tracing import RETRACE_STATUSES, ProgramStream

__all__ = ["STATUSES", "CaseJob", "CaseRun", "SandboxLimits", "run_candidate", "shutdown"]

Isolation = Literal["forkserver", "subprocess"]
DEFAULT_LIMITS = SandboxLimits()



class SealedInput:
    """A case's input array-file bytes in a sealed memfd (Linux): written once, then sealed
    against writes, growth and shrinking, so no process (a hostile child included) can change
    them. One copy then serves every review of the case: the forked child maps it through
    ``/proc/<harness pid>/fd/<n>`` (:attr:`path`) instead of the harness writing the same input
    file into every job directory. ``data`` is a read-only view of the same pages (what a
    job writes as a file when sealed inputs cannot be used). The descriptor is closed when the
    object is collected; a job holds it while its child runs.

    Raises ``OSError`` (or ``AttributeError`` where ``os.memfd_create`` does not exist): callers
    use :func:`seal_input`, which returns None then."""

    def __init__(self, data: bytes) -> None:
        import fcntl
        import mmap
        import weakref

        fd = os.memfd_create("nkieval-input", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            view = memoryview(data)
            while view.nbytes:
                view = view[os.write(fd, view):]
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                        fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
            self.data: Any = mmap.mmap(fd, len(data), prot=mmap.PROT_READ) if len(data) else b""
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        with _SEALED_LOCK:
            _SEALED_OPEN[0] += 1
        weakref.finalize(self, _close_sealed, fd)

    @property
    def path(self) -> str:
        return f"/proc/{os.getpid()}/fd/{self.fd}"


#: at most this many sealed inputs open at once (each holds a file descriptor: a large case cache of
#: small cases must not use up the process's descriptors); beyond it inputs are written as files
MAX_SEALED_INPUTS = 256
_SEALED_OPEN = [0]
_SEALED_LOCK = threading.Lock()


def _close_sealed(fd: int) -> None:
    os.close(fd)
    with _SEALED_LOCK:
        _SEALED_OPEN[0] -= 1


def seal_input(data: bytes) -> SealedInput | None:
    """:class:`SealedInput` of ``data``, or None where memfds or seals are not available, or
    :data:`MAX_SEALED_INPUTS` are open already."""
    if _SEALED_OPEN[0] >= MAX_SEALED_INPUTS:
        return None
    try:
        return SealedInput(data)
    except (AttributeError, OSError):
        return None


#: what the zygote must read back from a sealed input for children to use sealed inputs
_PROBE = b"nkieval sealed input probe"


class _Zygote:
    """Handle on a running ``nkieval.review.zygote`` process (one request at a time).

    Its stdout is read through the raw file descriptor with our own line buffer, so ``select``
    on that descriptor is exact (a buffered reader could hold a complete message that ``select``
    never reports). Exit messages name their pid; only those of children still watched are
    kept (a child handed back without waiting, see :meth:`forget`, is reaped by the zygote and
    its exit ignored here)."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
        env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = "1"
        env.update(malloc.child_env())
        # can a forked child read the harness's sealed inputs (through /proc)? the zygote tries
        probe = seal_input(_PROBE)
        argv = [sys.executable, "-I", "-m", "nkieval.review.zygote"] + ([probe.path] if probe is not None else [])
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  env=env, bufsize=0)
        assert self.p.stdout is not None
        self.fd = self.p.stdout.fileno()
        self._buf = b""
        self._pid_msg: dict[str, Any] | None = None
        self.watched: set[int] = set()
        self.exits: dict[int, int] = {}
        ready = self._read(timeout=60)
        if not ready or not ready.get("ready"):
            self.close()
            raise RuntimeError("the sandbox zygote did not start")
        self.sealed_inputs = ready.get("probe") == _PROBE.decode()
        del probe

    def alive(self) -> bool:
        return self.p.poll() is None

    def _line(self) -> dict[str, Any] | None:
        if b"\n" not in self._buf:
            return None
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def _read(self, timeout: float | None) -> dict[str, Any] | None:
        """The next message, waiting up to ``timeout`` seconds for it."""
        import select

        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buf:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            r, _, _ = select.select([self.fd], [], [], wait)
            if not r:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise RuntimeError("the sandbox zygote exited")
            self._buf += chunk
        return self._line()

    def _file(self, msg: dict[str, Any]) -> None:
        if "exit" in msg:
            pid = int(msg.get("pid", -1))
            if pid in self.watched:
                self.exits[pid] = int(msg["exit"])
        elif "pid" in msg:
            self._pid_msg = msg

    def pump(self) -> None:
        """File every complete message already buffered (``select`` would not report them)."""
        while (msg := self._line()) is not None:
            self._file(msg)

    def fork(self, job_dir: Path, case_ids: list[int]) -> int:
        assert self.p.stdin is not None
        self.p.stdin.write((json.dumps({"job": str(job_dir), "cases": case_ids}) + "\n").encode())
        self.p.stdin.flush()
        deadline = time.monotonic() + 30
        self._pid_msg = None
        while self._pid_msg is None:
            msg = self._read(timeout=max(0.0, deadline - time.monotonic()))
            if msg is None:
                raise RuntimeError("the sandbox zygote did not fork")
            self._file(msg)
        pid = int(self._pid_msg["pid"])
        self.watched.add(pid)
        return pid

    def poll_exit(self, pid: int, timeout: float = 0.0) -> int | None:
        """``pid``'s exit status, waiting up to ``timeout`` seconds for it."""
        deadline = time.monotonic() + timeout
        self.pump()
        while pid not in self.exits:
            msg = self._read(timeout=max(0.0, deadline - time.monotonic()))
            if msg is None:
                return None
            self._file(msg)
        return self.exits[pid]

    def forget(self, pid: int) -> None:
        self.watched.discard(pid)
        self.exits.pop(pid, None)

    def close(self) -> None:
        try:
            self.p.kill()
            self.p.wait(5)
        except Exception:
            pass
        for f in (self.p.stdin, self.p.stdout):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass


_ZYGOTE: _Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()


def _zygote() -> _Zygote:
    global _ZYGOTE
    if _ZYGOTE is None or not _ZYGOTE.alive():
        _ZYGOTE = _Zygote()
    return _ZYGOTE


def shutdown() -> None:
    """Stop the zygote (it is restarted on the next run)."""
    global _ZYGOTE
    if _ZYGOTE is not None:
        _ZYGOTE.close()
        _ZYGOTE = None


# The zygote is a child process holding pipes: stop it when the harness exits, so no orphan is left.
atexit.register(shutdown)


class _Proc:
    """A started child (forked by the zygote, or a fresh subprocess) with a uniform poll/wait/kill."""

    def __init__(self, isolation: Isolation, job_dir: Path, case_ids: list[int]) -> None:
        self.isolation = isolation
        self.code: int | None = None
        self.exit_fd: int | None = None  # readable when the child may have exited
        if isolation == "forkserver":
            self.z = _zygote()
            self.pid = self.z.fork(job_dir, case_ids)
            self.exit_fd = self.z.fd
        else:
            env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
            env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = "1"
            self.p = subprocess.Popen([sys.executable, "-I", "-m", "nkieval.review.child", str(job_dir),
                                       *map(str, case_ids)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True, env=env, cwd=job_dir)
            self.pid = self.p.pid
            try:
                self.exit_fd = os.pidfd_open(self.pid)  # type: ignore[attr-defined,unused-ignore]
            except (AttributeError, OSError):
                self.exit_fd = None  # no pidfd (old kernel, other OS): the wait loop polls

    def exitcode(self, timeout: float = 0.0) -> int | None:
        """The exit status, waiting up to ``timeout`` seconds for it."""
        if self.code is None:
            if self.isolation == "forkserver":
                self.code = self.z.poll_exit(self.pid, timeout)
            else:
                try:
                    self.code = self.p.wait(timeout) if timeout > 0 else self.p.poll()
                except subprocess.TimeoutExpired:
                    self.code = None
        return self.code

    def ready(self) -> bool:
        """Whether an exit status can be read without waiting (forkserver: one is buffered)."""
        if self.isolation != "forkserver":
            return False
        self.z.pump()
        return self.pid in self.z.exits

    def signal_kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass

    def kill(self) -> None:
        self.signal_kill()
        self.exitcode(timeout=10)

    def close(self, wait: bool = True) -> None:
        """Release the child. Forkserver children are reaped by the zygote: with ``wait=False``
        a child that has not reported its exit yet is killed and left to it (its exit status
        will not be asked for)."""
        if self.isolation == "forkserver":
            if self.code is None and not wait:
                self.signal_kill()
            self.z.forget(self.pid)
            return
        if self.exitcode() is None:
            self.p.wait(5)
        if self.exit_fd is not None:
            os.close(self.exit_fd)
            self.exit_fd = None


class _NullLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NULL_LOCK = _NullLock()


def _exit_description(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (CPU-time limit)" if name == "SIGXCPU" else " (killed: possibly out of memory)" if name == "SIGKILL" else ""
        return f"killed by {name}{hint}"
    return f"exited with code {code}"


class _Janitor:
    """Removes finished job directories in a background thread, off the review's path (a few
    milliseconds of unlinking per review); whatever is left at exit is removed then."""

    def __init__(self) -> None:
        import queue

        self._q: queue.SimpleQueue[Path] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def remove(self, job: Path) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="nkieval-review-janitor", daemon=True)
                self._thread.start()
        self._q.put(job)

    def _loop(self) -> None:
        while True:
            shutil.rmtree(self._q.get(), ignore_errors=True)

    def drain(self) -> None:
        import queue

        while True:
            try:
                shutil.rmtree(self._q.get_nowait(), ignore_errors=True)
            except queue.Empty:
                return


_JANITOR = _Janitor()
atexit.register(_JANITOR.drain)


class _OutputFiles:
    """Case output files kept from one forkserver run to the next (those runs take turns, under
    ``_ZYGOTE_LOCK``): the child overwrites case k's file in place instead of creating a new one
    in its job directory, which on tmpfs costs about a fifth as much per megabyte (the pages are
    there already, and nothing is freed afterwards). The harness still reads a case's outputs
    only after that run's own result file for the case says ok, as before, and removes a file
    above :data:`KEEP_BYTES` once read, so the pool stays small. Removed at exit."""

    KEEP_BYTES = 32 << 20

    def __init__(self) -> None:
        self.dir: Path | None = None
        self._lock = threading.Lock()

    def path(self, k: int, nbytes: int) -> Path:
        with self._lock:
            if self.dir is None or not self.dir.is_dir():
                self.dir = Path(tempfile.mkdtemp(prefix="nkieval-outputs-", dir=_job_root(nbytes)))
            return self.dir / f"out_{k}.arr"

    def read(self, path: Path) -> None:
        """Called once ``path`` has been read: drop it if it is large."""
        try:
            if path.stat().st_size > self.KEEP_BYTES:
                path.unlink()
        except OSError:
            pass

    def close(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


_OUTPUTS = _OutputFiles()
atexit.register(_OUTPUTS.close)


def _job_root(nbytes: int) -> str | None:
    """Where job directories go: a RAM-backed tmpfs (``/dev/shm``) when it has room for this job
    with a wide margin (container defaults can be as small as 64 MiB), else the default temp dir.
    ``NKIEVAL_REVIEW_TMPDIR`` overrides."""
    forced = os.environ.get("NKIEVAL_REVIEW_TMPDIR")
    if forced:
        return forced
    shm = "/dev/shm"
    try:
        st = os.statvfs(shm)
        if os.access(shm, os.W_OK) and st.f_bavail * st.f_frsize > 4 * nbytes + (512 << 20):
            return shm
    except OSError:
        pass
    return None


def run_candidate(source: str, kernel: str, cases: Sequence[CaseJob], *, target: str,
                  limits: SandboxLimits = DEFAULT_LIMITS, isolation: Isolation = "forkserver",
                  on_case: Callable[[CaseRun], None] | None = None, keep_dir: bool = False,
                  on_start: Callable[[], None] | None = None, stats: dict[str, float] | None = None,
                  trusted: bool = True, hide: Sequence[str] = (), programs: dict[str, bytes] | None = None
                  ) -> list[CaseRun]:
    """Run ``source`` (a candidate .py text) on every case in a sandboxed child; never raises for candidate faults.

    ``on_case`` is called with each case's result as it arrives; ``on_start`` once, as soon as
    the first child is running (a caller starts its own work there, so that it does not slow
    the child's start). ``stats``, when given, gets this side's seconds added under
    ``prepare_s`` (job directory and input files), ``fork_s`` (asking for the child),
    ``collect_s`` (reading results back), ``exit_s`` (waiting for the child to end after its
    last result), ``cleanup_s`` (removing the job directory), ``trace_s`` (waiting for the tracer's
    programs) and ``trace_total_s`` (the tracer's own time, most of it overlapping the executor).

    ``trusted`` (the default): trace, then execute. The candidate's code runs only in a tracer process that
    receives shapes, dtypes and parameters (:mod:`nkieval.review.tracer`), once per distinct shape; the judge's
    executor replays the recorded programs on the inputs, in this process, shape by shape as they arrive
    (:mod:`nkieval.review.executor`; no child, so ``isolation`` and ``keep_dir`` do not apply and only the
    ``trace_s``/``trace_total_s`` seconds are added). ``trusted=False`` runs the candidate itself on the
    inputs, in the child (the previous pipeline, for trusted code only).
    ``hide``: directories the tracer's sandbox covers (the task under review: its reference and solutions).
    ``programs``: the review's programs by shape key, reused and added to (see ``ProgramStream``).
    """
    st = stats if stats is not None else {}
    for key in ("prepare_s", "fork_s", "collect_s", "exit_s", "cleanup_s", "trace_s", "trace_total_s"):
        st.setdefault(key, 0.0)
    if trusted:
        return _trace_then_execute(source, kernel, cases, target, limits, on_case, on_start, st, hide, programs)
    t_prep = time.perf_counter()
    nbytes = sum(sum(a.nbytes for a in c.inputs.values()) for c in cases)
    job = Path(tempfile.mkdtemp(prefix="nkieval-review-", dir=_job_root(nbytes)))
    try:
        out_paths = _write_job(job, source, kernel, cases, target, limits, isolation, nbytes)
        st["prepare_s"] += time.perf_counter() - t_prep
        runner = _Runner(job, cases, limits, isolation, on_case, on_start, st, out_paths)
        try:
            runner.run(list(range(len(cases))))
        finally:
            runner.close()
        return [runner.results[k] for k in range(len(cases))]
    finally:
        if not keep_dir:
            t_clean = time.perf_counter()
            _JANITOR.remove(job)
            st["cleanup_s"] += time.perf_counter() - t_clean


def _trace_then_execute(source: str, kernel: str, cases: Sequence[CaseJob], target: str, limits: SandboxLimits,
                        on_case: Callable[[CaseRun], None] | None, on_start: Callable[[], None] | None,
                        st: dict[str, float], hide: Sequence[str], programs: dict[str, bytes] | None
                        ) -> list[CaseRun]:
    """The candidate's code runs only in the sandboxed tracer; the judge's executor replays its programs
    (:mod:`nkieval.review.executor`) as they arrive."""
    stream = ProgramStream(source, kernel, cases, target, limits, hide, programs)
    if on_start is not None:  # the caller's own work overlaps the trace (started first: it is the critical path)
        on_start()
    results: dict[int, CaseRun] = {}
    held: list[int] = []  # (failed replays of deferred programs, passed on once settled)

    def finish(k: int, run: CaseRun) -> None:
        results[k] = run
        # (a shape whose trace failed ran no case: its record is already the one a trace without deferring gives)
        if stream.deferred and run.status in RETRACE_STATUSES and stream.get(stream.keys[k]).get("status") == "ok":
            held.append(k)
        elif on_case is not None:
            on_case(run)

    try:
        replay_as_traced(stream, cases, target, limits, finish, st)
    finally:
        stream.join()
        st["trace_total_s"] += stream.trace_s
    _settle_deferred(stream, cases, results, held)
    if on_case is not None:
        for k in sorted(held):
            on_case(results[k])
    return [results[k] for k in range(len(cases))]


def _settle_deferred(stream: ProgramStream, cases: Sequence[CaseJob], results: dict[int, CaseRun],
                     held: list[int]) -> None:
    """The held cases' outcomes: each failed replay of a program whose checks the tracer deferred, where tracing
    its shape again without deferring (``ProgramStream.retrace``) fails, becomes that trace's failure record, as
    the review gives it without deferred checks (the shape's trace failed, so none of its cases ran); where that
    trace succeeds, the replay's failure stands (the same program)."""
    t0 = time.perf_counter()
    for k in held:
        res = stream.retrace(stream.keys[k])
        if res.get("status") != "ok":
            results[k] = traced_failure(cases[k].label, res)
    if held:
        stream.trace_s += time.perf_counter() - t0


def _write_job(job: Path, source: str, kernel: str, cases: Sequence[CaseJob], target: str, limits: SandboxLimits,
               isolation: Isolation, nbytes: int) -> dict[int, Path]:
    """The job directory: ``job.json``, the candidate's source and the input files; the kept output files by
    case."""
    spec: dict[str, Any] = {
        "kernel": kernel, "target": target, "memory_mb": limits.memory_mb,
        "cpu_s": limits.timeout_s * max(1, len(cases)) + limits.startup_s,
        "max_instructions": limits.max_instructions,
        "cases": [],
    }
    (job / "candidate.py").write_text(source)
    spec["candidate"] = "candidate.py"
    sealed_ok = isolation == "forkserver" and _zygote().sealed_inputs
    out_paths: dict[int, Path] = {}
    for k, c in enumerate(cases):
        name = f"in_{k}.arr"
        if sealed_ok and c.sealed is not None:
            name = c.sealed.path  # (absolute: the child's job / name is this path)
        elif c.packed is not None:
            (job / name).write_bytes(c.packed)
        else:
            npzio.dump(job / name, c.inputs)
        case = {"inputs": name, "input_names": list(c.inputs), "params": c.params, "n_outputs": c.n_outputs,
                "want_trace": c.want_trace}
        if isolation == "forkserver":  # (runs take turns: the kept output files are this run's)
            out_paths[k] = _OUTPUTS.path(k, nbytes)
            case["outputs"] = str(out_paths[k])
        spec["cases"].append(case)
    (job / "job.json").write_text(json.dumps(spec))
    return out_paths


class _Runner:
    """Runs cases in sandboxed children (a fresh child after one dies), keeping every case's result."""

    def __init__(self, job: Path, cases: Sequence[CaseJob], limits: SandboxLimits, isolation: Isolation,
                 on_case: Callable[[CaseRun], None] | None, on_start: Callable[[], None] | None,
                 st: dict[str, float], out_paths: dict[int, Path]) -> None:
        self.job, self.cases, self.limits, self.isolation = job, cases, limits, isolation
        self.on_case, self.st, self.out_paths = on_case, st, out_paths
        self._pending_start = on_start
        self.results: dict[int, CaseRun] = {}
        #: the label of a case that timed out: every case not run yet is skipped
        self.hung: str | None = None
        self.wake = _Wake(job)

    def started(self) -> None:
        cb, self._pending_start = self._pending_start, None
        if cb is not None:
            cb()

    def finish(self, k: int, run: CaseRun) -> None:
        self.results[k] = run
        if self.on_case is not None:
            self.on_case(run)

    def skip(self, ks: list[int]) -> None:
        for k in ks:
            self.finish(k, skipped(self.cases[k].label, str(self.hung)))

    def run(self, ks: list[int]) -> None:
        """Cases ``ks`` (in order), each child going on from where the last one died."""
        remaining = list(ks)
        with _ZYGOTE_LOCK if self.isolation == "forkserver" else _NULL_LOCK:
            while remaining:
                _run_batch(self, remaining)

    def close(self) -> None:
        self.wake.close()


class _Wake:
    """The parent's end of the job's ``notify`` FIFO: the child writes ``s<k>`` / ``r<k>`` after
    writing case k's start marker / result file, so the parent sleeps in ``select`` until
    something happened (or a deadline) and then looks only at the files named, instead of
    polling the directory. The lines are hints, never trusted: a named file is still checked,
    and every file is looked at again at least every :data:`_RESCAN_S` seconds, so a hint that
    is lost or forged (the candidate runs in the process that writes them) costs at most that
    delay. Opened read-write, so the FIFO never reports end-of-file when a child closes its end
    (that would make ``select`` spin). Without a FIFO (mkfifo unsupported) the wait loop polls
    every few milliseconds, as before."""

    def __init__(self, job: Path) -> None:
        self.fd: int | None = None
        self._tail = b""
        try:
            os.mkfifo(job / "notify", 0o600)
            self.fd = os.open(job / "notify", os.O_RDWR | os.O_NONBLOCK)
        except (AttributeError, OSError):
            self.fd = None

    def drain(self) -> set[str] | None:
        """The hints received since the last call (None: no FIFO, so look at everything)."""
        if self.fd is None:
            return None
        data = self._tail
        try:
            while chunk := os.read(self.fd, 65536):
                data += chunk
        except (BlockingIOError, InterruptedError):
            pass
        lines = data.split(b"\n")
        self._tail = lines.pop()[-64:]  # an unfinished line (bounded: the writer may be hostile)
        return {ln.decode("ascii", "replace") for ln in lines[-4096:]}

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


#: the longest a result can wait to be noticed when its hint went missing
_RESCAN_S = 0.05


def _wait(wake: _Wake, proc: _Proc, timeout: float) -> None:
    """Sleep until the child notifies, its exit status arrives, or ``timeout`` seconds pass."""
    import select

    if proc.ready():
        return
    fds = [fd for fd in (wake.fd, proc.exit_fd) if fd is not None]
    if wake.fd is None or proc.exit_fd is None:
        timeout = min(timeout, 0.005)  # something can only be seen by looking: poll
    try:
        select.select(fds, [], [], max(0.0, timeout))
    except InterruptedError:
        pass


def _run_batch(runner: _Runner, remaining: list[int]) -> None:
    """Start one child for ``remaining``; return when it finishes or a case fails hard (removing what is done).
    Case k's outputs are written to ``runner.out_paths[k]`` when set (kept output files), else ``job/out_<k>.arr``.
    A case that times out skips every case not run yet (``runner.hung``)."""
    job, cases, limits, isolation = runner.job, runner.cases, runner.limits, runner.isolation
    results, wake, st, out_paths = runner.results, runner.wake, runner.st, runner.out_paths

    def finish(k: int, run: CaseRun) -> None:
        remaining.remove(k)
        runner.finish(k, run)

    def collect(k: int) -> CaseRun:
        t = time.perf_counter()
        out = out_paths.get(k)
        run = _collect(job, k, cases[k], out)
        if out is not None:
            _OUTPUTS.read(out)
        st["collect_s"] += time.perf_counter() - t
        return run

    wake.drain()
    t_fork = time.perf_counter()
    proc = _Proc(isolation, job, list(remaining))
    st["fork_s"] += time.perf_counter() - t_fork
    t_start = time.monotonic()
    current: int | None = None
    started_at = t_start
    waits_at_start: dict[str, float] = {}
    rescan_at = t_start + _RESCAN_S
    try:
        runner.started()
        while True:
            hints = wake.drain()
            if hints is None or time.monotonic() >= rescan_at:
                hints = None  # look at every file
                rescan_at = time.monotonic() + _RESCAN_S
            n_done = len(results)
            for k in list(remaining):
                if (hints is None or f"r{k}" in hints) and (job / f"res_{k}.json").exists():
                    finish(k, collect(k))
                    if current == k:
                        current = None
            if not remaining:
                return
            k0 = remaining[0]
            if current != k0:
                # The child marks only its first case as started (its import is done then); after a
                # result it goes straight on to its next case, which is timed from that result.
                if len(results) > n_done or ((hints is None or f"s{k0}" in hints)
                                             and (job / f"started_{k0}").exists()):
                    current, started_at = k0, time.monotonic()
                    waits_at_start = run_queue_delays(proc.pid)
            code = proc.exitcode()
            if code is not None:
                # A result may have landed just before exit.
                n_done = len(results)
                for k in list(remaining):
                    if (job / f"res_{k}.json").exists():
                        finish(k, collect(k))
                if not remaining:
                    return
                k0 = remaining[0]
                desc = _exit_description(code)
                if current == k0 or len(results) > n_done or (job / f"started_{k0}").exists():
                    finish(k0, CaseRun(cases[k0].label, "crash", error={
                        "message": f"the candidate process {desc} while running this case, without reporting",
                        **_tails(job)}))
                else:
                    for k in list(remaining):
                        finish(k, CaseRun(cases[k].label, "crash" if k == k0 else "not-run", error={
                            "message": f"the candidate process {desc} before running any case (at import)",
                            **_tails(job)}))
                return
            now = time.monotonic()
            if current is not None and now - started_at > limits.timeout_s:
                waited = longest_wait_since(waits_at_start, proc.pid)  # (before the kill: then it is gone)
                proc.kill()
                if starved(waited, now - started_at):
                    _starved_stop(finish, cases, remaining, now - started_at, waited, "this case")
                    return
                finish(current, CaseRun(cases[current].label, "timeout", wall_s=now - started_at, error={
                    "message": f"no result after {limits.timeout_s:g} s; the process was killed", **_tails(job)}))
                # A kernel that hangs on one shape almost always hangs on the next: do not spend
                # n x timeout on it. The skipped cases are reported as such.
                runner.hung = cases[current].label
                skipped = list(remaining)
                remaining.clear()
                runner.skip(skipped)
                return
            if current is None and now - t_start > limits.startup_s + limits.timeout_s:
                waited = longest_wait(proc.pid)
                proc.kill()
                if starved(waited, now - t_start):
                    _starved_stop(finish, cases, remaining, now - t_start, waited, "its import")
                    return
                for k in list(remaining):
                    finish(k, CaseRun(cases[k].label, "timeout" if k == remaining[0] else "not-run", error={
                        "message": f"the candidate did not start a case within {limits.startup_s + limits.timeout_s:g}"
                                   " s (hang at import?)", **_tails(job)}))
                return
            deadline = (started_at + limits.timeout_s if current is not None
                        else t_start + limits.startup_s + limits.timeout_s)
            _wait(wake, proc, min(deadline, rescan_at) - now + 0.001)
    finally:
        t_exit = time.perf_counter()
        if proc.exitcode() is None:
            if remaining:  # stopped early (an exception here): make sure it is gone
                proc.kill()
            elif isolation == "forkserver":
                # every result is in and the child is on its way out: do not wait for it (the
                # zygote reaps it); a kill makes sure it is gone even if it lingers
                proc.close(wait=False)
            elif proc.exitcode(timeout=0.5) is None:
                proc.kill()
        proc.close()
        st["exit_s"] += time.perf_counter() - t_exit


def _starved_stop(finish: Callable[[int, CaseRun], None], cases: Sequence[CaseJob], remaining: list[int],
                  took: float, waited: float | None, what: str) -> None:
    """A child stopped at its wall-clock limit that waited for a core most of that time was starved: the
    machine's fault, not the candidate's timeout (``review.isolation.starvation``). Its case is a harness error
    (the review fails closed, to be retried) and the cases after it are not run."""
    for i, k in enumerate(list(remaining)):
        msg = (f"the candidate process was stopped at the wall-clock limit during {what}, but it waited for a core "
               f"{waited or 0.0:.1f} s of its {took:.1f} s (an overloaded machine, not the candidate: retry)"
               if i == 0 else "not run: the case before it was stopped on an overloaded machine")
        finish(k, CaseRun(cases[k].label, "infra-error" if i == 0 else "not-run", wall_s=took if i == 0 else 0.0,
                          error={"message": msg}))


def _tails(job: Path, n: int = 400) -> dict[str, str]:
    out = {}
    for name in ("stdout", "stderr"):
        p = job / f"{name}.txt"
        if p.exists():
            data = p.read_bytes()[-n:].decode("utf-8", "replace")
            if data.strip():
                out[f"{name}_tail"] = data
    return out


def _mask(m: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray | None:
    if m is None:
        return None
    if m.dtype != np.bool_ or m.shape != tuple(shape):
        raise npzio.ArrayFileError(f"unwritten-element mask has dtype {m.dtype} and shape {m.shape}")
    return m


def _collect(job: Path, k: int, case: CaseJob, out: Path | None = None) -> CaseRun:
    try:
        res = json.loads((job / f"res_{k}.json").read_bytes())
        if not isinstance(res, dict) or not isinstance(res.get("status"), str):
            raise ValueError("malformed result")
    except (ValueError, OSError) as e:
        return CaseRun(case.label, "crash", error={"message": f"unreadable result file: {e}"})
    status = res["status"] if res["status"] in STATUSES else "crash"

    def num(key: str) -> float:
        v = res.get(key, 0.0)
        return float(v) if isinstance(v, int | float) else 0.0

    run = CaseRun(case.label, status, sim_s=num("sim_s"), wall_s=num("wall_s"),
                  n_instructions=res.get("n_instructions"), warnings=list(res.get("warnings", []))[:50],
                  load_s=num("load_s"), post_s=num("post_s"), setup_s=num("setup_s"))
    if status != "ok":
        run.error = {k: v for k, v in res.items() if k in ("error_type", "message", "frames", "rule", "instruction",
                                                           "operand", "location")}
        run.error.update(_tails(job))
        return run
    expected = sum(a.nbytes for a in case.inputs.values()) * 10 + (1 << 20)
    try:
        arrays = npzio.load(out or job / f"out_{k}.arr", max_bytes=max(expected, 64 << 20))
        run.outputs = [arrays[f"out{i}"] for i in range(case.n_outputs)]
        if res.get("written_checked"):
            run.unwritten = [_mask(arrays.get(f"unwritten{i}"), o.shape) for i, o in enumerate(run.outputs)]
    except (npzio.ArrayFileError, KeyError, OSError) as e:
        return CaseRun(case.label, "bad-output", error={"message": f"outputs could not be read back: {e}"})
    tp = job / f"trace_{k}.json"
    if case.want_trace and tp.exists():
        run.trace_json = tp.read_text()
    return run

"""A second replay process beside the judge: cases replayed on a core the judge's own interpreter does not use.

The judge replays cases in its own process (:mod:`nkieval.review.executor`), in one interpreter shared with the
thread that judges them. Only the evidence case needs its trace as an object in the judge; every other case needs
only what a trace gives in a few numbers (the instruction count, the elements never written, the capacity
verdict). So a shape with no evidence case is replayed whole here, its first case with a trace (``"traced"``)
and the others without one when the program is static (``"auto"``: ``nkieval.sim.program.is_static``, and this
process's own traced run of it passed, whose counts and masks they take); and the evidence shape's later cases
are replayed here without a trace (``"untraced"``: the judge completes them from its traced run).

What runs here is what runs in the judge's executor: the program text is parsed, validated and compiled again
here and replayed by the simulator within the case's budgets. No candidate code runs in this process, as none
runs in the judge's. Nothing it sends back is unpickled: an answer is a JSON header and arrays in the array-file
format (:mod:`nkieval.review.npzio`), read as data.

Jobs are sent one at a time, in order, and only once the process has started; a job not yet sent can be taken
back (:meth:`Job.take_back`), and the judge then replays that case itself, so a busy or starting worker never
delays a review. A case that runs out of time stops its review's jobs not yet sent (:class:`Group`). A worker
that fails (exits, sends something unreadable, outlasts the case's limits) fails its jobs with
:class:`WorkerFailed` and is replaced on the next job; the judge replays those cases itself, so a fault here never
reaches a verdict. ``NKIEVAL_REPLAY_WORKER=0`` turns the worker off. The worker process itself is
:mod:`nkieval.review.replay_serve`.
"""

from __future__ import annotations

import json
import os
import select
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import IO, Any

from nkieval.review import npzio
from nkieval.review.runs import ERROR_FIELDS, STATUSES, CaseJob, CaseRun, SandboxLimits

#: header, program text and array bytes of a frame (their lengths)
_FRAME = struct.Struct("<QQQ")
#: the largest header a frame may have (the rest is bounded by what the judge sent: its inputs and program)
_MAX_HEADER = 1 << 20
#: seconds a worker may take beyond the case's own time limit (its answer, and the program's parse)
_GRACE_S = 30.0
#: how long a new worker may take to start (imports) before it is given up
_START_S = 120.0
#: how a job is replayed (see the module's docstring)
MODES = ("traced", "auto", "untraced")


class WorkerFailed(RuntimeError):
    """The replay worker could not answer a job (the judge replays the case itself)."""


def enabled() -> bool:
    return os.environ.get("NKIEVAL_REPLAY_WORKER", "1") != "0"


class Group:
    """The jobs of one review: once one of its cases runs out of time (``hung``: its label), none not yet sent is
    sent (a kernel that hangs on one case almost always hangs on the next; the judge skips those cases)."""

    def __init__(self) -> None:
        self.hung: str | None = None


class Job:
    """One case sent to the worker: :meth:`take_back` before it is sent, or :meth:`result`."""

    def __init__(self, frame: list[bytes], label: str, deadline_s: float, group: Group | None = None) -> None:
        self.frame, self.label, self.deadline_s, self.group = frame, label, deadline_s, group
        self.future: Future[CaseRun] = Future()
        self._lock = threading.Lock()
        self._state = "queued"  # -> "sent" | "taken"

    def take_back(self) -> bool:
        """Whether the job was still unsent (it now never will be): the caller replays the case itself (or skips
        it, when its group has hung)."""
        with self._lock:
            if self._state == "queued":
                self._state = "taken"
                return True
            return self._state == "taken"

    def _send(self) -> bool:
        with self._lock:
            if self._state != "queued" or (self.group is not None and self.group.hung is not None):
                if self._state == "queued":
                    self._state = "taken"
                return False
            self._state = "sent"
            return True

    def result(self) -> CaseRun:
        """The worker's run of the case; :class:`WorkerFailed` when it could not give one."""
        return self.future.result()


class ReplayWorker:
    """The judge's side: a queue of jobs and the thread that sends them to the worker process one at a time."""

    def __init__(self) -> None:
        self._jobs: deque[Job] = deque()
        self._cv = threading.Condition()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._broken = False  # a worker that could not start is not tried again in this process
        #: set while a started worker takes jobs
        self.ready = threading.Event()
        #: jobs answered, jobs failed, worker processes started (for tests and benchmarks)
        self.counts = {"answered": 0, "failed": 0, "started": 0}
        self._in_flight = False

    def submit(self, text: str | bytes, case: CaseJob, target: str, limits: SandboxLimits, *,
               mode: str = "untraced", group: Group | None = None) -> Job | None:
        """Queue ``case`` for a replay of the program ``text`` (its UTF-8 bytes, when the caller sends one program
        for several cases) in ``mode`` (:data:`MODES`); None when it cannot be sent (params that are not JSON, or
        no worker: the judge replays it)."""
        if self._broken:
            return None
        if mode not in MODES:
            raise ValueError(f"unknown replay mode {mode!r}")
        try:
            header = json.dumps({"label": case.label, "names": list(case.inputs), "params": case.params,
                                 "n_outputs": case.n_outputs, "target": target, "mode": mode,
                                 "limits": [limits.timeout_s, limits.memory_mb, limits.max_instructions]}).encode()
        except (TypeError, ValueError):
            return None
        arrays = case.packed if case.packed is not None else npzio.dumps(case.inputs)
        program = text if isinstance(text, bytes) else text.encode()
        job = Job([header, program, arrays], case.label, float(limits.timeout_s) + _GRACE_S, group)
        with self._cv:
            self._jobs.append(job)
            self._ensure_thread()
            self._cv.notify()
        return job

    def idle(self) -> bool:
        """Whether the worker is started and has no job queued or running."""
        with self._cv:
            return self.ready.is_set() and not self._in_flight and not self._jobs

    def start(self) -> None:
        """Start the worker process now (it takes jobs once its imports are done)."""
        with self._cv:
            self._ensure_thread()

    def _ensure_thread(self) -> None:  # (under _cv)
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._dispatch, name="nkieval-replay-worker", daemon=True)
            self._thread.start()

    def _dispatch(self) -> None:
        while True:
            if self._proc is None or self._proc.poll() is not None:
                try:
                    self._spawn()
                except Exception:  # (no worker: jobs stay queued, and the judge takes each back)
                    self._broken = True
                    return
            with self._cv:
                while not self._jobs:
                    self._cv.wait()
                job = self._jobs.popleft()
                if not job._send():
                    continue
                self._in_flight = True
            try:
                run = self._exchange(job)
            except Exception as e:  # (the worker's fault, never the case's: the judge replays it)
                self.counts["failed"] += 1
                self._stop()
                self._in_flight = False
                job.future.set_exception(WorkerFailed(f"replay worker: {type(e).__name__}: {e}"))
                continue
            self._in_flight = False
            self.counts["answered"] += 1
            if run.status == "timeout" and job.group is not None and job.group.hung is None:
                job.group.hung = run.label
            job.future.set_result(run)

    def _spawn(self) -> None:
        self.counts["started"] += 1
        self._proc = proc = subprocess.Popen([sys.executable, "-m", "nkieval.review.replay_serve"],
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=subprocess.DEVNULL, close_fds=True)
        try:
            header, _, _ = read_frame(proc.stdout, time.monotonic() + _START_S)  # type: ignore[arg-type]
            if header.get("ready") is not True:
                raise WorkerFailed("the worker did not start")
        except Exception:
            self._stop()
            raise
        self.ready.set()

    def _exchange(self, job: Job) -> CaseRun:
        proc = self._proc
        if proc is None:
            raise WorkerFailed("no worker")
        write_frame(proc.stdin, job.frame)  # type: ignore[arg-type]
        header, _, arrays = read_frame(proc.stdout, time.monotonic() + job.deadline_s)  # type: ignore[arg-type]
        return _case_run(job.label, header, arrays)

    def _stop(self) -> None:
        self.ready.clear()
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None


_WORKER: list[ReplayWorker | None] = [None]
_WORKER_LOCK = threading.Lock()


def worker() -> ReplayWorker | None:
    """This process's replay worker (started on first use), or None when it is turned off."""
    if not enabled():
        return None
    with _WORKER_LOCK:
        w = _WORKER[0]
        if w is None or w._pid != os.getpid():  # (a forked judge gets its own)
            w = _WORKER[0] = ReplayWorker()
        return w


def worker_pids() -> set[int]:
    """The process ids of this process's live replay workers (the judge's own children, not a candidate's)."""
    w = _WORKER[0]
    proc = w._proc if w is not None and w._pid == os.getpid() else None
    return {proc.pid} if proc is not None and proc.poll() is None else set()


# -- frames: three lengths, then a JSON header, the program text and array-file bytes ------------------------------
def write_frame(out: IO[bytes], parts: list[bytes]) -> None:
    header, text, arrays = parts
    out.write(_FRAME.pack(len(header), len(text), len(arrays)))
    for p in parts:
        out.write(p)
    out.flush()


def read_frame(inp: IO[bytes], deadline: float | None = None) -> tuple[dict[str, Any], bytes, bytes]:
    head = _read_exact(inp, _FRAME.size, deadline)
    n_header, n_text, n_arrays = _FRAME.unpack(head)
    if n_header > _MAX_HEADER:
        raise WorkerFailed(f"a frame header of {n_header} bytes")
    header = json.loads(_read_exact(inp, n_header, deadline))
    if not isinstance(header, dict):
        raise WorkerFailed("a frame header that is not an object")
    return header, _read_exact(inp, n_text, deadline), _read_exact(inp, n_arrays, deadline)


def _read_exact(inp: IO[bytes], n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    fd = inp.fileno()
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise WorkerFailed("the worker took longer than the case's limits allow")
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise WorkerFailed("the worker exited")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _case_run(label: str, header: dict[str, Any], arrays: bytes) -> CaseRun:
    """The worker's answer as the judge's record, every field checked (a malformed answer raises). Arrays:
    ``out<i>`` per output, ``unwritten<i>`` per output the header's ``unwritten`` list marks."""
    if "worker_error" in header:
        raise WorkerFailed(str(header["worker_error"])[:500])
    status = header.get("status")
    if status not in STATUSES:
        raise WorkerFailed(f"unknown status {status!r}")
    got = npzio.loads(arrays, "replay worker outputs") if arrays else {}
    n_out = sum(1 for name in got if name.startswith("out"))
    run = CaseRun(label, str(status), outputs=[_array(got, f"out{i}") for i in range(n_out)],
                  sim_s=float(header.get("sim_s", 0.0)), post_s=float(header.get("post_s", 0.0)),
                  wall_s=float(header.get("wall_s", 0.0)),
                  warnings=[w for w in header.get("warnings", []) if isinstance(w, dict)][:50],
                  error={k: v for k, v in dict(header.get("error") or {}).items() if k in ERROR_FIELDS})
    if status == "ok" and not run.outputs:
        raise WorkerFailed("an ok run without outputs")
    n = header.get("n_instructions")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
        raise WorkerFailed(f"an instruction count of {n!r}")
    run.n_instructions = n
    marks = header.get("unwritten")
    if marks is not None:
        if not isinstance(marks, list) or len(marks) != n_out or not all(isinstance(m, bool) for m in marks):
            raise WorkerFailed("unwritten masks that do not match the outputs")
        run.unwritten = [_mask(got, i, run.outputs[i]) if m else None for i, m in enumerate(marks)]
    return run


def _array(got: dict[str, Any], name: str) -> Any:
    if name not in got:
        raise WorkerFailed(f"an answer without {name}")
    return got[name]


def _mask(got: dict[str, Any], i: int, out: Any) -> Any:
    m = _array(got, f"unwritten{i}")
    if m.dtype != bool or m.size != out.size:
        raise WorkerFailed(f"unwritten mask {i} is not a bool mask of its output's size")
    return m

"""A second replay process beside the judge: a shape's untraced cases replayed on the core the tracer leaves idle.

The judge replays every case in its own process (:mod:`nkieval.review.executor`), in one interpreter shared with
the thread that judges the cases. Once the sandboxed tracer has recorded the last shape, the machine's other core
has nothing to do, and the last shape's cases, the longest replays of a review, would run one after the other. A
static program (``nkieval.sim.program.is_static``) issues the same instructions on every case of its shape, so
its later cases need no trace: they are independent jobs, which this process runs while the judge replays the
traced one.

What runs here is what runs in the judge's executor: the program text is parsed, validated and compiled again
here and replayed by the simulator within the case's budgets (``executor.replay_untraced``). No candidate code
runs in this process, as none runs in the judge's. Nothing it sends back is unpickled: an answer is a JSON header
and the outputs in the array-file format (:mod:`nkieval.review.npzio`), read as data.

Jobs are sent one at a time, in order, and only once the process has started; a job not yet sent can be taken
back (:meth:`Job.take_back`), and the judge then replays that case itself, so a busy or starting worker never
delays a review. A worker that fails (exits, sends something unreadable, outlasts the case's limits) fails its
jobs with :class:`WorkerFailed` and is replaced on the next job; the judge replays those cases itself, so a fault
here never reaches a verdict. ``NKIEVAL_REPLAY_WORKER=0`` turns the worker off. The worker process itself is
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


class WorkerFailed(RuntimeError):
    """The replay worker could not answer a job (the judge replays the case itself)."""


def enabled() -> bool:
    return os.environ.get("NKIEVAL_REPLAY_WORKER", "1") != "0"


class Job:
    """One case sent to the worker: :meth:`take_back` before it is sent, or :meth:`result`."""

    def __init__(self, frame: list[bytes], label: str, deadline_s: float) -> None:
        self.frame, self.label, self.deadline_s = frame, label, deadline_s
        self.future: Future[CaseRun] = Future()
        self._lock = threading.Lock()
        self._state = "queued"  # -> "sent" | "taken"

    def take_back(self) -> bool:
        """Whether the job was still unsent (it now never will be): the caller replays the case itself."""
        with self._lock:
            if self._state == "queued":
                self._state = "taken"
                return True
            return self._state == "taken"

    def _send(self) -> bool:
        with self._lock:
            if self._state != "queued":
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

    def submit(self, text: str | bytes, case: CaseJob, target: str, limits: SandboxLimits) -> Job | None:
        """Queue ``case`` for a replay of the program ``text`` (its UTF-8 bytes, when the caller sends one program
        for several cases) without a trace; None when it cannot be sent (params that are not JSON, or no worker:
        the judge replays it)."""
        if self._broken:
            return None
        try:
            header = json.dumps({"label": case.label, "names": list(case.inputs), "params": case.params,
                                 "n_outputs": case.n_outputs, "target": target,
                                 "limits": [limits.timeout_s, limits.memory_mb, limits.max_instructions]}).encode()
        except (TypeError, ValueError):
            return None
        arrays = case.packed if case.packed is not None else npzio.dumps(case.inputs)
        program = text if isinstance(text, bytes) else text.encode()
        job = Job([header, program, arrays], case.label, float(limits.timeout_s) + _GRACE_S)
        with self._cv:
            self._jobs.append(job)
            self._ensure_thread()
            self._cv.notify()
        return job

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
            try:
                run = self._exchange(job)
            except Exception as e:  # (the worker's fault, never the case's: the judge replays it)
                self.counts["failed"] += 1
                self._stop()
                job.future.set_exception(WorkerFailed(f"replay worker: {type(e).__name__}: {e}"))
                continue
            self.counts["answered"] += 1
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
    """The worker's answer as the judge's record, every field checked (a malformed answer raises)."""
    if "worker_error" in header:
        raise WorkerFailed(str(header["worker_error"])[:500])
    status = header.get("status")
    if status not in STATUSES:
        raise WorkerFailed(f"unknown status {status!r}")
    outs = npzio.loads(arrays, "replay worker outputs") if arrays else {}
    run = CaseRun(label, str(status), outputs=[outs[str(i)] for i in range(len(outs))],
                  sim_s=float(header.get("sim_s", 0.0)), post_s=float(header.get("post_s", 0.0)),
                  wall_s=float(header.get("wall_s", 0.0)),
                  warnings=[w for w in header.get("warnings", []) if isinstance(w, dict)][:50],
                  error={k: v for k, v in dict(header.get("error") or {}).items() if k in ERROR_FIELDS})
    if status == "ok" and not run.outputs:
        raise WorkerFailed("an ok run without outputs")
    return run

"""A pool of review processes with a time limit per job: what ``score_many(executor="local")`` and
``nkieval serve`` run reviews in.

Why not ``concurrent.futures.ProcessPoolExecutor``: a job that runs past its time limit must be stopped, and a
process pool cannot stop one task. Here each slot is one spawned process (its own process group, so its
sandbox zygote goes with it) fed through a pipe by one thread; past the limit the slot's process group is
killed, the job's result is a ``harness-error`` (retryable), and a fresh process takes the slot. A worker
that dies is the same. Each worker keeps its warm state (zygote, tracer pool, case cache) across jobs.

A job is a JSON-safe dict of :func:`nkieval.reward.core.score` arguments; the answer is
``RewardResult.to_dict()`` (or ``{"status": "bad-request", ...}`` for an unknown task or target).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol

from nkieval.reward.affinity import AffinityQueue

#: Seconds a stopping worker gets to shut its sandbox down before it is killed.
STOP_GRACE_S = 2.0


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Score one job in this process: the body of a review process's and a Ray review actor's job."""
    from nkieval.review.verdict import UsageError
    from nkieval.reward.core import score
    from nkieval.tasks import TaskError

    kw = dict(job.get("review_kw") or {})
    try:
        r = score(job["task"], job["source"], seed=job.get("seed"), target=job.get("target"), extract=False,
                  full_report=bool(job.get("full_report")), shaping=job.get("shaping", "tiered"),
                  feedback=bool(job.get("feedback", True)), **kw)
    except (TaskError, UsageError, ValueError) as e:
        return {"status": "bad-request", "reward": None, "task": str(job.get("task")), "error": str(e)}
    d = r.to_dict()
    if job.get("extraction"):
        d["extraction"] = job["extraction"]
    return d


#: the collector's thresholds in a warm worker: CPython's young generations (700, 10), a full collection after
#: at most 100 middle-generation collections instead of 10 (about one per 100 reviews rather than one per 10)
WORKER_GC_THRESHOLDS = (700, 10, 100)


def settle_collector() -> None:
    """Make the garbage collector's work in a warm, dedicated review process proportional to what reviews make.

    After its first review a worker holds tens of thousands of long-lived container objects (imported modules,
    the simulator's registries, the sandbox's and tracer's handles, the first task's cached cases) that never
    become garbage. CPython walks all of them in every full collection, and a review's new long-lived objects
    (each replayed program is about 2,000 kept in a 32-program cache) start one every few reviews: profiled, a
    full collection cost 20-100 ms, about 2-5 ms per warm review. ``gc.freeze()`` (after a collection, so no
    garbage is frozen) moves them out of every generation, and full collections then walk only what came
    later; they are also made ten times rarer (:data:`WORKER_GC_THRESHOLDS`). Frozen objects are still freed by
    reference counting when dropped; only a reference cycle among them that becomes garbage later is never
    collected, so this runs once per process, on state made by its first review. Only processes that run
    nothing but reviews call it (the worker pool's slots), never the caller's process: no verdict, score or
    report depends on it (``tests/reward/test_workers_gc.py``)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*WORKER_GC_THRESHOLDS)


#: set once the worker's loop has ended: it is on its way out, shutting its sandbox down (atexit)
_EXITING = [False]


def _on_term(signum: int, frame: Any) -> None:
    if _EXITING[0]:
        return  # (a stop's SIGTERM that meets the shutdown already under way: let it finish)
    _EXITING[0] = True
    raise SystemExit(128 + signum)  # runs atexit: the sandbox zygote is shut down


def _worker_main(conn: Any) -> None:
    """A slot's process: answer jobs from ``conn`` until it closes."""
    with contextlib.suppress(OSError):
        os.setpgrp()
    signal.signal(signal.SIGTERM, _on_term)
    try:
        _serve_jobs(conn)
    finally:
        _EXITING[0] = True


def _serve_jobs(conn: Any) -> None:
    settled = False
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        ans = answer_job(job)
        try:
            conn.send(ans)
        except (BrokenPipeError, OSError):
            return
        if not settled and ans.get("status") != "harness-error":
            settle_collector()  # (after the answer went out: its collection costs no request any time)
            settled = True


def answer_job(job: dict[str, Any]) -> dict[str, Any]:
    """A worker's answer to ``job`` (a review process's, a Ray actor's): :func:`run_job`'s, a ``harness-error`` for
    anything that breaks the harness, and the worker's case cache counters (``CACHE_STATS``, for the pool)."""
    try:
        ans = run_job(job)
    except BaseException as e:  # the harness broke: retryable
        ans = {"status": "harness-error", "reward": None, "task": str(job.get("task")),
               "error": f"worker: {type(e).__name__}: {e}"}
    return {**ans, CACHE_STATS: _case_cache_stats()}


#: the answer's field that carries the worker's case cache counters to the pool (taken off before it goes on)
CACHE_STATS = "_worker_case_cache"


def _case_cache_stats() -> dict[str, int]:
    """This worker's case cache counters (:meth:`nkieval.review.cache.CaseCache.stats`); empty if they cannot be
    read (metrics never cost an answer)."""
    try:
        from nkieval.review.cache import CASE_CACHE

        return CASE_CACHE.stats()
    except Exception:
        return {}


class SlotFailed(Exception):
    """The worker running a job was stopped (past the job's time limit) or died: the job is a ``harness-error``."""


class Slot(Protocol):
    """Where one of a pool's workers runs its jobs: a review process here, or a Ray actor
    (:class:`nkieval.reward.ray_executor.ActorSlot`). The pool calls it from the worker's own thread only."""

    def wait_ready(self, closed: Callable[[], bool]) -> bool:
        """Block until the worker can take a job (False: ``closed()`` became true first)."""

    def call(self, job: dict[str, Any], limit: float | None) -> dict[str, Any]:
        """The worker's answer (:func:`answer_job`); raises :class:`SlotFailed` if it ran past ``limit`` seconds
        or died, after stopping it (the next call starts a fresh one)."""

    def stop(self) -> None:
        """Stop the worker and everything it started."""


class ProcessSlot:
    """A spawned review process in its own process group (its sandbox zygote goes with it when it is stopped)."""

    def __init__(self, ctx: Any | None = None) -> None:
        self.ctx = ctx if ctx is not None else mp.get_context("spawn")
        self.proc: Any = None
        self.conn: Any = None

    def wait_ready(self, closed: Callable[[], bool]) -> bool:
        return True  # (the process is started by the job that needs it)

    def call(self, job: dict[str, Any], limit: float | None) -> dict[str, Any]:
        if self.proc is None or not self.proc.is_alive():
            self.stop()
            self.start()
        t0 = time.monotonic()
        try:
            self.conn.send(job)
            if self.conn.poll(limit):
                return dict(self.conn.recv())
            why = f"the review ran past the request's time limit of {limit:g} s; its worker was stopped"
        except (EOFError, OSError, BrokenPipeError) as e:
            why = f"the review worker died ({type(e).__name__}) after {time.monotonic() - t0:.1f} s"
        self.stop()
        raise SlotFailed(why)

    def start(self) -> None:
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker_main, args=(child,), daemon=True, name="nkieval-reward-worker")
        self.proc.start()
        child.close()
        self.conn = parent

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(OSError, AttributeError):
            self.conn.close()
        self.conn = None
        if self.proc.is_alive():
            self._signal(signal.SIGTERM)
            self.proc.join(STOP_GRACE_S)
            self._signal(signal.SIGKILL)
        self.proc.join(STOP_GRACE_S)
        self.proc = None

    def _signal(self, sig: int) -> None:
        """``sig`` to the worker's process group (its zygote and sandbox processes), and to the worker itself
        in case it has not made its group yet."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.proc.pid, sig)


class WorkerPool:
    """``workers`` review workers; :meth:`submit` a job, get a :class:`~concurrent.futures.Future` of its
    answer. ``timeout_s`` (per job, None: none) bounds a job's wall time from the moment a worker takes it.
    ``slot``: makes each worker's :class:`Slot` (default: a review process, :class:`ProcessSlot`; Ray actors:
    :func:`nkieval.reward.ray_executor.ray_pool`). Every kind is fed by the same queue (:mod:`.affinity`)."""

    def __init__(self, workers: int | None = None, *, timeout_s: float | None = None,
                 slot: Callable[[], Slot] | None = None) -> None:
        n = workers or os.cpu_count() or 1
        if n < 1:
            raise ValueError(f"workers must be at least 1, got {n}")
        self.workers = n
        self.timeout_s = timeout_s
        self._jobs = AffinityQueue(n)  # (each worker is handed the tasks whose cases it holds)
        ctx = mp.get_context("spawn")
        self._make_slot: Callable[[], Slot] = slot if slot is not None else (lambda: ProcessSlot(ctx))
        self._threads = [threading.Thread(target=self._serve, args=(i,), daemon=True, name=f"nkieval-slot-{i}")
                         for i in range(n)]
        self._closed = False
        self.busy = 0
        #: each worker's slot, once its thread has made it (for inspection: the pool's threads alone use them)
        self.slots: list[Slot | None] = [None] * n
        #: each worker's case cache counters, as its last answer gave them (a restarted worker starts at 0)
        self.cache_stats: dict[int, dict[str, int]] = {}
        self._lock = threading.Lock()
        for th in self._threads:
            th.start()

    def submit(self, job: dict[str, Any], timeout_s: float | None = None,
               on_start: Callable[[], None] | None = None) -> Future[dict[str, Any]]:
        """Queue ``job``; ``on_start`` is called (in the pool's thread) when a worker takes it."""
        if self._closed:
            raise RuntimeError("the worker pool is closed")
        fut: Future[dict[str, Any]] = Future()
        self._jobs.put((job, fut, timeout_s if timeout_s is not None else self.timeout_s, on_start), job_key(job))
        return fut

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._jobs.put(None)
        for th in self._threads:
            th.join()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self, worker: int) -> None:
        slot = self.slots[worker] = self._make_slot()
        try:
            while True:
                if not slot.wait_ready(lambda: self._closed):  # (a worker takes a job only once it can run it)
                    return
                item = self._jobs.get(worker)
                if item is None:
                    return
                job, fut, limit, on_start = item
                if not fut.set_running_or_notify_cancel():
                    continue
                with self._lock:
                    self.busy += 1
                try:
                    if on_start is not None:
                        with contextlib.suppress(Exception):
                            on_start()
                    fut.set_result(self._run(slot, job, limit, worker))
                except BaseException as e:  # never leave a future unresolved
                    fut.set_result(_harness(job, f"pool: {type(e).__name__}: {e}"))
                finally:
                    with self._lock:
                        self.busy -= 1
        finally:
            slot.stop()

    def cache_totals(self) -> dict[str, int]:
        """The workers' case cache counters summed (entries, bytes, hits, misses, evictions, prepared_shed)."""
        with self._lock:
            stats = list(self.cache_stats.values())
        keys = ("entries", "bytes", "hits", "misses", "evictions", "prepared_shed")
        return {k: sum(int(s.get(k, 0)) for s in stats) for k in keys}

    def _run(self, slot: Slot, job: dict[str, Any], limit: float | None, worker: int = 0) -> dict[str, Any]:
        try:
            ans = slot.call(job, limit)
        except SlotFailed as e:
            return _harness(job, str(e))
        stats = ans.pop(CACHE_STATS, None)
        if isinstance(stats, dict):
            with self._lock:
                self.cache_stats[worker] = stats
        return ans


def job_key(job: dict[str, Any]) -> tuple[str, int] | None:
    """What a worker's case cache holds for a job: its task and seed (None: a fresh secret seed, never cached)."""
    seed = job.get("seed")
    return (str(job.get("task")), seed) if isinstance(seed, int) else None


def _harness(job: dict[str, Any], why: str) -> dict[str, Any]:
    return {"status": "harness-error", "reward": None, "task": str(job.get("task")), "error": why,
            "seed": job.get("seed"), "target": job.get("target")}

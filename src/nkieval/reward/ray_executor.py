"""Reviews on Ray: ``score_many(..., executor="ray")`` and ``nkieval serve --ray-address``.

The workers are Ray actors (one CPU each), fed by the same pool and queue as local review processes
(:class:`nkieval.reward.workers.WorkerPool`, :mod:`nkieval.reward.affinity`): a free actor takes the oldest job
of a task it ran recently, else one of a task no other actor holds, else the oldest job. An actor keeps its warm
state (sandbox zygote, tracer pool, case cache) for as long as the pool lives, so the samples of one task are
reviewed where that task's cases already are. Ray tasks could not do this: Ray hands a task to any idle worker
process, so an RL step's n samples of a prompt each started cold in up to n processes, and every process's case
cache had to hold every task.

A job past its time limit, or whose actor died, is a ``harness-error`` (retry it), and its actor is replaced by a
fresh one. An actor takes a job only once it is running: with more workers than the cluster has CPUs, the
actors that wait for a CPU take none (but after actors that die starting, a job is taken and fails with the reason). Ray is an optional extra (``pip install 'nkieval[ray]'``); every node needs
nkieval installed (docs/reward.md, "Ray on a cluster").
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

from nkieval.reward.workers import SlotFailed, WorkerPool

_INIT_LOCK = threading.Lock()
_ACTOR: list[Any] = []
#: seconds between checks, while a worker waits for its actor to start, that its pool has not been closed
_READY_POLL_S = 1.0
#: actors that die starting, in a row, before a worker takes a job anyway (to fail it with the reason)
_START_TRIES = 3


def ensure_ray(address: str | None = None) -> Any:
    """The ``ray`` module, connected: to ``address`` when given, else to the cluster this process already
    joined, else to a new local instance.

    Raises:
        RuntimeError: Ray is not installed (the message names the extra).
    """
    try:
        import ray
    except ImportError as e:
        raise RuntimeError("executor 'ray' needs Ray: pip install 'nkieval[ray]'") from e
    with _INIT_LOCK:
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     configure_logging=False, ignore_reinit_error=True)
        if not _ACTOR:
            _ACTOR.append(ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(ReviewActor))
    return ray


def cluster_cpus(address: str | None = None) -> int:
    """The CPUs of the Ray cluster at ``address`` (at least 1)."""
    return max(1, int(ensure_ray(address).cluster_resources().get("CPU", 1)))


class ReviewActor:
    """A Ray actor that reviews jobs one at a time, keeping its warm state between them (its class, made remote
    by :func:`ensure_ray`)."""

    def __init__(self) -> None:
        self._answered = self._settled = False

    def ping(self) -> int:
        """The actor's process id (it is running)."""
        import os

        return os.getpid()

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        from nkieval.reward.workers import answer_job, settle_collector

        if self._answered and not self._settled:
            # (as a review process does after its first answered job; an actor's method cannot run after its
            # answer has gone, so the collection comes before the second job)
            settle_collector()
            self._settled = True
        ans = answer_job(job)
        self._answered = self._answered or ans.get("status") != "harness-error"
        return ans


class ActorSlot:
    """One worker of a :class:`~nkieval.reward.workers.WorkerPool` as a Ray actor (made on first use, and again
    after it was stopped or died)."""

    def __init__(self, address: str | None = None) -> None:
        self.address = address
        self.actor: Any = None
        self._ready = False
        #: the running actor's process id, on its node (None before it is ready)
        self.pid: int | None = None

    def wait_ready(self, closed: Callable[[], bool]) -> bool:
        ray = ensure_ray(self.address)
        failed = 0
        while not self._ready:
            if failed >= _START_TRIES:
                # (actors that die starting, e.g. a node without nkieval: the next job is taken and fails with
                # Ray's reason, a harness error, rather than no job ever being answered)
                return not closed()
            try:
                ping = self._actor().ping.remote()
                while True:
                    if closed():
                        return False
                    done, _ = ray.wait([ping], timeout=_READY_POLL_S)
                    if done:
                        break
                self.pid = int(ray.get(ping))
                self._ready = True
            except Exception:  # (the actor died starting, or Ray failed: a fresh one)
                self.stop()
                failed += 1
        return not closed()

    def call(self, job: dict[str, Any], limit: float | None) -> dict[str, Any]:
        ray = ensure_ray(self.address)
        ref = self._actor().run.remote(job)
        try:
            done, _ = ray.wait([ref], timeout=limit)
            if done:
                return dict(ray.get(ref))
            why = f"the review ran past the request's time limit of {limit:g} s; its Ray actor was stopped"
        except Exception as e:  # the actor died, or Ray failed: retryable
            why = f"ray: {type(e).__name__}: {str(e)[:300]}"
        self.stop()
        raise SlotFailed(why)

    def _actor(self) -> Any:
        """The slot's actor, made if it has none (``ensure_ray`` has run)."""
        if self.actor is None:
            self.actor = _ACTOR[0].remote()
        return self.actor

    def stop(self) -> None:
        actor, self.actor, self._ready, self.pid = self.actor, None, False, None
        if actor is not None:
            import ray

            if ray.is_initialized():  # (else the actor went with the instance; never start one to kill it)
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)


_POOL: dict[str, Any] = {}
_POOL_LOCK = threading.Lock()


def ray_pool(workers: int | None = None, address: str | None = None) -> WorkerPool:
    """The process's pool of ``workers`` review actors on the cluster at ``address`` (default: one per CPU of the
    cluster), started on first use and kept for the next call; asked for with another size or address, the old
    pool is closed first (its actors hold the cluster's CPUs). :func:`close_pool` (and the process's exit) closes
    it."""
    n = workers or cluster_cpus(address)
    with _POOL_LOCK:
        pool = _POOL.get("pool")
        if pool is not None and (pool.workers, _POOL.get("address")) == (n, address):
            return pool
        if pool is not None:
            pool.close()
        else:
            import atexit

            atexit.register(close_pool)
        pool = _POOL["pool"] = WorkerPool(n, slot=lambda: ActorSlot(address))
        _POOL["address"] = address
        return pool


def close_pool() -> None:
    """Stop the process's review actors (they start again on the next use), giving their CPUs back."""
    with _POOL_LOCK:
        pool = _POOL.pop("pool", None)
        _POOL.pop("address", None)
    if pool is not None:
        pool.close()


def run_jobs(jobs: Sequence[dict[str, Any]], *, workers: int | None = None, timeout_s: float | None = None,
             address: str | None = None) -> list[dict[str, Any]]:
    """Run every job on the process's review actors (:func:`ray_pool`); answers in order. A job that runs past
    ``timeout_s`` or whose actor died is a ``harness-error`` answer."""
    pool = ray_pool(workers, address)
    futs = [pool.submit(j, timeout_s=timeout_s) for j in jobs]
    return [f.result() for f in futs]

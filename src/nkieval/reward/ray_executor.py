"""Reviews as Ray tasks: ``score_many(..., executor="ray")`` and ``nkieval serve --ray-address``.

Each job runs :func:`nkieval.reward.workers.run_job` in a Ray worker process (one CPU each). Ray keeps its
worker processes between tasks, so a worker's sandbox zygote, tracer pool and case cache stay warm for the
next job of the same task. Ray is an optional extra (``pip install 'nkieval[ray]'``); every node needs
nkieval installed (docs/reward.md, "Ray on a cluster").
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

_INIT_LOCK = threading.Lock()
_REMOTE: list[Any] = []


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
        if not _REMOTE:
            from nkieval.reward.workers import run_job

            _REMOTE.append(ray.remote(num_cpus=1, max_retries=0)(run_job))
    return ray


def submit(job: dict[str, Any], address: str | None = None) -> Any:
    """Start one job as a Ray task; its ObjectRef."""
    ensure_ray(address)
    return _REMOTE[0].remote(job)


def run_jobs(jobs: Sequence[dict[str, Any]], *, workers: int | None = None, timeout_s: float | None = None,
             address: str | None = None) -> list[dict[str, Any]]:
    """Run every job on Ray with at most ``workers`` in flight (None: the cluster's CPUs); answers in order.

    A task that fails (its worker died) or runs past ``timeout_s`` is a ``harness-error`` answer."""
    import time

    ray = ensure_ray(address)
    limit = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    out: list[dict[str, Any] | None] = [None] * len(jobs)
    pending: dict[Any, tuple[int, float]] = {}
    nxt = 0
    while nxt < len(jobs) or pending:
        while nxt < len(jobs) and len(pending) < limit:
            pending[_REMOTE[0].remote(jobs[nxt])] = (nxt, time.monotonic())
            nxt += 1
        step = 1.0
        if timeout_s is not None:
            first = min(t0 for _, t0 in pending.values())
            step = max(0.0, min(step, first + timeout_s - time.monotonic()))
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=step)
        for ref in ready:
            i, _t0 = pending.pop(ref)
            try:
                out[i] = dict(ray.get(ref))
            except Exception as e:  # the task's worker died or Ray failed: retryable
                out[i] = _harness(jobs[i], f"ray: {type(e).__name__}: {str(e)[:300]}")
        if timeout_s is not None:
            now = time.monotonic()
            for ref, (i, t0) in list(pending.items()):
                if now - t0 > timeout_s:
                    ray.cancel(ref, force=True)
                    pending.pop(ref)
                    out[i] = _harness(jobs[i], f"the review ran past the time limit of {timeout_s:g} s; "
                                               "its Ray task was cancelled")
    return [x if x is not None else _harness(j, "no answer") for x, j in zip(out, jobs)]


def _harness(job: dict[str, Any], why: str) -> dict[str, Any]:
    return {"status": "harness-error", "reward": None, "task": str(job.get("task")), "error": why,
            "seed": job.get("seed"), "target": job.get("target")}

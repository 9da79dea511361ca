"""``score_many``: many candidates at once, in review processes (``executor="local"``) or on a Ray cluster
(``executor="ray"``); ``score_many_async`` and ``score_async`` for asyncio code.

Before anything runs, each item's kernel is extracted (in this process: it is text work) and identical
requests are merged: two items with the same task, extracted source (SHA-256), seed and target are reviewed
once and get the same result. Items without a seed are never merged (each draws its own secret seed).
Results come back in the items' order. An item with an unknown task or target is a ``bad-request`` result;
one whose review fails in the judge a ``harness-error`` (retry it).
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from nkieval.reward.extract import extract_kernel
from nkieval.reward.result import SHAPINGS, RewardResult
from nkieval.tasks import Task, TaskError

Executor = Literal["local", "ray"]
EXECUTORS: tuple[str, ...] = ("local", "ray")


@dataclass(frozen=True)
class ScoreItem:
    """One candidate to score: a task (built-in id or directory), a response (or source with ``extract=False``),
    and optionally its seed and target (None: the batch's)."""

    task: str
    response: str
    seed: int | None = None
    target: str | None = None
    extract: bool = True


ItemLike = ScoreItem | Mapping[str, Any] | Sequence[Any]


def as_item(x: ItemLike) -> ScoreItem:
    """A :class:`ScoreItem` from an item, a mapping with its field names, or a (task, response[, seed]) tuple."""
    if isinstance(x, ScoreItem):
        return x
    if isinstance(x, Mapping):
        resp = x.get("response", x.get("source"))
        extract = bool(x.get("extract", "response" in x))
        return ScoreItem(str(x["task"]), str(resp), x.get("seed"), x.get("target"), extract)
    if isinstance(x, Sequence) and not isinstance(x, str) and 2 <= len(x) <= 4:
        return ScoreItem(str(x[0]), str(x[1]), *(list(x[2:])))
    raise TypeError(f"an item is a ScoreItem, a mapping or a (task, response[, seed[, target]]) tuple, not {x!r}")


def plan_jobs(items: Sequence[ScoreItem], *, seed: int | None, target: str | None, full_report: bool,
              shaping: str, review_kw: Mapping[str, Any] | None = None, feedback: bool = True
              ) -> tuple[list[RewardResult | None], list[dict[str, Any]], list[int]]:
    """(results known without a review, the distinct jobs to run, each item's job index or -1)."""
    from nkieval.review.verdict import UsageError, check_target
    from nkieval.reward.core import resolve_task

    early: list[RewardResult | None] = []
    jobs: list[dict[str, Any]] = []
    where: list[int] = []
    seen: dict[tuple[Any, ...], int] = {}
    for it in items:
        s = it.seed if it.seed is not None else seed
        try:
            task = resolve_task(it.task)
            tgt = check_target(task, it.target or target)
        except (TaskError, UsageError) as e:
            early.append(RewardResult(status="bad-request", reward=None, task=str(it.task), error=str(e), seed=s))
            where.append(-1)
            continue
        if it.extract:
            ex = extract_kernel(it.response, task.kernel)
            src, why = ex.source, ex.reason
        else:
            src, why = it.response, "the source as given"
        if src is None:
            early.append(RewardResult(status="no-kernel", reward=0.0, task=task.id, verdict="fail",
                                      verdict_reason="no-kernel", score=0.0, target=tgt, seed=s, extraction=why,
                                      feedback=f"verdict: fail (no-kernel); {why}. Answer with one ```python "
                                      f"block that defines {task.kernel}()."))
            where.append(-1)
            continue
        digest = hashlib.sha256(src.encode()).hexdigest()
        key = (str(task.directory), digest, s, tgt)
        early.append(None)
        if s is not None and key in seen:
            where.append(seen[key])
            continue
        seen[key] = len(jobs)
        where.append(len(jobs))
        jobs.append({"task": _portable(task), "source": src, "seed": s, "target": tgt, "extraction": why,
                     "full_report": full_report, "shaping": shaping, "review_kw": dict(review_kw or {}),
                     "feedback": feedback})
    return early, jobs, where


def _portable(task: Task) -> str:
    """How a job names its task: a built-in task by its id (the same on every node of a cluster, wherever nkieval
    is installed), any other by its directory."""
    from nkieval.tasks.loader import BUILTIN_ROOT

    return task.id if task.directory.resolve() == (BUILTIN_ROOT / task.id).resolve() else str(task.directory)


def score_many(items: Iterable[ItemLike], *, workers: int | None = None, executor: Executor = "local",
               seed: int | None = None, target: str | None = None, full_report: bool = False,
               shaping: str = "tiered", timeout_s: float | None = None, ray_address: str | None = None,
               feedback: bool = True, **review_kw: Any) -> list[RewardResult]:
    """Score every item; results in the items' order (see the module docstring).

    ``workers``: review processes (``local``; default: the CPU count, 1 reviews in this process) or review actors
    (``ray``; default: the cluster's CPUs; kept for the next call: :func:`nkieval.reward.ray_executor.ray_pool`).
    ``seed``/``target``: for items that give none.
    ``timeout_s``: per review (``local`` with workers > 1: the worker is stopped and the item is a
    ``harness-error``; Ray: the actor is stopped, same result). ``ray_address``: ``ray.init``'s address
    (None: a running cluster this process is connected to, or a local one). ``feedback=False``: brief reviews
    (:func:`nkieval.reward.score`'s ``feedback``): the same rewards, verdicts and levels, less judge time.
    """
    if shaping not in SHAPINGS:
        raise ValueError(f"unknown shaping {shaping!r}; one of {', '.join(SHAPINGS)}")
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; one of {', '.join(EXECUTORS)}")
    its = [as_item(x) for x in items]
    early, jobs, where = plan_jobs(its, seed=seed, target=target, full_report=full_report, shaping=shaping,
                                   review_kw=review_kw, feedback=feedback)
    if executor == "ray":
        from nkieval.reward.ray_executor import run_jobs as ray_run

        answers = ray_run(jobs, workers=workers, timeout_s=timeout_s, address=ray_address)
    else:
        answers = run_local(jobs, workers=workers, timeout_s=timeout_s)
    out: list[RewardResult] = []
    for e, w in zip(early, where):
        out.append(e if e is not None else RewardResult.from_dict(answers[w]))
    return out


_POOLS: dict[int, Any] = {}
_POOLS_LOCK = threading.Lock()


def shared_pool(workers: int) -> Any:
    """The process's :class:`~nkieval.reward.workers.WorkerPool` of ``workers`` processes, started on first use and
    kept for the next call (an RL loop calls ``score_many`` once per step: its workers stay warm); closed at exit."""
    from nkieval.reward.workers import WorkerPool

    with _POOLS_LOCK:
        pool = _POOLS.get(workers)
        if pool is None:
            if not _POOLS:
                atexit.register(close_pools)
            pool = _POOLS[workers] = WorkerPool(workers)
        return pool


def close_pools() -> None:
    """Stop the shared worker pools and the process's Ray actors (they start again on the next ``score_many``)."""
    from nkieval.reward.ray_executor import close_pool  # (Ray itself is imported only by a pool that uses it)

    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for p in pools:
        p.close()
    close_pool()


def run_local(jobs: Sequence[dict[str, Any]], *, workers: int | None = None,
              timeout_s: float | None = None) -> list[dict[str, Any]]:
    """Run jobs in this process (``workers=1`` without a time limit) or in the shared pool of ``workers``."""
    from nkieval.reward.workers import run_job

    n = workers or os.cpu_count() or 1
    if n == 1 and timeout_s is None:
        return [run_job(j) for j in jobs]
    pool = shared_pool(n)
    futs = [pool.submit(j, timeout_s=timeout_s) for j in jobs]
    return [f.result() for f in futs]


async def score_many_async(items: Iterable[ItemLike], **kw: Any) -> list[RewardResult]:
    """:func:`score_many` without blocking the event loop (it runs in a thread; the reviews in processes)."""
    its = list(items)
    return await asyncio.to_thread(score_many, its, **kw)


async def score_async(task: Task | str | Path, response_or_source: str | Path, **kw: Any) -> RewardResult:
    """:func:`nkieval.reward.score` without blocking the event loop (the review runs in a thread)."""
    from nkieval.reward.core import score

    return await asyncio.to_thread(score, task, response_or_source, **kw)

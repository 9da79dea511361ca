"""The reward service without HTTP: admission (a bounded queue), the durable store, the review backend (a
:class:`~nkieval.reward.workers.WorkerPool` of one review process per core, or of one Ray actor per CPU of a
cluster) and the metrics.

A request is a :class:`~nkieval.reward.batch.ScoreItem`-like dict. Its id is the client's ``request_id`` or,
without one, the SHA-256 of the request itself, so the same request sent twice is one request (retry freely).
A kernel that cannot be found (``no-kernel``) is answered at once; a malformed request raises
:class:`BadRequest` before anything is stored; a full queue raises :class:`QueueFull` (HTTP 429).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nkieval.reward.batch import as_item, plan_jobs
from nkieval.reward.result import SHAPINGS
from nkieval.reward.serve.store import Row, Store

#: Largest response or source text accepted (characters): beyond it, HTTP 413.
MAX_TEXT_CHARS = 512 * 1024


class BadRequest(ValueError):
    """A malformed request (HTTP 400): an unknown task or target, a missing field."""


class TooLarge(ValueError):
    """A response or source over :data:`MAX_TEXT_CHARS` (HTTP 413)."""


class QueueFull(RuntimeError):
    """The queue holds ``max_queue`` requests (HTTP 429); ``retry_after_s`` estimates when there is room."""

    def __init__(self, retry_after_s: int, depth: int) -> None:
        super().__init__(f"the queue is full ({depth} requests); retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


@dataclass
class Metrics:
    accepted: int = 0
    deduplicated: int = 0
    rejected_full: int = 0
    rejected_bad: int = 0
    recovered: int = 0
    review_seconds_sum: float = 0.0
    review_count: int = 0

    def __post_init__(self) -> None:
        self.results: dict[str, int] = {}


def request_id(req: Mapping[str, Any]) -> str:
    """The client's ``request_id``, else the SHA-256 of the request's canonical JSON (its content)."""
    if req.get("request_id"):
        return str(req["request_id"])
    keys = ("task", "response", "source", "seed", "target", "shaping", "full_report")
    content = {k: req.get(k) for k in keys}
    if req.get("feedback") is False:  # (only then: the ids of requests with feedback stay what they were)
        content["feedback"] = False
    canon = json.dumps(content, sort_keys=True, default=str)
    return "sha256-" + hashlib.sha256(canon.encode()).hexdigest()[:32]


def _settled(row: Row | None) -> bool:
    """A stored request with a result that a resend returns as is (a harness error is run again)."""
    return row is not None and row.state == "done" and (row.result or {}).get("status") != "harness-error"


class RewardService:
    """Admission, storage and execution of review requests (see the module docstring)."""

    def __init__(self, db: str | Path, *, workers: int | None = None, max_queue: int | None = None,
                 timeout_s: float = 900.0, ray_address: str | None = None,
                 case_timeout_s: float | None = None, task_roots: Sequence[str | Path] = ()) -> None:
        self.workers = workers or os.cpu_count() or 1
        self._sizes_given = (workers is not None, max_queue is not None)
        self.max_queue = max_queue if max_queue is not None else 8 * self.workers
        self.timeout_s = float(timeout_s)
        self.ray_address = ray_address
        self.case_timeout_s = case_timeout_s
        #: directories whose task directories requests may name (built-in task ids are always allowed)
        self.task_roots = [Path(r).resolve() for r in task_roots]
        self.store = Store(db)
        self.metrics = Metrics()
        self._lock = threading.RLock()
        self._pending: dict[str, Future[dict[str, Any]]] = {}
        self._running: set[str] = set()
        self._pool: Any = None
        self.started = time.time()

    # ---------------------------------------------------------------- life cycle
    def start(self) -> None:
        """Start the backend and run again every request a previous process accepted and did not finish."""
        from nkieval.reward.workers import WorkerPool

        if self.ray_address is None:
            self._pool = WorkerPool(self.workers)
        else:  # (review actors on the cluster, fed as the local pool is; its own, closed with the service)
            from nkieval.reward.ray_executor import ActorSlot, cluster_cpus

            address = self.ray_address
            if not self._sizes_given[0]:
                self.workers = cluster_cpus(address)
                if not self._sizes_given[1]:
                    self.max_queue = 8 * self.workers
            self._pool = WorkerPool(self.workers, slot=lambda: ActorSlot(address))
        for row in self.store.unfinished():
            self.metrics.recovered += 1
            if "known" in row.job:  # answered without a review; the crash came before its result was stored
                self.store.finish(row.id, row.job["known"])
            else:
                self._launch(row.id, row.job)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        self.store.close()

    # ---------------------------------------------------------------- requests
    def prepare(self, req: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None, dict[str, Any] | None]:
        """(request id, the job to run or None, the result already known or None); raises BadRequest/TooLarge."""
        text = req.get("response") if req.get("response") is not None else req.get("source")
        if not req.get("task") or text is None:
            raise BadRequest("a request needs 'task' and one of 'response' (a model's answer) or 'source'")
        if len(str(text)) > MAX_TEXT_CHARS:
            raise TooLarge(f"the {'response' if req.get('response') is not None else 'source'} has {len(str(text))} "
                           f"characters; the limit is {MAX_TEXT_CHARS}")
        self._check_task(str(req["task"]))
        shaping = req.get("shaping") or "tiered"
        if shaping not in SHAPINGS:
            raise BadRequest(f"unknown shaping {shaping!r}; one of {', '.join(SHAPINGS)}")
        item = as_item({k: req.get(k) for k in ("task", "response", "source", "seed", "target")
                        if req.get(k) is not None})
        early, jobs, _ = plan_jobs([item], seed=None, target=None, full_report=bool(req.get("full_report")),
                                   shaping=shaping, feedback=req.get("feedback") is not False)
        rid = request_id(req)
        if early[0] is not None:
            if early[0].status == "bad-request":
                raise BadRequest(early[0].error)
            return rid, None, early[0].to_dict()
        job = jobs[0]
        limit = req.get("timeout_s")
        job["timeout_s"] = min(self.timeout_s, float(limit)) if limit else self.timeout_s
        if self.case_timeout_s is not None:
            job["review_kw"] = {**job.get("review_kw", {}), "case_timeout_s": self.case_timeout_s}
        return rid, job, None

    def _check_task(self, task: str) -> None:
        """A built-in task id, or a task directory under one of ``task_roots``: a request must not make the judge
        load (and run the reference code of) a directory of its choosing."""
        from nkieval.tasks.loader import BUILTIN_ROOT

        plain = "/" not in task and "\\" not in task and task not in (".", "..")
        if plain and (BUILTIN_ROOT / task / "task.toml").is_file():
            return
        p = Path(task).resolve()
        if any(p.is_relative_to(r) for r in self.task_roots) and (p / "task.toml").is_file():
            return
        raise BadRequest(f"unknown task {task!r}: a built-in task id"
                         + (f" or a task directory under {', '.join(map(str, self.task_roots))}"
                            if self.task_roots else " (start the service with --task-root DIR to serve others)"))

    def submit_many(self, reqs: Sequence[Mapping[str, Any]]) -> list[Row]:
        """Admit every request or none (BadRequest, TooLarge, QueueFull); their rows, in order."""
        try:
            prepared = [self.prepare(r) for r in reqs]
        except (BadRequest, TooLarge):
            self.metrics.rejected_bad += 1
            raise
        with self._lock:
            fresh = sum(1 for rid, job, _ in prepared if job is not None and rid not in self._pending
                        and not _settled(self.store.get(rid)))
            depth = len(self._pending)
            if fresh and depth + fresh > self.max_queue:
                self.metrics.rejected_full += 1
                raise QueueFull(self.retry_after(depth + fresh), depth)
            entries = [(rid, job if job is not None else {"known": known}) for rid, job, known in prepared]
            rows = self.store.add_many(entries)
            out = []
            for (rid, job, known), (row, new) in zip(prepared, rows):
                if not new:
                    self.metrics.deduplicated += 1
                    out.append(row)
                    continue
                self.metrics.accepted += 1
                if job is None:  # answered without a review (no kernel found)
                    self.store.finish(rid, known or {})
                    self._count(known or {})
                    out.append(Row(rid, "done", row.job, known, 0))
                    continue
                self._launch(rid, row.job)
                out.append(row)
            return out

    def retry_after(self, depth: int) -> int:
        """Seconds until the queue has room, from the mean review time so far (at least 1)."""
        mean = self.metrics.review_seconds_sum / self.metrics.review_count if self.metrics.review_count else 5.0
        return max(1, math.ceil(mean * max(1, depth - self.max_queue + 1) / self.workers))

    def get(self, rid: str) -> Row | None:
        return self.store.get(rid)

    def future(self, rid: str) -> Future[dict[str, Any]] | None:
        with self._lock:
            return self._pending.get(rid)

    # ---------------------------------------------------------------- execution
    def _launch(self, rid: str, job: dict[str, Any]) -> None:
        if rid in self._pending:
            return
        limit = float(job.get("timeout_s") or self.timeout_s)
        fut = self._run(rid, job, limit)
        self._pending[rid] = fut
        t0 = time.perf_counter()
        fut.add_done_callback(lambda f, rid=rid, t0=t0: self._done(rid, f, t0))

    def _run(self, rid: str, job: dict[str, Any], limit: float) -> Future[dict[str, Any]]:
        return self._pool.submit(job, timeout_s=limit, on_start=lambda: self.store.running(rid))

    def _done(self, rid: str, fut: Future[dict[str, Any]], t0: float) -> None:
        try:
            res = fut.result()
        except Exception as e:  # never leave a request without a result
            res = {"status": "harness-error", "reward": None, "error": f"{type(e).__name__}: {e}"}
        try:
            self.store.finish(rid, res)
        finally:
            with self._lock:
                self._pending.pop(rid, None)
                self._count(res)
                self.metrics.review_count += 1
                self.metrics.review_seconds_sum += time.perf_counter() - t0

    def _count(self, res: Mapping[str, Any]) -> None:
        st = str(res.get("status", "unknown"))
        self.metrics.results[st] = self.metrics.results.get(st, 0) + 1

    # ---------------------------------------------------------------- observability
    def health(self) -> dict[str, Any]:
        with self._lock:
            depth = len(self._pending)
        busy = self._pool.busy if self._pool is not None else None
        return {"status": "ok", "backend": "local" if self.ray_address is None else "ray", "workers": self.workers,
                "queue_depth": depth, "max_queue": self.max_queue, "running": busy,
                "uptime_s": round(time.time() - self.started, 1)}

    def prometheus(self) -> str:
        """The metrics in Prometheus' text exposition format (version 0.0.4)."""
        m = self.metrics
        h = self.health()
        lines = [
            "# HELP nkieval_requests_accepted_total Requests accepted (stored) by the service.",
            "# TYPE nkieval_requests_accepted_total counter", f"nkieval_requests_accepted_total {m.accepted}",
            "# HELP nkieval_requests_deduplicated_total Requests whose id was already stored (answered from it).",
            "# TYPE nkieval_requests_deduplicated_total counter",
            f"nkieval_requests_deduplicated_total {m.deduplicated}",
            "# HELP nkieval_requests_rejected_total Requests refused, by reason.",
            "# TYPE nkieval_requests_rejected_total counter",
            f'nkieval_requests_rejected_total{{reason="queue-full"}} {m.rejected_full}',
            f'nkieval_requests_rejected_total{{reason="bad-request"}} {m.rejected_bad}',
            "# HELP nkieval_requests_recovered_total Unfinished requests run again after a restart.",
            "# TYPE nkieval_requests_recovered_total counter", f"nkieval_requests_recovered_total {m.recovered}",
            "# HELP nkieval_results_total Results stored, by status.", "# TYPE nkieval_results_total counter",
        ]
        lines += [f'nkieval_results_total{{status="{s}"}} {n}' for s, n in sorted(m.results.items())]
        lines += [
            "# HELP nkieval_review_seconds Wall time from launch to result.", "# TYPE nkieval_review_seconds summary",
            f"nkieval_review_seconds_sum {m.review_seconds_sum:.6f}", f"nkieval_review_seconds_count {m.review_count}",
            "# HELP nkieval_queue_depth Requests accepted and not finished.", "# TYPE nkieval_queue_depth gauge",
            f"nkieval_queue_depth {h['queue_depth']}",
            "# HELP nkieval_queue_capacity The queue's bound (429 beyond it).", "# TYPE nkieval_queue_capacity gauge",
            f"nkieval_queue_capacity {self.max_queue}",
            "# HELP nkieval_workers Review processes (or Ray actors) at once.", "# TYPE nkieval_workers gauge",
            f"nkieval_workers {self.workers}",
        ]
        if h["running"] is not None:
            lines += ["# HELP nkieval_running Reviews running now.", "# TYPE nkieval_running gauge",
                      f"nkieval_running {h['running']}"]
        if self._pool is not None:
            lines += _case_cache_lines(self._pool.cache_totals())
        return "\n".join(lines) + "\n"


def _case_cache_lines(c: dict[str, int]) -> list[str]:
    """The review workers' case caches, summed over the workers (what a warm review saves: docs/reward.md, "Many
    tasks per worker")."""
    return [
        "# HELP nkieval_case_cache_bytes Bytes held by the workers' case caches.",
        "# TYPE nkieval_case_cache_bytes gauge", f"nkieval_case_cache_bytes {c['bytes']}",
        "# HELP nkieval_case_cache_entries Cases held by the workers' case caches.",
        "# TYPE nkieval_case_cache_entries gauge", f"nkieval_case_cache_entries {c['entries']}",
        "# HELP nkieval_case_cache_lookups_total Case lookups in the workers' case caches, by outcome.",
        "# TYPE nkieval_case_cache_lookups_total counter",
        f'nkieval_case_cache_lookups_total{{outcome="hit"}} {c["hits"]}',
        f'nkieval_case_cache_lookups_total{{outcome="miss"}} {c["misses"]}',
        "# HELP nkieval_case_cache_evictions_total Cases evicted whole from the workers' case caches.",
        "# TYPE nkieval_case_cache_evictions_total counter", f"nkieval_case_cache_evictions_total {c['evictions']}",
        "# HELP nkieval_case_cache_checks_dropped_total Prepared numerics checks dropped to stay within the bound.",
        "# TYPE nkieval_case_cache_checks_dropped_total counter",
        f"nkieval_case_cache_checks_dropped_total {c['prepared_shed']}",
    ]

"""The worker pool over slots of any kind (review processes, Ray actors): a worker takes a job only once its slot
is ready, a slot that fails makes that job a harness error and the worker goes on, the slots' case cache counters
reach the pool, and closing never waits for a slot that cannot start. Stand-in slots, no reviews."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from nkieval.reward.workers import CACHE_STATS, SlotFailed, WorkerPool


class FakeSlot:
    """Answers ``{"status": "ok", "by": name}``; ``ready`` gates it; a job ``{"fail": why}`` fails it."""

    def __init__(self, name: str, ready: threading.Event, ran: list[tuple[str, Any]]) -> None:
        self.name, self.ready, self.ran = name, ready, ran
        self.stopped = 0

    def wait_ready(self, closed: Any) -> bool:
        while not self.ready.wait(0.02):
            if closed():
                return False
        return not closed()

    def call(self, job: dict[str, Any], limit: float | None) -> dict[str, Any]:
        self.ran.append((self.name, job["n"]))
        if "fail" in job:
            self.stop()
            raise SlotFailed(job["fail"])
        time.sleep(0.01)
        return {"status": "ok", "by": self.name, CACHE_STATS: {"entries": 1, "hits": job["n"], "misses": 1}}

    def stop(self) -> None:
        self.stopped += 1


def _pool(readiness: list[threading.Event], ran: list[tuple[str, Any]]) -> tuple[WorkerPool, list[FakeSlot]]:
    made: list[FakeSlot] = []
    lock = threading.Lock()

    def make() -> FakeSlot:
        with lock:
            s = FakeSlot(f"s{len(made)}", readiness[len(made)], ran)
            made.append(s)
            return s

    return WorkerPool(len(readiness), slot=make), made


def test_a_worker_whose_slot_is_not_ready_takes_no_job_and_close_does_not_wait_for_it() -> None:
    ran: list[tuple[str, Any]] = []
    ready, never = threading.Event(), threading.Event()
    ready.set()
    pool, slots = _pool([never, ready], ran)
    answers = [f.result(timeout=30) for f in [pool.submit({"task": "t", "seed": 1, "n": i}) for i in range(6)]]
    ready_name = next(s.name for s in slots if s.ready is ready)
    assert [a["by"] for a in answers] == [ready_name] * 6
    assert sorted(n for _, n in ran) == list(range(6))
    t0 = time.monotonic()
    pool.close()
    assert time.monotonic() - t0 < 5
    assert all(s.stopped >= 1 for s in slots)  # (every slot is stopped when its worker ends, ready or not)


def test_a_failed_slot_makes_that_job_a_harness_error_and_its_worker_goes_on() -> None:
    ran: list[tuple[str, Any]] = []
    ready = threading.Event()
    ready.set()
    pool, _ = _pool([ready], ran)
    try:
        bad = pool.submit({"task": "t", "seed": 1, "n": 0, "fail": "its actor died"}).result(timeout=30)
        good = pool.submit({"task": "t", "seed": 1, "n": 1}).result(timeout=30)
    finally:
        pool.close()
    assert bad["status"] == "harness-error" and bad["reward"] is None and bad["error"] == "its actor died"
    assert bad["task"] == "t" and bad["seed"] == 1
    assert good["status"] == "ok" and CACHE_STATS not in good


def test_the_slots_case_cache_counters_reach_the_pool() -> None:
    ran: list[tuple[str, Any]] = []
    a, b = threading.Event(), threading.Event()
    a.set()
    pool, _ = _pool([a, b], ran)
    try:
        for f in [pool.submit({"task": "t", "seed": 1, "n": n}) for n in (3, 5)]:
            assert CACHE_STATS not in f.result(timeout=30)
        assert pool.cache_totals()["hits"] == 5  # (one slot ran both: its last answer's counters)
        b.set()
        time.sleep(0.1)
        futs = [pool.submit({"task": "u", "seed": 2, "n": n}) for n in (7, 11, 13, 17)]
        for f in futs:
            f.result(timeout=30)
    finally:
        pool.close()
    by = {name: max(n for nm, n in ran if nm == name) for name, _ in ran}
    assert pool.cache_totals()["hits"] == sum(by.values())
    assert pool.cache_totals()["entries"] == len(by)


@pytest.mark.parametrize("workers", [1, 3])
def test_every_submitted_job_is_answered_once(workers: int) -> None:
    ran: list[tuple[str, Any]] = []
    evs = [threading.Event() for _ in range(workers)]
    for e in evs:
        e.set()
    pool, _ = _pool(evs, ran)
    try:
        futs = [pool.submit({"task": f"t{i % 4}", "seed": 1, "n": i}) for i in range(40)]
        answers = [f.result(timeout=60) for f in futs]
    finally:
        pool.close()
    assert all(a["status"] == "ok" for a in answers)
    assert sorted(n for _, n in ran) == list(range(40))


def test_a_ray_review_actor_settles_its_collector_once_before_the_job_after_its_first_answered_one(monkeypatch):
    import nkieval.reward.workers as w
    from nkieval.reward.ray_executor import ReviewActor

    events: list[str] = []
    monkeypatch.setattr(w, "settle_collector", lambda: events.append("settle"))

    def job(j):
        events.append(f"job {j['n']}")
        if j.get("broken"):
            raise RuntimeError("the harness broke")
        return {"status": "ok"}

    monkeypatch.setattr(w, "run_job", job)
    actor = ReviewActor()  # (the plain class: Ray makes it remote)
    answers = [actor.run({"task": "t", "n": n, **({"broken": True} if n == 0 else {})}) for n in range(4)]
    assert [a["status"] for a in answers] == ["harness-error", "ok", "ok", "ok"]
    assert all(CACHE_STATS in a for a in answers)  # (the pool takes them off)
    assert events == ["job 0", "job 1", "settle", "job 2", "job 3"]

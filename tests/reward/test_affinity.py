"""The worker pool's queue hands each review process the tasks whose cases it already holds."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.reward.affinity import AffinityQueue
from nkieval.reward.workers import job_key


def _fill(q: AffinityQueue, spec: str) -> None:
    """``"AAAABBBB"``: jobs named by key and position (``A0``, ``A1``, ...)."""
    for i, k in enumerate(spec):
        q.put(f"{k}{i}", k)


def test_two_workers_split_an_rl_steps_grouped_tasks_between_them():
    q = AffinityQueue(2)
    _fill(q, "AAAABBBBCCCCDDDD")
    seen: dict[int, list[str]] = {0: [], 1: []}
    for turn in range(16):
        w = turn % 2
        seen[w].append(q.get(w)[0])
    # each task's candidates stay with one process; a FIFO queue would give each process every task
    assert {w: sorted(set(v)) for w, v in seen.items()} == {0: ["A", "C"], 1: ["B", "D"]}


def test_a_free_worker_helps_with_another_workers_task_rather_than_wait():
    q = AffinityQueue(2)
    _fill(q, "AAAA")
    assert [q.get(0), q.get(1), q.get(1), q.get(0)] == ["A0", "A1", "A2", "A3"]


def test_a_job_passed_over_patience_times_is_taken_next():
    q = AffinityQueue(2, patience=3)
    q.put("a0", "A")
    q.put("b0", "B")
    assert q.get(0) == "a0" and q.get(1) == "b0"
    q.put("a1", "A")  # worker 0's task, while worker 1 keeps finding its own task's jobs behind it
    for i in range(1, 11):
        q.put(f"b{i}", "B")
    assert [q.get(1) for _ in range(5)] == ["b1", "b2", "b3", "a1", "b4"]


def test_jobs_without_a_key_and_stop_markers_keep_their_order():
    q = AffinityQueue(2)
    q.put("x0")
    q.put("A1", "A")
    q.put(None)  # a stop marker: only ever taken at the head
    assert q.get(1) == "x0" and q.get(1) == "A1" and q.get(0) is None


def test_the_job_key_is_task_and_seed_and_none_without_a_seed():
    assert job_key({"task": "rmsnorm", "seed": 5}) == ("rmsnorm", 5)
    assert job_key({"task": "rmsnorm", "seed": None}) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("ABCDE."), min_size=1, max_size=40), st.integers(1, 4),
       st.lists(st.integers(0, 3), min_size=40, max_size=40))
def test_every_job_is_handed_out_once_and_none_waits_past_its_patience(spec, workers, turns):
    q = AffinityQueue(workers)
    for i, k in enumerate(spec):
        q.put(i, None if k == "." else k)
    order = [q.get(t % workers) for t in turns[:len(spec)]]
    assert sorted(order) == list(range(len(spec))) and q.qsize() == 0
    # each hand-out takes the head or passes it over, and a head passed over ``patience`` times is taken: job j is
    # handed out within (j + 1) * (patience + 1) hand-outs
    for place, job in enumerate(order):
        assert place < (job + 1) * (q.patience + 1)


def test_a_waiting_consumer_wakes_on_put():
    q = AffinityQueue(1)
    got: list[str] = []
    th = threading.Thread(target=lambda: got.append(q.get(0)))
    th.start()
    q.put("A0", "A")
    th.join(5)
    assert got == ["A0"]

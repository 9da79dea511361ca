"""``score_many``: order, deduplication, bad requests, review processes, the per-job time limit."""

import asyncio

import pytest
from reward_helpers import SEED

from nkieval.reward import ScoreItem, score_many, score_many_async
from nkieval.reward.batch import plan_jobs


def test_plan_merges_identical_requests_and_keeps_order(responses):
    items = [ScoreItem("vector_add", responses["expert"], SEED),
             ScoreItem("vector_add", "Same kernel, other words:\n" + responses["expert"], SEED),
             ScoreItem("vector_add", responses["expert"], SEED + 1),
             ScoreItem("vector_add", responses["expert"]),  # no seed: never merged
             ScoreItem("vector_add", responses["expert"]),
             ScoreItem("vector_add", responses["none"], SEED),
             ScoreItem("no_such_task", responses["expert"], SEED),
             ScoreItem("vector_add", responses["expert"], SEED, target="trn9")]
    early, jobs, where = plan_jobs(items, seed=None, target=None, full_report=False, shaping="tiered")
    assert where[:5] == [0, 0, 1, 2, 3] and len(jobs) == 4
    assert [e.status if e else None for e in early] == [None] * 5 + ["no-kernel", "bad-request", "bad-request"]
    assert "trn9" in early[7].error


def test_score_many_in_processes_matches_score(responses, scored):
    items = [("vector_add", responses["flawed"]), ("vector_add", responses["expert"]),
             {"task": "vector_add", "response": responses["hostile"]}, ("vector_add", responses["none"]),
             ("vector_add", responses["expert"]), ("nope", responses["expert"])]
    rs = score_many(items, workers=2, seed=SEED)
    assert [r.status for r in rs] == ["scored", "scored", "scored", "no-kernel", "scored", "bad-request"]
    assert rs[0].reward == scored("flawed").reward and rs[1].reward == scored("expert").reward
    assert rs[2].reward == 0.0 and rs[4] == rs[1]
    assert rs[0].feedback == scored("flawed").feedback  # deterministic given the seed
    from nkieval.reward import batch

    pool = batch.shared_pool(2)
    again = score_many([("vector_add", responses["flawed"])], workers=2, seed=SEED)[0]
    assert (again.reward, again.feedback, again.levels) == (rs[0].reward, rs[0].feedback, rs[0].levels)
    assert batch.shared_pool(2) is pool  # the next call reuses the warm workers


def test_time_limit_stops_the_worker_and_is_retryable(responses):
    rs = score_many([("vector_add", responses["expert"])], workers=1, seed=SEED, timeout_s=0.2)
    assert rs[0].status == "harness-error" and rs[0].reward is None and rs[0].retryable
    assert "time limit" in rs[0].error


def test_score_many_async_in_this_process(responses, scored):
    rs = asyncio.run(score_many_async([("vector_add", responses["flawed"])], workers=1, seed=SEED))
    assert rs[0].reward == scored("flawed").reward


def test_bad_executor_and_item():
    with pytest.raises(ValueError, match="executor"):
        score_many([], executor="dask")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        score_many([42])  # type: ignore[list-item]



def test_a_stop_signal_during_the_workers_own_shutdown_is_ignored(monkeypatch):
    """A worker whose job pipe closed is on its way out, shutting its sandbox down (atexit); the pool's stop
    SIGTERM, sent right after closing the pipe, used to break into that shutdown ("Exception ignored in atexit
    callback ... SystemExit: 143"). Before the loop ends, the signal still ends the worker."""
    import signal

    from nkieval.reward import workers

    monkeypatch.setattr(workers, "_EXITING", [False])
    with pytest.raises(SystemExit) as e:
        workers._on_term(signal.SIGTERM, None)
    assert e.value.code == 128 + signal.SIGTERM
    assert workers._on_term(signal.SIGTERM, None) is None  # the first one started the way out

    monkeypatch.setattr(workers, "_EXITING", [False])

    class Closed:
        def recv(self):
            raise EOFError

    monkeypatch.setattr(workers.os, "setpgrp", lambda: None)
    monkeypatch.setattr(workers.signal, "signal", lambda *a: None)
    workers._worker_main(Closed())  # the pipe closed: the loop ends ...
    assert workers._on_term(signal.SIGTERM, None) is None  # ... and a stop signal no longer raises

"""Reviews on a local Ray instance: ``score_many(..., executor="ray")`` (review actors fed by the worker pool),
``suite run --executor ray`` and the service's Ray backend."""

import time

import pytest
from reward_helpers import SEED

ray = pytest.importorskip("ray", reason="Ray is not installed (the 'ray' extra; .ci/run installs it)")


@pytest.fixture(scope="module")
def local_ray():
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    from nkieval.reward.batch import close_pools

    close_pools()
    ray.shutdown()


def _actor_ids(pool):
    return [s.actor._actor_id.hex() if s is not None and s.actor is not None else None for s in pool.slots]


def test_score_many_on_ray_matches_local_and_keeps_its_actors_warm(local_ray, responses, scored):
    from nkieval.reward import score_many
    from nkieval.reward.ray_executor import ActorSlot, ray_pool

    kinds = ["expert", "flawed", "hostile", "none", "flawed"]
    rs = score_many([("vector_add", responses[k]) for k in kinds], executor="ray", workers=2, seed=SEED)
    assert [r.status for r in rs] == ["scored", "scored", "scored", "no-kernel", "scored"]
    assert [r.reward for r in rs] == [scored(k).reward for k in kinds]
    assert rs[1].feedback == scored("flawed").feedback
    pool = ray_pool(2)  # (the process's pool, kept for the next call)
    assert all(isinstance(s, ActorSlot) for s in pool.slots)
    actors, first = _actor_ids(pool), pool.cache_totals()
    assert first["entries"] > 0 and first["misses"] > 0  # (the actors' case caches, as their answers report them)
    rs2 = score_many([("vector_add", responses[k]) for k in kinds], executor="ray", workers=2, seed=SEED)
    assert [r.reward for r in rs2] == [r.reward for r in rs]
    assert ray_pool(2) is pool and _actor_ids(pool) == actors  # (the same actors: nothing restarted)
    assert pool.cache_totals()["hits"] > first["hits"]  # (the second call found the cases the first one made)


def test_ray_time_limit_is_a_harness_error_and_the_actor_is_replaced(local_ray, responses, scored):
    from nkieval.reward import score_many
    from nkieval.reward.ray_executor import ray_pool

    r = score_many([("vector_add", responses["expert"])], executor="ray", workers=2, seed=SEED + 99,
                   timeout_s=0.01)[0]
    assert r.status == "harness-error" and r.reward is None and "time limit" in r.error
    rs = score_many([("vector_add", responses["flawed"]), ("vector_add", responses["expert"])], executor="ray",
                    workers=2, seed=SEED)
    assert [x.reward for x in rs] == [scored("flawed").reward, scored("expert").reward]
    assert all(a is not None for a in _actor_ids(ray_pool(2)))


def test_closing_the_pool_gives_the_cpus_back(local_ray, responses):
    from nkieval.reward import score_many
    from nkieval.reward.batch import close_pools

    score_many([("vector_add", responses["expert"])], executor="ray", workers=2, seed=SEED)
    assert local_ray.available_resources().get("CPU", 0) == 0  # (two actors hold the instance's two CPUs)
    close_pools()
    deadline = time.monotonic() + 30
    while local_ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert local_ray.available_resources().get("CPU", 0) == 2


def test_suite_run_on_ray(local_ray, tmp_path):
    from nkieval.review.suite import judge, plan, run_suite
    from nkieval.reward.batch import close_pools

    close_pools()  # (the suite runs Ray tasks: this process's review actors would hold every CPU they need)

    entries = plan(tasks="vector_add", roles=("flawed",), all_targets=False)[:2]
    recs = run_suite(entries, tmp_path / "results.jsonl", executor="ray", workers=2, progress=False)
    assert len(recs) == len(entries) and all(r["verdict"] != "harness-error" for r in recs), recs
    assert judge(recs).summary()["flawed_caught"] == [len(entries), len(entries)]


def test_service_backend_on_ray(local_ray, tmp_path, responses, scored):
    from nkieval.reward.batch import close_pools
    from nkieval.reward.serve.service import RewardService

    close_pools()  # (the service's actors are its own)
    svc = RewardService(tmp_path / "db.sqlite3", workers=2, ray_address="auto")  # joins the running instance
    svc.start()
    try:
        row, = svc.submit_many([{"task": "vector_add", "response": responses["flawed"], "seed": SEED}])
        fut = svc.future(row.id)
        assert fut is not None and fut.result(timeout=120)["reward"] == scored("flawed").reward
        deadline = time.monotonic() + 10
        while svc.get(row.id).state != "done" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert svc.get(row.id).result["reward"] == scored("flawed").reward
        assert svc.health()["backend"] == "ray"
        from nkieval.reward.ray_executor import ActorSlot

        assert all(isinstance(s, ActorSlot) for s in svc._pool.slots)
    finally:
        svc.close()


class _DiesStarting:
    def __init__(self):
        raise RuntimeError("this node cannot import what the review needs")

    def ping(self):
        return 0

    def run(self, job):
        return {}


def test_actors_that_cannot_start_fail_their_jobs_instead_of_never_answering(local_ray):
    from nkieval.reward import ray_executor
    from nkieval.reward.batch import close_pools
    from nkieval.reward.workers import WorkerPool

    close_pools()
    ray_executor.ensure_ray()
    real = ray_executor._ACTOR[0]
    ray_executor._ACTOR[0] = local_ray.remote(num_cpus=1, max_restarts=0)(_DiesStarting)
    pool = WorkerPool(1, slot=lambda: ray_executor.ActorSlot())
    try:
        ans = pool.submit({"task": "vector_add", "source": "", "seed": SEED}).result(timeout=180)
    finally:
        pool.close()
        ray_executor._ACTOR[0] = real
    assert ans["status"] == "harness-error" and ans["reward"] is None
    assert ans["error"].startswith("ray: ActorDiedError")  # (Ray's reason: the actor's creation failed)

"""Reviews on a local Ray instance: ``score_many(..., executor="ray")``, ``suite run --executor ray`` and the
service's Ray backend."""

import time

import pytest
from reward_helpers import SEED

ray = pytest.importorskip("ray", reason="Ray is not installed (the 'ray' extra; .ci/run installs it)")


@pytest.fixture(scope="module")
def local_ray():
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def test_score_many_on_ray_matches_local(local_ray, responses, scored):
    from nkieval.reward import score_many

    kinds = ["expert", "flawed", "hostile", "none", "flawed"]
    rs = score_many([("vector_add", responses[k]) for k in kinds], executor="ray", workers=2, seed=SEED)
    assert [r.status for r in rs] == ["scored", "scored", "scored", "no-kernel", "scored"]
    assert [r.reward for r in rs] == [scored(k).reward for k in kinds]
    assert rs[1].feedback == scored("flawed").feedback


def test_ray_time_limit_is_a_harness_error(local_ray, responses):
    from nkieval.reward import score_many

    r = score_many([("vector_add", responses["expert"])], executor="ray", seed=SEED + 99, timeout_s=0.01)[0]
    assert r.status == "harness-error" and r.reward is None and "time limit" in r.error


def test_suite_run_on_ray(local_ray, tmp_path):
    from nkieval.review.suite import judge, plan, run_suite

    entries = plan(tasks="vector_add", roles=("flawed",), all_targets=False)[:2]
    recs = run_suite(entries, tmp_path / "results.jsonl", executor="ray", workers=2, progress=False)
    assert len(recs) == len(entries) and all(r["verdict"] != "harness-error" for r in recs), recs
    assert judge(recs).summary()["flawed_caught"] == [len(entries), len(entries)]


def test_service_backend_on_ray(local_ray, tmp_path, responses, scored):
    from nkieval.reward.serve.service import RewardService

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
    finally:
        svc.close()

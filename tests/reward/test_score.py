"""``score``: expert, baseline, flawed and hostile candidates wrapped as model responses, and what a judge
failure becomes (a retryable status, never a reward of 0)."""

import asyncio
import re

import pytest
from reward_helpers import SEED

from nkieval.reward import RewardResult, score
from nkieval.reward.result import shape_reward
from nkieval.tasks import TaskError


def test_expert_passes_with_the_top_tier(scored):
    r = scored("expert")
    assert r.status == "scored" and r.verdict == "pass"
    assert 0.5 < r.reward <= 1.0
    assert r.reward == pytest.approx(0.5 + 0.5 * r.score / 100)
    assert r.levels["correctness"] == 4 and r.seed == SEED and r.source_sha256
    assert "the only fenced block" in r.extraction


def test_reward_is_monotone_in_quality(scored):
    expert, baseline, flawed, hostile = (scored(k) for k in ("expert", "baseline", "flawed", "hostile"))
    assert baseline.verdict == "pass" and flawed.verdict == "fail"
    assert expert.reward >= baseline.reward > 0.5 > flawed.reward > 0.0 == hostile.reward


def test_flawed_fails_below_every_pass(scored):
    r = scored("flawed")
    assert r.status == "scored" and r.verdict == "fail" and r.verdict_reason == "incorrect"
    assert 0.0 < r.reward < 0.5
    assert "never written" in r.feedback


def test_hostile_is_exactly_zero(scored):
    r = scored("hostile")
    assert r.status == "scored" and r.verdict in ("hack-suspected", "sandbox-violation", "impossible")
    assert r.reward == 0.0


def test_no_kernel_is_zero_and_the_candidates_fault(scored):
    r = scored("none")
    assert r.status == "no-kernel" and r.reward == 0.0 and not r.retryable
    assert "vector_add" in r.feedback


def test_feedback_redacts_hidden_shapes_and_seeds(scored):
    r = scored("flawed", full_report=True)
    rep = r.report
    assert rep is not None and rep["verdict"] == "fail"
    hidden = {str(v) for c in rep["cases"] if c["hidden"] for v in c["shape"].values() if len(str(v)) >= 3}
    assert hidden, "vector_add has hidden shapes of three digits or more"
    seeds = {str(c["seed"]) for c in rep["cases"]} | {str(rep["seed"])}
    numbers = set(re.findall(r"\d+", r.feedback))
    assert not (numbers & hidden), f"hidden dimension values leak: {numbers & hidden}"
    assert not (numbers & seeds), "a seed leaks into the feedback"
    assert "hidden shape" in r.feedback  # the hidden case is named, without its shape
    assert "65536" in r.feedback or "public" in r.feedback or "Correctness" in r.feedback


def test_full_report_only_on_request(scored):
    assert scored("expert").report is None
    assert scored("flawed", full_report=True).report["schema"]


def test_judge_error_is_retryable_not_zero(monkeypatch, responses):
    from nkieval.review import pipeline
    from nkieval.review.verdict import JudgeError

    def broken(*a, **k):
        raise JudgeError("numerics", "the oracle raised")

    monkeypatch.setattr(pipeline, "review", broken)
    r = score("vector_add", responses["expert"], seed=SEED)
    assert r.status == "harness-error" and r.reward is None and r.retryable
    assert "numerics" in r.error


def test_unknown_task_and_target_raise(responses):
    from nkieval.review.verdict import UsageError

    with pytest.raises(TaskError):
        score("no_such_task", responses["expert"])
    with pytest.raises(UsageError):
        score("vector_add", responses["expert"], target="trn9")
    with pytest.raises(ValueError):
        score("vector_add", responses["expert"], shaping="cubic")


def test_shaping_table():
    assert shape_reward("pass", 100.0) == 1.0
    assert shape_reward("fail", 99.0) < shape_reward("pass", 0.0) == 0.5
    for v in ("hack-suspected", "impossible", "sandbox-violation"):
        for s in ("tiered", "score", "binary"):
            assert shape_reward(v, 80.0, s) == 0.0
    assert shape_reward("fail", 40.0, "score") == 0.4 and shape_reward("fail", 40.0, "binary") == 0.0


def test_result_round_trips_through_json(scored):
    import json

    r = scored("flawed")
    d = json.loads(json.dumps(r.to_dict()))
    assert d["retryable"] is False
    assert RewardResult.from_dict(d) == r


def test_score_async(responses, scored):
    from nkieval.reward import score_async

    r = asyncio.run(score_async("vector_add", responses["expert"], seed=SEED))
    assert r.reward == scored("expert").reward


def test_source_text_is_never_read_as_a_path(scored):
    from reward_helpers import VECTOR_ADD

    r = score("vector_add", str(VECTOR_ADD / "solution_nki.py"), seed=SEED, extract=False)
    assert r.status == "scored" and r.verdict == "fail" and r.reward < 0.5  # the path's text, not the file

"""The verl and TRL adapters, called with the argument shapes those frameworks document (neither is installed)."""

import math

import pytest
from reward_helpers import SEED

from nkieval.reward import verl
from nkieval.reward.adapters import RewardHarnessError, completion_text, task_of
from nkieval.reward.result import RewardResult
from nkieval.reward.trl import make_reward


def test_verl_compute_score_positional_and_keyword(responses, scored):
    # verl's reward manager: compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...)
    got = verl.compute_score(data_source="nkieval/vector_add", solution_str=responses["flawed"],
                             ground_truth="vector_add",
                             extra_info={"seed": SEED, "index": 3, "split": "train", "num_turns": 1,
                                         "rollout_reward_scores": {}})
    assert got == scored("flawed").reward
    assert verl.compute_score("nkieval/vector_add", responses["hostile"], None, {"seed": SEED}) == 0.0
    d = verl.compute_score_detailed("vector_add", responses["none"], None, None)
    assert d["score"] == 0.0 and d["status"] == "no-kernel" and "vector_add" in d["feedback"]


def test_trl_reward_with_strings_and_chat_messages(responses, scored):
    reward = make_reward(workers=1)
    prompts = ["Write vector_add in NKI."] * 3
    completions = [responses["expert"], [{"role": "assistant", "content": responses["flawed"]}], "no code"]
    got = reward(prompts=prompts, completions=completions, task=["vector_add"] * 3, seed=[SEED] * 3,
                 completion_ids=[[1, 2]] * 3, trainer_state=None)
    assert got == [scored("expert").reward, scored("flawed").reward, 0.0]


def test_trl_task_from_data_source_column(responses, scored):
    reward = make_reward(workers=1, seed=SEED)
    assert reward(prompts=["p"], completions=[responses["flawed"]],
                  data_source=["nkieval/vector_add"]) == [scored("flawed").reward]


def _broken(*a, **k):
    return RewardResult(status="harness-error", reward=None, task="vector_add", error="the sandbox broke")


def test_harness_error_is_never_zero(monkeypatch, responses):
    calls = []
    monkeypatch.setattr(verl, "score", lambda *a, **k: calls.append(1) or _broken())
    with pytest.raises(RewardHarnessError, match="sandbox broke"):
        verl.compute_score("nkieval/vector_add", responses["expert"], None, {"seed": SEED})
    assert len(calls) == 1 + verl.RETRIES
    monkeypatch.setattr(verl, "ON_HARNESS_ERROR", "nan")
    assert math.isnan(verl.compute_score("nkieval/vector_add", responses["expert"], None, {"seed": SEED}))


def test_trl_harness_error_policy(monkeypatch, responses):
    from nkieval.reward import trl

    monkeypatch.setattr(trl, "score_many", lambda items, **k: [_broken() for _ in items])
    assert make_reward(workers=1, on_harness_error="none", task="vector_add")(completions=["x"]) == [None]
    with pytest.raises(RewardHarnessError):
        make_reward(workers=1, task="vector_add")(completions=["x"])
    with pytest.raises(ValueError):
        make_reward(on_harness_error="zero")


def test_task_and_completion_helpers():
    assert task_of(data_source="nkieval/rmsnorm") == "rmsnorm"
    assert task_of(data_source="x", ground_truth={"task": "relu"}) == "relu"
    assert task_of(extra_info={"task": "gelu"}, ground_truth="relu") == "gelu"
    with pytest.raises(ValueError):
        task_of()
    assert completion_text([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]) == "a"
    assert completion_text([{"role": "assistant", "content": [{"type": "text", "text": "b"}]}]) == "b"


def test_verl_batch_form(monkeypatch, responses, scored):
    monkeypatch.setenv("NKIEVAL_REWARD_WORKERS", "1")  # in this process (the pool is tested in test_batch)
    got = verl.compute_score_batch(data_sources=["nkieval/vector_add"] * 3,
                                   solution_strs=[responses["flawed"], responses["none"], responses["expert"]],
                                   ground_truths=[None, "vector_add", {"task": "vector_add"}],
                                   extra_infos=[{"seed": SEED}] * 3)
    assert got == [scored("flawed").reward, 0.0, scored("expert").reward]

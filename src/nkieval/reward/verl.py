"""verl's custom reward function: point ``custom_reward_function.path`` at this file and
``custom_reward_function.name`` at ``compute_score`` (docs/reward.md, "verl").

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` once per response (its
naive reward manager) and takes a float, or a dict whose ``"score"`` is the reward and whose other keys
it logs. The task comes from ``extra_info["task"]``, a ground truth that is the task id, or a
``data_source`` ``nkieval/<task>``; ``extra_info`` may also give ``seed`` and ``target``.

verl loads this file by its path, so it imports only by absolute module names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from nkieval.reward.adapters import check_policy, settle, task_of
from nkieval.reward.core import score
from nkieval.reward.result import RewardResult

#: Extra attempts on a harness error, and the policy after them (``NKIEVAL_REWARD_RETRIES``,
#: ``NKIEVAL_REWARD_ON_HARNESS_ERROR``: raise | none | nan).
RETRIES = int(os.environ.get("NKIEVAL_REWARD_RETRIES", "2"))
ON_HARNESS_ERROR = os.environ.get("NKIEVAL_REWARD_ON_HARNESS_ERROR", "raise")


def _score(data_source: str | None, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None,
           feedback: bool) -> RewardResult:
    check_policy(ON_HARNESS_ERROR)
    info = dict(extra_info or {})
    task = task_of(data_source=data_source, ground_truth=ground_truth, extra_info=info)
    r = score(task, solution_str, seed=info.get("seed"), target=info.get("target"), feedback=feedback)
    for _ in range(RETRIES):
        if not r.retryable:
            break
        r = score(task, solution_str, seed=info.get("seed"), target=info.get("target"), feedback=feedback)
    return r


def compute_score(data_source: str | None, solution_str: str, ground_truth: Any = None,
                  extra_info: Mapping[str, Any] | None = None, **kwargs: Any) -> float | None:
    """The reward in [0, 1] of one response (verl's ``compute_score`` signature): a brief review, since no
    feedback is returned (the same reward as a full one)."""
    return settle(_score(data_source, solution_str, ground_truth, extra_info, False), ON_HARNESS_ERROR)


def compute_score_detailed(data_source: str | None, solution_str: str, ground_truth: Any = None,
                           extra_info: Mapping[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    """As :func:`compute_score`, as verl's dict form: ``score`` plus ``verdict``, ``status`` and the redacted
    ``feedback`` (for a multi-turn rollout's next turn)."""
    r = _score(data_source, solution_str, ground_truth, extra_info, True)
    return {"score": settle(r, ON_HARNESS_ERROR), "verdict": r.verdict or r.status, "status": r.status,
            "feedback": r.feedback}


def compute_score_batch(data_sources: Sequence[str | None], solution_strs: Sequence[str],
                        ground_truths: Sequence[Any] | None = None,
                        extra_infos: Sequence[Mapping[str, Any] | None] | None = None, **kwargs: Any
                        ) -> list[float | None]:
    """verl's batch form (its batch reward manager calls ``compute_score(data_sources=, solution_strs=,
    ground_truths=, extra_infos=)`` once per batch): the batch is reviewed with
    :func:`nkieval.reward.score_many` in ``NKIEVAL_REWARD_WORKERS`` processes (default: the CPU count)."""
    from nkieval.reward.batch import ScoreItem, score_many

    check_policy(ON_HARNESS_ERROR)
    n = len(solution_strs)
    gts = list(ground_truths) if ground_truths is not None else [None] * n
    infos = [dict(x or {}) for x in (extra_infos if extra_infos is not None else [None] * n)]
    items = [ScoreItem(task_of(data_source=ds, ground_truth=gt, extra_info=info), s, info.get("seed"),
                       info.get("target")) for ds, s, gt, info in zip(data_sources, solution_strs, gts, infos)]
    workers = int(os.environ.get("NKIEVAL_REWARD_WORKERS", "0")) or None
    results = score_many(items, workers=workers, feedback=False)  # (floats only: brief reviews)
    for _ in range(RETRIES):
        again = [k for k, r in enumerate(results) if r.retryable]
        if not again:
            break
        for k, r in zip(again, score_many([items[k] for k in again], workers=workers, feedback=False)):
            results[k] = r
    return [settle(r, ON_HARNESS_ERROR) for r in results]

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
from collections.abc import Mapping
from typing import Any

from nkieval.reward.adapters import check_policy, settle, task_of
from nkieval.reward.core import score
from nkieval.reward.result import RewardResult

#: Extra attempts on a harness error, and the policy after them (``NKIEVAL_REWARD_RETRIES``,
#: ``NKIEVAL_REWARD_ON_HARNESS_ERROR``: raise | none | nan).
RETRIES = int(os.environ.get("NKIEVAL_REWARD_RETRIES", "2"))
ON_HARNESS_ERROR = os.environ.get("NKIEVAL_REWARD_ON_HARNESS_ERROR", "raise")


def _score(data_source: str | None, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None
           ) -> RewardResult:
    check_policy(ON_HARNESS_ERROR)
    info = dict(extra_info or {})
    task = task_of(data_source=data_source, ground_truth=ground_truth, extra_info=info)
    r = score(task, solution_str, seed=info.get("seed"), target=info.get("target"))
    for _ in range(RETRIES):
        if not r.retryable:
            break
        r = score(task, solution_str, seed=info.get("seed"), target=info.get("target"))
    return r


def compute_score(data_source: str | None, solution_str: str, ground_truth: Any = None,
                  extra_info: Mapping[str, Any] | None = None, **kwargs: Any) -> float | None:
    """The reward in [0, 1] of one response (verl's ``compute_score`` signature)."""
    return settle(_score(data_source, solution_str, ground_truth, extra_info), ON_HARNESS_ERROR)


def compute_score_detailed(data_source: str | None, solution_str: str, ground_truth: Any = None,
                           extra_info: Mapping[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    """As :func:`compute_score`, as verl's dict form: ``score`` plus ``verdict``, ``status`` and the redacted
    ``feedback`` (for a multi-turn rollout's next turn)."""
    r = _score(data_source, solution_str, ground_truth, extra_info)
    return {"score": settle(r, ON_HARNESS_ERROR), "verdict": r.verdict or r.status, "status": r.status,
            "feedback": r.feedback}

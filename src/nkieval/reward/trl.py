"""TRL's reward-function form: ``reward_funcs=[nkieval.reward.trl.reward]`` in a ``GRPOTrainer``
(docs/reward.md, "TRL").

TRL calls a reward function with the keyword arguments ``prompts`` and ``completions`` (strings, or chat
message lists in a conversational dataset) and every other dataset column, and wants one float per
completion. The task comes from a ``task`` column (or ``data_source`` ``nkieval/<task>``); ``seed`` and
``target`` columns are used when present. The batch is scored with :func:`nkieval.reward.score_many`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from nkieval.reward.adapters import check_policy, completion_text, settle, task_of
from nkieval.reward.batch import ScoreItem, score_many


def _column(kwargs: dict[str, Any], name: str, i: int) -> Any:
    col = kwargs.get(name)
    if isinstance(col, Sequence) and not isinstance(col, str):
        return col[i] if i < len(col) else None
    return col


def make_reward(*, task: str | None = None, workers: int | None = None, executor: str = "local",
                seed: int | None = None, retries: int = 2, on_harness_error: str = "raise",
                shaping: str = "tiered") -> Callable[..., list[float | None]]:
    """A TRL reward function (``def reward(prompts, completions, **kwargs) -> list[float]``) with these settings:
    ``task`` for every sample (None: from the ``task``/``data_source`` column), ``seed`` for samples without a
    ``seed`` column, ``retries`` extra attempts for harness errors and then ``on_harness_error``."""
    check_policy(on_harness_error)

    def reward(prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (), **kwargs: Any
               ) -> list[float | None]:
        items = []
        for i, c in enumerate(completions):
            tid = task_of(task=task or _column(kwargs, "task", i), data_source=_column(kwargs, "data_source", i))
            s = _column(kwargs, "seed", i)
            items.append(ScoreItem(tid, completion_text(c), seed if s is None else int(s), _column(kwargs, "target", i)))
        # (floats only: brief reviews, the same rewards with less judge time)
        results = score_many(items, workers=workers, executor=executor, shaping=shaping,  # type: ignore[arg-type]
                             feedback=False)
        for _ in range(retries):
            again = [k for k, r in enumerate(results) if r.retryable]
            if not again:
                break
            for k, r in zip(again, score_many([items[k] for k in again], workers=workers, executor=executor,
                                              shaping=shaping, feedback=False)):  # type: ignore[arg-type]
                results[k] = r
        return [settle(r, on_harness_error) for r in results]

    reward.__name__ = "nkieval_reward"
    return reward


#: The default TRL reward function: the task from the ``task`` column, reviews in one process per core.
reward = make_reward()

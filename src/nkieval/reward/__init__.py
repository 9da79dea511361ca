"""Rewards for reinforcement learning from nkieval's review (docs/reward.md).

``score(task, response)`` reviews one model response (the kernel is taken from its fenced code) and returns
a :class:`RewardResult`: a reward in [0, 1], the verdict, per-criterion levels and a feedback text with the
hidden shapes and seeds removed. ``score_many`` scores a batch in review processes or on Ray;
``score_many_async``/``score_async`` do it from asyncio code. Adapters: :mod:`nkieval.reward.verl`
(``compute_score``) and :mod:`nkieval.reward.trl` (``reward``); the HTTP service: ``nkieval serve``
(:mod:`nkieval.reward.serve`). Every reward comes from :func:`nkieval.review.review`; this package only maps
verdicts to rewards and moves requests around. Names load lazily (``nkieval --help`` stays fast).
"""

from __future__ import annotations

from typing import Any

__all__ = ["RETRYABLE", "STATUSES", "RewardResult", "ScoreItem", "extract_kernel", "score", "score_async",
           "score_many", "score_many_async"]

_WHERE = {"score": "core", "RewardResult": "result", "STATUSES": "result", "RETRYABLE": "result",
          "extract_kernel": "extract", "ScoreItem": "batch", "score_many": "batch", "score_many_async": "batch",
          "score_async": "batch"}


def __getattr__(name: str) -> Any:
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'nkieval.reward' has no attribute {name!r}")
    if mod == "core":
        from nkieval.reward import core as m
    elif mod == "result":
        from nkieval.reward import result as m  # type: ignore[no-redef]
    elif mod == "extract":
        from nkieval.reward import extract as m  # type: ignore[no-redef]
    else:
        from nkieval.reward import batch as m  # type: ignore[no-redef]
    return getattr(m, name)

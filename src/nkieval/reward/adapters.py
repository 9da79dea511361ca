"""What the adapters share: which task a sample is for, the completion's text, and what a harness error does.

A trainer wants a float per sample; a harness error (the judge failed, not the candidate) has no reward.
``on_harness_error`` says what the adapter does after ``retries`` more attempts fail the same way:
``"raise"`` (default: :class:`RewardHarnessError`, the step fails loudly), ``"none"`` (None for that sample:
TRL's GRPO trainer ignores a None reward for the sample) or ``"nan"``. It is never turned into 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nkieval.reward.result import RewardResult

ON_HARNESS_ERROR = ("raise", "none", "nan")
#: ``data_source`` prefixes that name an nkieval task (``nkieval/vector_add`` or ``nkieval:vector_add``).
PREFIXES = ("nkieval/", "nkieval:")


class RewardHarnessError(RuntimeError):
    """The judge failed on a sample (after the adapter's retries): retry the step, never train on it as 0."""

    def __init__(self, result: RewardResult) -> None:
        super().__init__(f"nkieval harness error on task {result.task}: {result.error}")
        self.result = result


def task_of(*, data_source: str | None = None, ground_truth: Any = None, extra_info: Mapping[str, Any] | None = None,
            task: str | None = None) -> str:
    """The task id a sample names: ``task``, then ``extra_info["task"]``, then a ground truth that is a task id
    or a mapping with ``"task"``, then a ``data_source`` of the form ``nkieval/<task>`` (or a bare task id).

    Raises:
        ValueError: the sample names no task.
    """
    if task:
        return str(task)
    if extra_info and extra_info.get("task"):
        return str(extra_info["task"])
    if isinstance(ground_truth, Mapping) and ground_truth.get("task"):
        return str(ground_truth["task"])
    if isinstance(ground_truth, str) and ground_truth.strip():
        return ground_truth.strip()
    if data_source:
        for p in PREFIXES:
            if data_source.startswith(p):
                return data_source[len(p):]
        return data_source
    raise ValueError("the sample names no nkieval task: give extra_info['task'], a ground_truth that is the task id, "
                     "or a data_source 'nkieval/<task>'")


def completion_text(c: Any) -> str:
    """The text of a completion: a string, or a chat message list (the last assistant message's ``content``)."""
    if isinstance(c, str):
        return c
    if isinstance(c, Mapping):
        return str(c.get("content", ""))
    if isinstance(c, Sequence):
        msgs = [m for m in c if isinstance(m, Mapping)]
        mine = [m for m in msgs if m.get("role", "assistant") == "assistant"] or msgs
        if mine:
            content = mine[-1].get("content", "")
            if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
                return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
            return str(content)
    return str(c)


def settle(result: RewardResult, on_harness_error: str) -> float | None:
    """The float a trainer gets for ``result`` (see the module docstring)."""
    if result.reward is not None:
        return float(result.reward)
    if result.status == "bad-request":
        raise ValueError(f"nkieval: bad request for task {result.task}: {result.error}")
    if on_harness_error == "none":
        return None
    if on_harness_error == "nan":
        return float("nan")
    raise RewardHarnessError(result)


def check_policy(on_harness_error: str) -> None:
    if on_harness_error not in ON_HARNESS_ERROR:
        raise ValueError(f"on_harness_error must be one of {', '.join(ON_HARNESS_ERROR)}, got {on_harness_error!r}")

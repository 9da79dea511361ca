"""``score``: a model's response (or a kernel's source) → :class:`~nkieval.reward.result.RewardResult`.

The reward comes from :func:`nkieval.review.review` in its default, trusted mode (the candidate's code runs
only in the sandboxed tracer; the judge replays its programs): nothing here judges a kernel.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from nkieval.review.cache import TASKS
from nkieval.reward.extract import extract_kernel
from nkieval.reward.result import SHAPINGS, RewardResult, brief_feedback, redacted_feedback, shape_reward
from nkieval.tasks import Task, TaskError


def resolve_task(task: Task | str | Path) -> Task:
    """A :class:`Task` from a task object, a built-in id or a task directory (loaded once per process while its
    files are unchanged: ``nkieval.review.cache.TASKS``, which the reviews use too).

    Raises:
        TaskError: the task does not exist or is malformed.
    """
    if isinstance(task, Task):
        return task
    return TASKS.load(task)


def score(task: Task | str | Path, response_or_source: str | Path, *, seed: int | None = None,
          target: str | None = None, extract: bool = True, full_report: bool = False, shaping: str = "tiered",
          case_timeout_s: float | None = None, feedback: bool = True, **review_kw: Any) -> RewardResult:
    """Review one candidate and return its reward.

    ``response_or_source``: a model's response (Markdown with fenced code; :mod:`nkieval.reward.extract`
    picks the block that defines the task's entry point) or a :class:`~pathlib.Path` to a kernel file (a
    ``str`` is always text, never a file name). ``extract=False`` takes the text as the kernel's source as is. ``seed`` None draws a fresh secret seed (recorded in
    the result); a fixed seed makes the reward deterministic and lets reviews of one task share their
    cases' inputs and references (docs/review.md, "Case cache"). ``full_report`` attaches the review's
    JSON report. ``case_timeout_s`` lowers the task's per-case time limit (``[limits] timeout_s``; a
    candidate past it fails with ``timeout``, its own fault). ``feedback=False`` (without ``full_report``):
    a brief review (``review(..., brief=True)``) that leaves out the judge's work no reward reads — the
    differential check against the CUDA source or its cause search, where no outcome of it can change the
    verdict, score or levels — and a feedback text of the verdict, score and levels only (docs/reward.md,
    "Brief rewards"); reward, verdict, score and levels are the same as with feedback. Other keyword
    arguments go to :func:`nkieval.review.review`.

    A candidate's fault is always a reward (``scored`` or ``no-kernel``); a judge failure is status
    ``harness-error`` with reward None (retry it, never train on it).

    Raises:
        TaskError: unknown or malformed task. UsageError: unknown target. ValueError: unknown ``shaping``.
    """
    from nkieval.review.verdict import check_target

    if shaping not in SHAPINGS:
        raise ValueError(f"unknown shaping {shaping!r}; one of {', '.join(SHAPINGS)}")
    t0 = time.perf_counter()
    t = resolve_task(task)
    tgt = check_target(t, target)
    if case_timeout_s is not None and "limits" not in review_kw:
        from nkieval.review.stages.load import sandbox_limits

        lim = sandbox_limits(t)
        review_kw["limits"] = replace(lim, timeout_s=min(lim.timeout_s, float(case_timeout_s)))
    if isinstance(response_or_source, Path):
        source: str | Path = response_or_source
        why = f"the file {response_or_source.name}"
    elif extract:
        ex = extract_kernel(response_or_source, t.kernel)
        if ex.source is None:
            return RewardResult(status="no-kernel", reward=0.0, task=t.id, verdict="fail", verdict_reason="no-kernel",
                                score=0.0, feedback=f"verdict: fail (no-kernel); {ex.reason}. Answer with one "
                                f"```python block that defines {t.kernel}().", target=tgt, seed=seed,
                                extraction=ex.reason, elapsed_s=time.perf_counter() - t0)
        source, why = ex.source, ex.reason
    else:
        source, why = str(response_or_source), "the source as given"
    if isinstance(source, str) and "\n" not in source:
        # text, never a path: the review reads a one-line string ending in .py as a file name, and a request's
        # text must not make the judge read a file of its machine
        source += "\n"
    digest = hashlib.sha256(source.read_bytes() if isinstance(source, Path) else source.encode()).hexdigest()
    brief = not feedback and not full_report
    if brief:
        review_kw.setdefault("brief", True)
    return _review(t, source, seed, tgt, full_report, shaping, digest, why, t0, review_kw, brief)


def _review(t: Task, source: str | Path, seed: int | None, target: str, full_report: bool, shaping: str,
            digest: str, why: str, t0: float, review_kw: dict[str, Any], brief: bool = False) -> RewardResult:
    from nkieval.review.pipeline import review
    from nkieval.review.verdict import JudgeError, UsageError

    base = dict(task=t.id, target=target, seed=seed, source_sha256=digest, extraction=why)
    try:
        r = review(t, source, target=target, seed=seed, **review_kw)
    except (TaskError, UsageError):
        raise
    except JudgeError as e:
        return RewardResult(status="harness-error", reward=None, error=f"judge component {e.component!r} failed: {e}",
                            elapsed_s=time.perf_counter() - t0, **base)  # type: ignore[arg-type]
    except Exception as e:  # the harness broke (sandbox, pool, OS): retryable, never the candidate's reward
        return RewardResult(status="harness-error", reward=None, error=f"{type(e).__name__}: {e}",
                            elapsed_s=time.perf_counter() - t0, **base)  # type: ignore[arg-type]
    base["seed"] = r.seed
    levels = {c.id: c.level for c in r.criteria}
    if r.verdict == "harness-error":
        return RewardResult(status="harness-error", reward=None, verdict=r.verdict, verdict_reason=r.verdict_reason,
                            error=r.verdict_message, levels=levels, elapsed_s=time.perf_counter() - t0,
                            report=r.to_dict() if full_report else None, **base)  # type: ignore[arg-type]
    return RewardResult(status="scored", reward=shape_reward(r.verdict, r.score, shaping), verdict=r.verdict,
                        verdict_reason=r.verdict_reason, score=round(float(r.score), 4), levels=levels,
                        feedback=brief_feedback(r) if brief else redacted_feedback(r), elapsed_s=time.perf_counter() - t0,
                        report=r.to_dict() if full_report else None, **base)  # type: ignore[arg-type]

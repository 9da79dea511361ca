"""The review pipeline: task + candidate source → :class:`~nkieval.review.model.Review`.

:func:`review` composes the stages of :mod:`nkieval.review.stages`: load the task and the candidate
(integrity scan, cases, inputs) → trace in the sandbox → validate and execute each case → judge each
case (reference outputs never shown to the candidate, correctness, numerics) → evidence (the largest
shape's trace next to the baseline's and the expert solution's; performance estimates; static
analysis) → score (rubric, physics, verdict) → report. Stages 2-5 overlap
(:mod:`nkieval.review.stages.overlap`). Any candidate fault ends up as a case status and a feedback
line; only a malformed task or rubric raises, and a judge component that fails raises ``JudgeError``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from nkieval.review.cache import CASE_CACHE
from nkieval.review.model import Review
from nkieval.review.rubric import DEFAULT_RUBRIC, Rubric
from nkieval.review.sandbox import Isolation, SandboxLimits
from nkieval.review.stages.brief import brief_score
from nkieval.review.stages.differential import differential
from nkieval.review.stages.judge import DIAGNOSED_FAILURES, collect, prepare_judge
from nkieval.review.stages.load import NOT_TEXT, ReviewRequest, load
from nkieval.review.stages.overlap import execute_and_judge
from nkieval.review.stages.score import report, score
from nkieval.review.stages.timing import Timings, timed
from nkieval.tasks import Task

__all__ = ["DIAGNOSED_FAILURES", "NOT_TEXT", "review"]


def review(task: Task | str | Path, candidate: str | Path, *, target: str | None = None, seed: int | None = None,
           rubric: Rubric | str = DEFAULT_RUBRIC, families: tuple[str, ...] | None = None, shapes: str = "all",
           isolation: Isolation = "forkserver", limits: SandboxLimits | None = None,
           progress: Callable[[str], None] | None = None, compare_references: bool = True,
           cache: bool | None = None, trusted: bool = True, brief: bool = False) -> Review:
    """Review one candidate kernel (a path or its source text) against a task.

    ``seed`` None draws a fresh secret seed (recorded in the report); ``families`` restricts the
    input families (default: the task's); ``shapes="public"`` skips hidden shapes (for authors'
    quick checks, never for scoring); ``compare_references=False`` skips running the baseline and
    expert solution (no relative hardware/performance evidence).

    ``cache`` (default: on when ``seed`` is given) keeps each case's inputs, reference outputs
    and prepared numerics check in the harness process for the next review of the same task,
    shape, family and seed (:mod:`nkieval.review.cache`); the report is the same either way.

    ``trusted`` (default): trace, then execute — the candidate's code runs only in a sandboxed tracer that sees
    shapes, never data, and the judge replays its programs (docs/review.md, step 2). ``trusted=False`` runs the
    candidate itself on the inputs in the child, as the pipeline did before: for trusted code and comparisons.

    ``brief``: leave out the differential check against the CUDA source, or its cause search, where no outcome
    of it can change the verdict, score or levels (:mod:`nkieval.review.stages.brief`; the reward API's
    ``feedback=False``); the report's migration feedback says what was left out.
    """
    req = ReviewRequest(task, candidate, target, seed, rubric, families, shapes, isolation, limits, progress,
                        compare_references, cache, trusted)
    timings = Timings()
    with timed(timings, "total_s"):
        with timed(timings, "inputs_s"):
            loaded = load(req)
        with CASE_CACHE.pinned(loaded.keys):  # (the cases in use lose nothing to the cache's bound meanwhile)
            with timed(timings, "setup_s"):
                kit = prepare_judge(loaded, brief)
            with timed(timings, "sandbox_s"):
                out = execute_and_judge(kit, timings)
            with timed(timings, "judge_after_sandbox_s"):
                judgement = collect(kit, out.judged, out.diagnosis)
            static = out.analysis.get()  # (a static analysis that raised raises here)
            if brief:
                scored, _left_out = brief_score(loaded, out.runs, judgement.cases,
                                                lambda d: score(loaded, judgement, out.evidence, static, d), timings)
            else:
                with timed(timings, "differential_s"):
                    diff = differential(loaded, out.runs, judgement.cases) if loaded.task.cuda_file is not None \
                        else (None, None)
                with timed(timings, "scoring_s"):
                    scored = score(loaded, judgement, out.evidence, static, diff)
    return report(loaded, judgement, out.evidence, scored, timings.as_dict())

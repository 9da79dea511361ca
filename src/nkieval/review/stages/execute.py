"""Stages 2 and 3, trace in the sandbox, then validate and execute each case: one call to
:func:`nkieval.review.sandbox.run_candidate` (its :class:`~nkieval.review.tracing.ProgramStream` runs the
candidate's code in the sandboxed tracer, once per distinct shape, and hands each shape's program to the
judge's executor as it arrives; the executor, :mod:`nkieval.review.executor`, validates the program and replays
it on each case's inputs in the judge's process). A candidate the integrity scan rejected is not run at all."""

from __future__ import annotations

from collections.abc import Callable

from nkieval.review.sandbox import CaseRun, run_candidate
from nkieval.review.stages.load import Loaded
from nkieval.review.stages.timing import Timings


def execute(loaded: Loaded, *, on_case: Callable[[CaseRun], None], on_start: Callable[[], None],
            stats: dict[str, float]) -> list[CaseRun]:
    """Every case's run, in case order. ``on_case`` gets each result as it arrives, ``on_start`` is called
    once the sandbox is running (see ``run_candidate``); ``stats`` gets the sandbox's harness-side seconds."""
    if loaded.integrity:
        return [CaseRun(c.label, "not-run", error={"message": "not run: the integrity scan rejected the source"})
                for c in loaded.cases]
    req = loaded.request
    return run_candidate(loaded.source, loaded.task.kernel, loaded.jobs, target=loaded.target, limits=loaded.limits,
                         isolation=req.isolation, on_case=on_case, on_start=on_start, stats=stats,
                         trusted=req.trusted, hide=(str(loaded.task.directory),),
                         programs=loaded.programs)


def record_child_timings(runs: list[CaseRun], stats: dict[str, float], timings: Timings) -> None:
    """The child's seconds (summed over cases) and the sandbox's harness side, under the benchmark's keys."""
    timings.update({"simulation_s": sum(r.sim_s for r in runs), "child_load_s": sum(r.load_s for r in runs),
                    "child_post_s": sum(r.post_s for r in runs), "child_setup_s": sum(r.setup_s for r in runs)})
    timings.update({f"sandbox_{k}": v for k, v in stats.items()})

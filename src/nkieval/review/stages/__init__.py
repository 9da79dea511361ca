"""The review pipeline's stages, each a function with typed inputs and outputs (docs/review.md, "Pipeline").

=====================  ==============================================  =========================================
stage                  function                                        in → out
=====================  ==============================================  =========================================
1. load task           :func:`load.load`                               ``ReviewRequest`` → ``Loaded``
   (judge's kit)       :func:`judge.prepare_judge`                     ``Loaded`` → ``JudgeKit``
2. trace in sandbox    :func:`execute.execute` (``run_candidate``)     ``Loaded`` → ``list[CaseRun]``, per case
3. validate, execute   (the judge's executor, in-process, same call)   as it arrives
4. judge               :func:`judge.judge_case`, :func:`judge.collect`  ``CaseRun`` → ``JudgedCase`` → ``Judgement``
5. evidence            :func:`evidence.trace_facts`,                   ``CaseRun`` → ``TraceFacts``;
                       :func:`evidence.reference_evidence`,            → ``RunEvidence``;
                       :func:`evidence.static_analysis`                ``Loaded`` → ``StaticFindings``
6. score               :func:`score.score`                             → ``Scored``
7. report              :func:`score.report`                            → ``Review``
=====================  ==============================================  =========================================

Stages 2-5 overlap: :func:`overlap.execute_and_judge` is the one place with threads (a worker judges
case k while the child runs case k+1; the calling thread helps once the child has exited).
Timings: :func:`timing.timed`.
"""

from __future__ import annotations


def clear_caches() -> None:
    """Forget what reviews keep per process for the next review (benchmarks' cold start): the loaded tasks, the
    case cache, the task's reference code, the reference kernels' evidence, the static findings and constants of
    candidate sources seen, the programs recorded by the tracer, the cause search's CUDA runs and what it derives
    from a CUDA source (its mutations, literals and near-exact rewrite)."""
    from nkieval.review.cache import CASE_CACHE, TASKS, TRACES
    from nkieval.review.stages import differential, evidence, judge, mutation_causes
    from nkieval.review.stages.kept_runs import KEPT_RUNS

    TASKS.clear()
    CASE_CACHE.clear()
    KEPT_RUNS.clear()
    TRACES.clear()
    for derived in (differential._exact_source, differential._cuda_literals, differential._port_literals,
                    mutation_causes._mutations_of):
        derived.cache_clear()
    with evidence._REF_LOCK:
        evidence._REF_CACHE.clear()
    evidence._STATIC.clear()
    with judge._TASK_CODE_LOCK:
        judge._TASK_CODE.clear()

"""A review's differential record and report are a function of (task, candidate, seed, target), not of the
machine: the executor's budgets are in work units the interpreter counts, so a CPU clock running five times as
fast (a machine five times slower, or a loaded one) changes nothing; its safety net, where it fires, is a
harness error, never a changed report; and a budget that runs out has the outcome the CPU-time budget had."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner
from review_testlib import report_text

import nkieval.cuda as cuda
from nkieval.review.stages import differential, mutation_causes

#: rmsnorm_warp's port that keeps the sum of squares in bf16: three cases, and a cause the mutation search finds
#: after a few dozen mutants. Budgets cut so that they bind: the cases' budget ends after the second case (at
#: a few ms of CPU each here, so a clock five times as fast would end it sooner), the search's after some
#: mutants (the search's hypotheses tried depend on it)
TASK, CANDIDATE, SEED = "rmsnorm_warp", "bf16_square_sum.py", 1
CASES_BUDGET_S, SEARCH_BUDGET_S = 0.005, 0.05


def _review(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], str]:
    """(the differential record, the report) of a cold review of the subject."""
    import nkieval.review.pipeline as pipeline
    from nkieval.review import review
    from nkieval.review.stages import clear_caches
    from nkieval.tasks.loader import PORTS_ROOT, load_task

    got: list[Any] = []
    real = differential.differential

    def keep(*a: Any, **k: Any) -> Any:
        got.append(real(*a, **k))
        return got[-1]

    monkeypatch.setattr(pipeline, "differential", keep)
    task = load_task(PORTS_ROOT / TASK)
    clear_caches()
    r = review(task, task.directory / "flawed" / CANDIDATE, seed=SEED, compare_references=False)
    assert got and got[-1][0] is not None, got
    return got[-1][0], report_text(r)


def _budgets(monkeypatch: pytest.MonkeyPatch, cases_s: float, search_s: float) -> None:
    monkeypatch.setattr(differential, "EXECUTOR_BUDGET_S", cases_s)
    monkeypatch.setattr(differential, "mutation_causes",
                        functools.partial(mutation_causes.mutation_causes, budget_s=search_s))


@pytest.mark.slow
def test_the_review_is_the_same_when_the_cpu_clock_runs_five_times_as_fast(
        fast_cpu_clock: Callable[..., None], monkeypatch: pytest.MonkeyPatch) -> None:
    _budgets(monkeypatch, CASES_BUDGET_S, SEARCH_BUDGET_S)
    record, report = _review(monkeypatch)
    with monkeypatch.context() as m:
        fast_cpu_clock(m, 5.0)
        record5, report5 = _review(m)
    assert json.dumps(record, sort_keys=True, default=str) == json.dumps(record5, sort_keys=True, default=str)
    assert report == report5
    # (the budget binds: the cases' budget leaves out some of the three cases, so a clock could have changed it)
    assert record["envelope_cases"] < 3, record["envelope_cases"]


@pytest.mark.slow
def test_a_budget_that_runs_out_has_the_outcome_the_time_budget_had(monkeypatch: pytest.MonkeyPatch) -> None:
    """No budget left after the first case: the smallest case and its exact pivot still run (as they did within
    a CPU-time budget), no other case does, and the cause search, with no budget at all, states no cause."""
    _budgets(monkeypatch, 1e-6, 0.0)
    record, _report_text = _review(monkeypatch)
    assert (record["envelope_cases"], record["envelope_exact_cases"]) == (1, 1)
    assert record["causes"] == [] and record["cause_search"] == "done"
    assert all(o["cause"] == "cause not identified" for o in record["outputs"] if o["verdict"] == "disagree")
    assert record["disagree"], "the port should disagree (a cause was to be searched)"


@pytest.mark.slow
def test_the_safety_net_fails_the_review_as_a_harness_error(
        fast_cpu_clock: Callable[..., None], monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """A stalled machine (the CPU clock 1,000 s later at every reading): the review raises the safety net's
    error, and ``nkieval review`` exits 3 (harness-error, retry) instead of reporting fewer cases."""
    from nkieval.cli import main
    from nkieval.tasks.loader import PORTS_ROOT

    fast_cpu_clock(monkeypatch, 1.0, step_s=1000.0)
    with pytest.raises(cuda.ExecutorSafetyNet):
        _review(monkeypatch)
    cand = PORTS_ROOT / TASK / "flawed" / CANDIDATE
    r = CliRunner().invoke(main, ["review", str(PORTS_ROOT / TASK), str(cand), "--seed", str(SEED),
                                  "--format", "json", "--no-progress"])
    assert r.exit_code == 3, r.output
    assert "ExecutorSafetyNet" in r.output

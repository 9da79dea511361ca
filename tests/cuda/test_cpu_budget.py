"""The executor's plain time limits count CPU time of the executing thread, not wall time, and the review's
executor budget counts neither: it counts the runs' work units (tests/cuda/test_work_budget.py)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest
from cuda_testlib import LOOP

from nkieval.cuda import run_host
from nkieval.review.stages import differential


def _wall_clocks_run_ahead(monkeypatch: pytest.MonkeyPatch, step_s: float) -> None:
    """Every wall clock advances ``step_s`` per reading (as if other processes held the CPU in between)."""
    for name in ("perf_counter", "monotonic", "time"):
        real = getattr(time, name)
        ahead = [0.0]

        def clock(real=real, ahead=ahead) -> float:  # type: ignore[no-untyped-def]
            ahead[0] += step_s
            return real() + ahead[0]

        monkeypatch.setattr(time, name, clock)


def test_a_time_limit_is_cpu_time_a_loaded_wall_clock_does_not_stop_the_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    a = np.arange(256, dtype=np.float32)
    args = {"a": a, "out": np.zeros_like(a), "n": a.size, "reps": 20}
    want = run_host(LOOP, "run", args).memory["out"]
    _wall_clocks_run_ahead(monkeypatch, 100.0)
    # (the loop checks its limit once per iteration: a wall clock would be 2,000 s past a 5 s limit)
    got = run_host(LOOP, "run", args, time_limit_s=5.0).memory["out"]
    np.testing.assert_array_equal(got, want)


def test_a_run_past_its_cpu_time_limit_still_stops() -> None:
    from nkieval.cuda import ExecutorTimeout

    a = np.ones(128, np.float32)
    with pytest.raises(ExecutorTimeout):
        run_host(LOOP, "run", {"a": a, "out": np.zeros_like(a), "n": a.size, "reps": 10_000_000},
                 time_limit_s=0.2)


def test_the_review_budget_counts_the_runs_work_not_the_time_it_took() -> None:
    # (a run that also waits a second, as the executor does while a competitor holds the CPU: it is charged the
    # work its run counted, whatever the time)
    data = SimpleNamespace(get_derived=lambda key, compute: compute(), timed_out_within=lambda key, limit: None,
                           note_timeout=lambda key, limit: None)
    a = np.arange(256, dtype=np.float32)
    runs = []

    def waiting_run() -> tuple[list[np.ndarray], object]:
        runs.append(run_host(LOOP, "run", {"a": a, "out": np.zeros_like(a), "n": a.size, "reps": 20}))
        time.sleep(1.0)
        return [runs[-1].memory["out"]], runs[-1]

    _out, (_options, took, _warnings) = differential._gpu_outputs(data, "src", "case", waiting_run, 10**9)  # type: ignore[arg-type]
    assert took == runs[0].work > 0


def test_an_output_bitwise_equal_to_the_gpu_is_said_so_not_given_a_ratio() -> None:
    from nkieval.review.model import CaseResult, CriterionResult
    from nkieval.review.rubric import load_rubric
    from nkieval.review.scoring import Evidence, score_migration
    from nkieval.tasks.loader import builtin_tasks

    task = next(t for t in builtin_tasks() if t.id == "topk")
    rubric = load_rubric()
    crit = next(c for c in rubric.criteria if c.id == "migration")
    ok = CaseResult("public-0/normal", {}, False, "normal", 1, "ok", correct=True)
    passed = CriterionResult("x", "x", 1.0, "pass", 4, "")
    outs = [{"output": "values", "verdict": "agree", "tol_ratio": 0.0, "observed": 0.0, "envelope": 2e-7,
             "cases": 2},
            {"output": "indices", "verdict": "agree", "tol_ratio": 0.1, "observed": 3e-8, "envelope": 2e-7,
             "cases": 2}]
    ev = Evidence(task=task, rubric=rubric, target="trn2", cases=[ok], migration=[],
                  differential={"causes": [], "unexplained": [], "outputs": outs})
    lines = {f.evidence["output"]: f.observed for f in score_migration(ev, crit, passed, passed).feedback
             if f.severity == "info" and "envelope" in f.evidence}
    assert "observed max difference 0 (bitwise equal), expected envelope 2e-07" in lines["values"]
    assert "observed max difference 3e-08, expected envelope 2e-07" in lines["indices"]

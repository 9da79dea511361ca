"""The executor's work units (``nkieval.cuda.executor_work``): counted by the interpreter, exact from run to run
and whatever the CPU clock says, the unit of every work limit; the CPU clock is only a safety net far above a
limit, and past it the run is a harness fault (``ExecutorSafetyNet``), never a timeout or a fault."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from cuda_testlib import LOOP

import nkieval.cuda as cuda
from nkieval.cuda import (
    CudaError,
    ExecutorSafetyNet,
    ExecutorTimeout,
    executor_work,
    run_host,
    work_units,
)
from nkieval.cuda.interp import STATEMENT_WORK


def _args(reps: int, n: int = 256) -> dict[str, object]:
    a = np.arange(n, dtype=np.float32)
    return {"a": a, "out": np.zeros_like(a), "n": n, "reps": reps}


def _loop_size() -> int:
    """The work weight of one iteration of LOOP's loop: its condition, update and one-statement body."""
    from nkieval.cuda import parse_program
    from nkieval.cuda.interp import statement_size

    stack = [parse_program(LOOP).functions["k"]]
    while stack:
        n = stack.pop()
        if n.type == "for_statement":
            return sum(statement_size(n.child_by_field_name(f)) for f in ("condition", "update", "body"))
        stack.extend(n.named_children)
    raise AssertionError("no loop")


def test_the_work_count_is_exact_from_run_to_run_and_counts_each_iteration_per_lane() -> None:
    counts = []
    for _ in range(3):
        w0 = executor_work()
        run = run_host(LOOP, "run", _args(20))
        assert executor_work() - w0 == run.work > 0  # (the thread's count: what the review's budgets read)
        counts.append(run.work)
    assert len(set(counts)) == 1
    # (20 more iterations over one group of 256 lanes: 20 iterations' weight, each (STATEMENT_WORK + 256) per node)
    size = _loop_size()
    assert size >= 5  # (r < reps, ++r, acc = acc * 0.5f + a[i]: a dozen nodes)
    more = run_host(LOOP, "run", _args(40)).work
    assert more - counts[0] == 20 * size * (STATEMENT_WORK + 256)
    # (over twice the lanes, each node counts 256 more)
    wide = run_host(LOOP, "run", _args(40, 512)).work - run_host(LOOP, "run", _args(20, 512)).work
    assert wide == 20 * size * (STATEMENT_WORK + 512)


def test_a_work_limit_stops_the_run_at_the_same_work_whatever_the_cpu_clock(
        fast_cpu_clock: Callable[..., None], monkeypatch: pytest.MonkeyPatch) -> None:
    need = run_host(LOOP, "run", _args(200)).work
    want = run_host(LOOP, "run", _args(200)).memory["out"]

    def outcome() -> tuple[object, int]:
        w0 = executor_work()
        try:
            out = run_host(LOOP, "run", _args(200), work_limit=need).memory["out"]
            got: object = out.tobytes()
        except ExecutorTimeout:
            got = "timeout"
        try:
            run_host(LOOP, "run", _args(200), work_limit=need // 2)
            short: object = "finished"
        except ExecutorTimeout:
            short = "timeout"
        return (got, short), executor_work() - w0

    normal = outcome()
    with monkeypatch.context() as m:
        fast_cpu_clock(m, 5.0)
        slow_machine = outcome()
    assert normal == slow_machine
    assert normal[0] == (want.tobytes(), "timeout")


def test_the_safety_net_is_a_harness_fault_not_a_timeout_nor_a_fault(
        fast_cpu_clock: Callable[..., None], monkeypatch: pytest.MonkeyPatch) -> None:
    fast_cpu_clock(monkeypatch, 1.0, step_s=1000.0)  # (a stalled machine: every reading 1,000 s later)
    with pytest.raises(ExecutorSafetyNet) as e:
        run_host(LOOP, "run", _args(10_000), work_limit=work_units(10.0))
    assert not isinstance(e.value, CudaError)  # (nothing that catches the executor's errors takes it for one)
    assert "harness fault" in str(e.value)
    with pytest.raises(ExecutorTimeout):  # (a plain CPU-time limit, without a work limit, stays a timeout)
        run_host(LOOP, "run", _args(10_000), time_limit_s=10.0)


def test_the_safety_net_is_far_above_the_limit_it_guards() -> None:
    from nkieval.cuda.values import SAFETY_FACTOR, WORK_PER_S, safety_seconds

    assert SAFETY_FACTOR >= 4
    assert safety_seconds(work_units(6.0)) >= 4 * 6.0
    assert work_units(1.0) == WORK_PER_S


def test_a_mutant_search_does_not_take_the_safety_net_for_a_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cause search counts any error of a mutant as a fault (``faults=(Exception,)``): the safety net still
    propagates, and nothing is kept (a retried review runs it again)."""
    from types import SimpleNamespace

    from nkieval.review.stages.kept_runs import KeptRuns, kept_cuda_run

    def stalled(*a: object, **k: object) -> object:
        raise ExecutorSafetyNet(3)

    monkeypatch.setattr(cuda, "run_task_cuda", stalled)
    store = KeptRuns(1 << 20)
    task = SimpleNamespace(params={})
    for _ in range(2):
        with pytest.raises(ExecutorSafetyNet):
            kept_cuda_run(task, "fp", {}, "sha", {"N": 4}, "src", {}, work_units(1.0), faults=(Exception,),
                          store=store)
    assert store.stats()["entries"] == 0

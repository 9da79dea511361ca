"""The cause search's CUDA runs kept across reviews (``review/stages/kept_runs.py``): keyed by everything a run
depends on, bounded, a timeout never kept as a success, and a warm review's report equal to a cold one's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from review_testlib import report_text

from nkieval.cuda import CudaError, ExecutorTimeout
from nkieval.review.stages.kept_runs import ENTRY_OVERHEAD, KeptRun, KeptRuns, inputs_digest, run_key


class _Clock:
    """A stand-in executor work count: each run advances it by the work units the test says the run takes."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def _runner(clock: _Clock, took: int, result: object):
    calls: list[int] = []

    def compute(limit: int):
        calls.append(limit)
        clock.now += min(took, limit)
        if took > limit:
            raise ExecutorTimeout("ran past its limit")
        if isinstance(result, Exception):
            raise result
        return result

    return compute, calls


def test_a_finished_run_is_kept_with_its_work_and_read_only() -> None:
    kept, clock = KeptRuns(1 << 20), _Clock()
    compute, calls = _runner(clock, 300, [np.arange(4, dtype=np.float32)])
    _out, took = kept.run("k", 1000, compute, clock)
    again, took2 = kept.run("k", 1000, compute, clock)
    assert calls == [1000] and took == took2 == 300
    assert np.array_equal(again[0], np.arange(4)) and not again[0].flags.writeable
    assert kept.stats()["hits"] == 1


def test_a_kept_run_longer_than_the_limit_times_out_as_a_fresh_run_would() -> None:
    kept, clock = KeptRuns(1 << 20), _Clock()
    compute, calls = _runner(clock, 800, [np.ones(2)])
    assert kept.run("k", 2000, compute, clock)[0] is not None
    assert kept.run("k", 500, compute, clock) == (None, 500)  # charged the limit, not run again
    assert calls == [2000]


def test_a_timeout_is_kept_as_a_timeout_and_runs_again_with_more_time() -> None:
    kept, clock = KeptRuns(1 << 20), _Clock()
    compute, calls = _runner(clock, 1500, [np.ones(2)])
    assert kept.run("k", 1000, compute, clock) == (None, 1000)
    for limit in (1000, 250):  # no more work than the run that timed out: the timeout at once, charged the limit
        assert kept.run("k", limit, compute, clock) == (None, limit)
    assert calls == [1000]
    out, took = kept.run("k", 2000, compute, clock)  # more work: it runs again, and finishes
    assert calls == [1000, 2000] and out is not None and took == 1500
    assert kept.run("k", 2000, compute, clock)[0] is not None and calls == [1000, 2000]


def test_a_run_that_finishes_just_past_its_limit_is_a_timeout_the_first_time_too() -> None:
    kept, clock = KeptRuns(1 << 20), _Clock()

    def slow(limit: int):
        clock.now += limit + 10  # (the executor checks its limit at loop iterations: it can finish a little past)
        return [np.ones(2)]

    assert kept.run("k", 1000, slow, clock) == (None, 1000)
    assert kept.run("k", 1000, slow, clock) == (None, 1000)
    assert kept.run("k", 2000, slow, clock)[0] is not None  # (kept finished: a longer limit gets its outputs)


def test_a_fault_is_kept_and_another_error_propagates_unkept(monkeypatch: pytest.MonkeyPatch) -> None:
    import nkieval.cuda as cuda
    from nkieval.review.stages import kept_runs

    store = KeptRuns(1 << 20)
    monkeypatch.setattr(kept_runs, "KEPT_RUNS", store)
    calls: list[str] = []

    def faulting(task, inputs, dims, params, *, source, work_limit):
        calls.append(source)
        raise CudaError("out of bounds") if source == "fault" else ValueError("an executor bug")

    monkeypatch.setattr(cuda, "run_task_cuda", faulting)
    args = (None, "fp", {}, "sha", {"N": 4})
    for _ in range(2):
        assert kept_runs.kept_cuda_run(*args, "fault", {}, 1000)[0] is None
    assert calls == ["fault"]
    for _ in range(2):  # (not a fault of the hypothesis: the judge fails closed, and nothing is kept)
        with pytest.raises(ValueError):
            kept_runs.kept_cuda_run(*args, "bug", {}, 1000)
    assert calls == ["fault", "bug", "bug"]
    assert kept_runs.kept_cuda_run(*args, "bug", {}, 1000, faults=(Exception,))[0] is None  # (a mutant's search)


def test_the_bound_evicts_the_least_recently_used_and_never_keeps_an_oversized_run() -> None:
    size = 1000 * 8 + ENTRY_OVERHEAD
    kept = KeptRuns(3 * size)
    for k in "abc":
        kept.put(k, KeptRun((np.zeros(1000),), 100))
    assert kept.get("a") is not None  # a is now the most recently used
    kept.put("d", KeptRun((np.zeros(1000),), 100))
    assert kept.get("b") is None and kept.get("a") is not None and kept.stats()["evictions"] == 1
    assert kept.stats()["bytes"] == 3 * size
    kept.put("huge", KeptRun((np.zeros(10_000),), 100))
    assert kept.get("huge") is None and kept.stats()["entries"] == 3
    few = KeptRuns(1 << 30, max_entries=2)
    for k in "xyz":
        few.put(k, KeptRun(None, 100, 1000))
    assert few.get("x") is None and few.stats()["entries"] == 2
    off = KeptRuns(0)  # NKIEVAL_KEPT_RUNS_MB=0: nothing kept
    off.put("k", KeptRun(None, 100))
    assert off.get("k") is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 3000), st.booleans()), max_size=40),
       st.integers(0, 40_000), st.integers(0, 6))
def test_the_bounds_hold_and_the_byte_count_is_exact(puts, max_bytes: int, max_entries: int) -> None:
    kept = KeptRuns(max_bytes, max_entries)
    for key, n, timed_out in puts:
        kept.put(key, KeptRun(None, 100, 1000) if timed_out else KeptRun((np.zeros(n, np.uint8),), 100))
        stats = kept.stats()
        assert stats["bytes"] <= max_bytes and stats["entries"] <= max_entries
        assert stats["bytes"] == sum(r.nbytes() for r, _ in kept._d.values())
    if puts and puts[-1][1] + ENTRY_OVERHEAD <= max_bytes and max_entries and not puts[-1][2]:
        assert kept.get(puts[-1][0]) is not None  # (the last run put is kept when it fits)


def test_the_key_tells_apart_everything_a_run_depends_on() -> None:
    x = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    base = run_key("task-a", "src", inputs_digest(x), {"N": 2, "D": 3}, {"eps": 1e-6})
    assert base == run_key("task-a", "src", inputs_digest({"x": x["x"].copy()}), {"D": 3, "N": 2}, {"eps": 1e-6})
    y = {"x": x["x"].copy()}
    y["x"][1, 2] = -1
    others = [run_key("task-b", "src", inputs_digest(x), {"N": 2, "D": 3}, {"eps": 1e-6}),
              run_key("task-a", "src2", inputs_digest(x), {"N": 2, "D": 3}, {"eps": 1e-6}),
              run_key("task-a", "src", inputs_digest(y), {"N": 2, "D": 3}, {"eps": 1e-6}),
              run_key("task-a", "src", inputs_digest({"x": x["x"].astype(np.float64)}), {"N": 2, "D": 3},
                      {"eps": 1e-6}),
              run_key("task-a", "src", inputs_digest(x), {"N": 3, "D": 3}, {"eps": 1e-6}),
              run_key("task-a", "src", inputs_digest(x), {"N": 2, "D": 3}, {"eps": 1e-5})]
    assert len({base, *others}) == 1 + len(others)


# ------------------------------------------------------------------------------ a warm judge, end to end
def _count_cuda_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import nkieval.cuda as cuda

    calls: list[int] = []
    real = cuda.run_task_cuda

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(cuda, "run_task_cuda", counting)
    return calls


def test_a_warm_cause_search_runs_no_cuda_kernel_and_reports_what_a_cold_one_does(monkeypatch: pytest.MonkeyPatch
                                                                                    ) -> None:
    """rmsnorm_warp's bf16_square_sum port needs the mutation search, one of whose mutants runs past its time
    limit: a warm review of it (after another flawed port of the task) runs no CUDA kernel at all, and its
    report equals the cold review's and that of a review without any cross-review cache."""
    from nkieval.review import review
    from nkieval.review.stages import clear_caches
    from nkieval.tasks.loader import PORTS_ROOT, load_task

    task = load_task(PORTS_ROOT / "rmsnorm_warp")
    cand = task.directory / "flawed" / "bf16_square_sum.py"
    clear_caches()
    cold = review(task, cand, seed=1, compare_references=False)
    assert "re-running the CUDA kernel with" in report_text(cold), "the port's cause search should state a cause"
    review(task, task.directory / "flawed" / "sum_not_mean.py", seed=1, compare_references=False)
    with monkeypatch.context() as m:
        calls = _count_cuda_runs(m)
        warm = review(task, cand, seed=1, compare_references=False)
        assert calls == [], f"a warm review ran {len(calls)} CUDA kernels"
    plain = review(task, cand, seed=1, compare_references=False, cache=False)
    assert report_text(cold) == report_text(warm) == report_text(plain)


def test_the_constant_hypotheses_runs_are_kept_too(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """layernorm's expert with the CUDA kernel's epsilon changed (a cause the constant hypotheses find): the
    second sample of it (another text, the same kernel) re-runs no CUDA kernel and states the same cause."""
    from nkieval.review import review
    from nkieval.review.stages import clear_caches
    from nkieval.tasks import load_task

    task = load_task("layernorm")
    src = task.solution_file.read_text()
    assert "operand0=eps)" in src
    port = src.replace("operand0=eps)", "operand0=1e-6)")
    clear_caches()
    first = review(task, port, seed=7, compare_references=False)
    assert "re-running the CUDA kernel with 1e-6 reproduces" in report_text(first)
    with monkeypatch.context() as m:
        calls = _count_cuda_runs(m)
        second = review(task, port + "\n# another sample\n", seed=7, compare_references=False)
        assert calls == [], f"a warm review ran {len(calls)} CUDA kernels"
    assert first.criterion("migration").to_dict() == second.criterion("migration").to_dict()

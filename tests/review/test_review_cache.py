"""The cross-review case cache: same reports with and without it, keyed by content, bounded."""

import shutil

import numpy as np
import pytest
from review_testlib import report_text

from nkieval.review import review
from nkieval.review.cache import CASE_CACHE, CaseCache, new_case_data, task_fingerprint
from nkieval.tasks import BUILTIN_ROOT, load_task

TASK = "vector_add"


def test_cached_review_equals_uncached_and_hits():
    task = load_task(TASK)
    cand = BUILTIN_ROOT / TASK / "flawed" / task.flawed[0].file.split("/")[-1]
    CASE_CACHE.clear()
    cold = review(task, cand, seed=11)
    after_cold = CASE_CACHE.stats()
    assert after_cold["misses"] == len(cold.cases) and after_cold["entries"] == len(cold.cases)
    warm = review(task, cand, seed=11)
    assert CASE_CACHE.stats()["hits"] == after_cold["hits"] + len(warm.cases)
    plain = review(task, cand, seed=11, cache=False)
    assert report_text(cold) == report_text(warm) == report_text(plain)
    other = review(task, task.solution_file, seed=11)  # another candidate reuses the same cases
    assert CASE_CACHE.stats()["hits"] == after_cold["hits"] + 2 * len(warm.cases)
    assert report_text(other) == report_text(review(task, task.solution_file, seed=11, cache=False))


def test_fresh_secret_seed_is_not_cached():
    CASE_CACHE.clear()
    review(TASK, BUILTIN_ROOT / TASK / "solution_nki.py")
    assert CASE_CACHE.stats()["entries"] == 0


def test_fingerprint_follows_reference_and_task_content(tmp_path):
    src = BUILTIN_ROOT / TASK
    d = tmp_path / TASK
    shutil.copytree(src, d)
    fp0 = task_fingerprint(load_task(d))
    assert fp0 == task_fingerprint(load_task(src))  # content, not location
    (d / "reference.py").write_text((d / "reference.py").read_text() + "\n# changed\n")
    fp1 = task_fingerprint(load_task(d))
    (d / "task.toml").write_text((d / "task.toml").read_text().replace("rtol", "rtol", 1) + "\n# changed\n")
    fp2 = task_fingerprint(load_task(d))
    assert len({fp0, fp1, fp2}) == 3


def test_lru_is_bounded_by_bytes_and_arrays_are_read_only():
    entries = [new_case_data({"a": np.zeros(1000, np.float32)}, b"x" * 1000) for _ in range(5)]
    size = entries[0].nbytes()
    cache = CaseCache(max_bytes=3 * size)
    for i, e in enumerate(entries):
        cache.put(i, e)
    assert cache.stats()["entries"] == 3 and cache.stats()["evictions"] == 2
    assert cache.get(0) is None and cache.get(4) is entries[4]
    cache.get(2)  # most recently used now: survives the next insertion
    cache.put(5, new_case_data({"a": np.zeros(1000, np.float32)}, b"x" * 1000))
    assert cache.get(2) is entries[2] and cache.get(3) is None
    with pytest.raises(ValueError):
        entries[0].inputs["a"][0] = 1.0
    assert CaseCache(max_bytes=0).get(1) is None



def test_the_cuda_kernels_outputs_are_computed_once_per_case_and_seed(monkeypatch):
    """The differential stage's GPU side (the task's kernel.cu on the review's inputs and on the edge inputs) does
    not depend on the candidate: a later review with the same seed reuses it, and reports the same."""
    import nkieval.cuda as cuda

    task = load_task("rmsnorm")
    calls: list[int] = []
    real = cuda.run_task_cuda

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(cuda, "run_task_cuda", counting)
    CASE_CACHE.clear()
    cold = review(task, task.solution_file, seed=5)
    n_cold = len(calls)
    assert n_cold >= 2, "the review runs the CUDA kernel on its cases and on edge inputs"
    other = review(task, task.baseline_file, seed=5)
    assert len(calls) == n_cold, "a warm review ran the CUDA kernel again"
    assert "differential check against the CUDA source not assessed" not in report_text(other)
    assert report_text(other) == report_text(review(task, task.baseline_file, seed=5, cache=False))
    assert len(calls) > n_cold, "without the cache the kernel runs again"
    assert report_text(cold) == report_text(review(task, task.solution_file, seed=5))


def test_a_kept_cases_inputs_are_packed_once_for_every_later_run(monkeypatch):
    """A kept case's inputs are packed into array-file bytes once, when a review first loads it, and every later
    review's jobs carry those bytes: a candidate run in a child (``trusted=False``) reads them, and so does the
    replay worker, whose jobs send them as their arrays (before, a trusted review's worker jobs packed the same
    inputs again for every candidate). A review whose cases are not kept (no seed), or that has no replay worker,
    packs nothing up front: the judge's own replays read the arrays."""
    from nkieval.review import npzio, replay_worker
    from nkieval.review.pipeline import DEFAULT_RUBRIC
    from nkieval.review.runs import SandboxLimits
    from nkieval.review.stages.load import ReviewRequest, load

    task = load_task(TASK)
    cand = BUILTIN_ROOT / TASK / "solution_nki.py"
    CASE_CACHE.clear()
    monkeypatch.setenv("NKIEVAL_REPLAY_WORKER", "1")

    def loaded(trusted: bool, seed: int | None = 5):
        return load(ReviewRequest(task, cand, None, seed, DEFAULT_RUBRIC, None, "all", "forkserver", None, None,
                                  True, None, trusted))

    replayed = loaded(True)
    for d, j in zip(replayed.data, replayed.jobs):
        assert d.packed is not None and j.packed is d.packed
        assert bytes(d.packed) == npzio.dumps(d.inputs)
    child = loaded(False)
    assert [d is e for d, e in zip(replayed.data, child.data)] == [True] * len(child.data)  # (the same cache entries)
    for d, j in zip(child.data, child.jobs):
        assert j.packed is d.packed
        assert d.packed_inputs(lambda inputs: pytest.fail("packed twice")) == (d.packed, d.sealed)
    unkept = loaded(True, seed=None)
    assert all(j.packed is None for j in unkept.jobs)
    CASE_CACHE.clear()
    monkeypatch.setenv("NKIEVAL_REPLAY_WORKER", "0")  # (no worker: nothing sends the bytes, so none are made)
    assert all(j.packed is None for j in loaded(True).jobs)

    # the replay worker's job sends the kept bytes as they are (no worker process is started: only the frame is read)
    w = replay_worker.ReplayWorker()
    monkeypatch.setattr(w, "_ensure_thread", lambda: None)
    monkeypatch.setattr(npzio, "dumps", lambda *a, **k: pytest.fail("a kept case's inputs packed again"))
    job = w.submit(b"{}", replayed.jobs[0], "trn2", SandboxLimits())
    assert job is not None and job.frame[2] is replayed.jobs[0].packed
    assert job.take_back()
    CASE_CACHE.clear()


class _Prepared:
    """Stands for a prepared numerics check: only its size matters to the cache."""

    def __init__(self, n: int) -> None:
        self.n = n

    def nbytes(self) -> int:
        return self.n


def _case_with_prepared(n: int):
    d = new_case_data({"a": np.zeros(250, np.float32)}, b"x" * 1000)
    d.prepared, d.prepared_done = _Prepared(n), True
    d.derived["cuda"] = ([np.ones(10, np.float32)], None)
    return d


def test_over_its_bound_the_cache_drops_prepared_checks_before_cases():
    e = [_case_with_prepared(10_000) for _ in range(6)]
    full = e[0].nbytes()
    cache = CaseCache(max_bytes=3 * full - 1)  # just under three cases with their checks
    for i in range(3):
        cache.put(i, e[i])
    s = cache.stats()
    assert (s["entries"], s["evictions"], s["prepared_shed"]) == (3, 0, 1)
    assert [d.prepared_done for d in e[:3]] == [False, True, True]  # the least recently used case's check
    assert e[0].prepared is None and e[0].derived["cuda"][0][0].size == 10  # the rest of it stays
    assert s["bytes"] == sum(d.nbytes() for d in e[:3]) <= cache.max_bytes
    cache.put(3, e[3])  # every other check goes before any case does
    s = cache.stats()
    assert (s["entries"], s["evictions"], s["prepared_shed"]) == (4, 0, 2)
    assert [d.prepared_done for d in e[:4]] == [False, False, True, True]
    with cache.pinned([2, None]):  # a review's cases lose nothing while it runs
        cache.put(4, e[4])
    assert [d.prepared_done for d in e[:5]] == [False, False, True, False, True]
    with e[2].lock:  # a case another thread holds (it may be building its check) is passed over
        cache.put(5, e[5])
    assert e[2].prepared_done and not e[4].prepared_done
    # where dropping every other check is not enough, whole cases go, least recently used first
    cache.put(6, _case_with_prepared(2 * full))
    assert cache.get(0) is None and cache.get(6) is not None
    assert all(not d.prepared_done for k, (d, _) in cache._d.items() if k != 6)
    assert cache.stats()["bytes"] <= cache.max_bytes
    # a pinned case over the bound is kept until its review ends, then trimmed like any other
    big = _case_with_prepared(4 * full)
    with cache.pinned([7]):
        cache.put(7, big)
        assert cache.get(7) is big and big.prepared_done
    assert cache.get(7) is big and not big.prepared_done and cache.stats()["bytes"] <= cache.max_bytes


def test_a_review_whose_prepared_checks_were_dropped_reports_the_same_without_running_cuda_again(monkeypatch):
    """A bound that holds the task's cases but not all their prepared checks: the checks are rebuilt, the CUDA
    kernel's outputs and the reference are not, and the reports are those of an unbounded cache (also where a
    case's check was dropped between its verdict and its diagnosis)."""
    import nkieval.cuda as cuda

    task = load_task("rmsnorm")
    flawed = BUILTIN_ROOT / "rmsnorm" / "flawed" / "bf16_sum_of_squares.py"  # its failing cases are diagnosed
    CASE_CACHE.clear()
    want = [report_text(review(task, f, seed=5)) for f in (task.solution_file, flawed)]
    kept = [d for d, _ in CASE_CACHE._d.values()]
    rest = sum(d.nbytes() - d.prepared_nbytes() for d in kept)
    assert max(d.prepared_nbytes() for d in kept) > 0
    monkeypatch.setattr(CASE_CACHE, "max_bytes", rest + max(d.prepared_nbytes() for d in kept))
    calls: list[int] = []
    real = cuda.run_task_cuda
    monkeypatch.setattr(cuda, "run_task_cuda", lambda *a, **k: calls.append(1) or real(*a, **k))
    CASE_CACHE.clear()
    got = [report_text(review(task, task.solution_file, seed=5))]
    n_cold = len(calls)
    got.append(report_text(review(task, flawed, seed=5)))
    s = CASE_CACHE.stats()
    assert s["prepared_shed"] > 0 and s["evictions"] == 0
    assert len(calls) == n_cold, "a case's CUDA outputs went with its prepared check"
    assert got == want


def test_a_diagnosis_uses_the_check_that_gave_the_verdict_even_if_the_cache_dropped_it(monkeypatch):
    """The cache may drop a case's prepared check between its verdict and its diagnosis (another case of the
    review made room): the diagnosis uses the check the verdict came from, and the report is the same."""
    from nkieval.review.stages import judge

    task = load_task("rmsnorm")
    flawed = BUILTIN_ROOT / "rmsnorm" / "flawed" / "bf16_sum_of_squares.py"
    CASE_CACHE.clear()
    want = report_text(review(task, flawed, seed=5))
    assert '"findings"' in want  # (its failing cases are diagnosed)
    real = judge.judge_case

    def judged_then_dropped(kit, i, run, timings):
        out = real(kit, i, run, timings)
        kit.loaded.data[i].shed_prepared()
        return out

    monkeypatch.setattr(judge, "judge_case", judged_then_dropped)
    CASE_CACHE.clear()
    assert report_text(review(task, flawed, seed=5)) == want


def test_the_default_bound_is_a_quarter_of_memory_per_core_within_limits():
    from nkieval.review.cache import MAX_DEFAULT_MB, MIN_DEFAULT_MB, default_cache_mb

    assert default_cache_mb(24 << 30, 2) == 3072
    assert default_cache_mb(16 << 30, 8) == MIN_DEFAULT_MB  # (512 MiB a core: the floor)
    assert default_cache_mb(2 << 40, 64) == MAX_DEFAULT_MB

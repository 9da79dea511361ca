"""The executor's time limits and the review's executor budget count CPU time of the executing thread, not
wall time: on a loaded machine (a clock that runs ahead of the work, a competitor holding the CPU while the
executor waits) a review covers the same cases as on an idle one."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

from nkieval.cuda import executor_seconds, run_host
from nkieval.review.stages import differential

LOOP = """
__global__ void k(const float* a, float* out, int n, int reps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f;
    for (int r = 0; r < reps; ++r) acc = acc * 0.5f + a[i];
    out[i] = acc;
}
void run(const float* a, float* out, int n, int reps) { k<<<(n + 127) / 128, 128>>>(a, out, n, reps); }
"""


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


def test_the_review_budget_counts_the_executor_cpu_seconds_not_time_waiting() -> None:
    # (a run that waits a second without computing, as the executor does while a competitor holds the CPU)
    data = SimpleNamespace(get_derived=lambda key, compute: compute())
    cr = SimpleNamespace(options=None, warnings=[])

    def waiting_run() -> tuple[list[np.ndarray], object]:
        time.sleep(1.0)
        return [np.zeros(1, np.float32)], cr

    t0 = executor_seconds()
    _out, (_options, took, _warnings) = differential._gpu_outputs(data, "src", "case", waiting_run)  # type: ignore[arg-type]
    assert took < 0.5, took
    assert executor_seconds() - t0 < 0.5

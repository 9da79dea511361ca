"""Math builtins' work (``nkieval.cuda.builtins.MATH_LANE_WORK``): a call counts its weight per lane of its value,
so a kernel whose CPU time goes to ``erff`` (Python's ``math.erf`` per element) is charged about what it costs,
as an ordinary kernel is, not a seventh of it: the review's budgets (in work units) then stop such a kernel where
they stop others."""

from __future__ import annotations

import time

import numpy as np

from nkieval.cuda import run_host
from nkieval.cuda.builtins import MATH_LANE_WORK
from nkieval.cuda.values import WORK_PER_S

CALLS = """
__global__ void k(const float* x, float* y, int n, int reps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    float acc = 0.0f;
    for (int r = 0; r < reps; ++r) acc += FN(v + 0.01f * (float)r);
    y[i] = acc;
}
void run(const float* x, float* y, int n, int reps) { k<<<(n + 255) / 256, 256>>>(x, y, n, reps); }
"""
#: the same kernel with the call's value its argument (plain arithmetic: what the node weights were fitted on)
PLAIN = CALLS.replace("FN(v + 0.01f * (float)r)", "(v + 0.01f * (float)r)")
#: CPU seconds / calibrated seconds of a builtin-bound kernel against the plain one's, at most this far from 1
#: either way: the spread (p90 / p10) of that ratio over the built-in port tasks' runs, about 2.1 after the
#: weights (docs/cuda.md, "Work units: math builtins"); the erff kernel without them is some 7-18x
TOLERANCE = 2.5


def _args(n: int, reps: int) -> dict[str, object]:
    x = (np.abs(np.random.default_rng(0).standard_normal(n)) * 0.3 + 0.05).astype(np.float32)
    return {"x": x, "y": np.zeros(n, np.float32), "n": n, "reps": reps}


def _cpu_over_calibrated(source: str, args: dict[str, object], runs: list[float]) -> float:
    t0 = time.thread_time()
    run = run_host(source, "run", args)
    runs.append((time.thread_time() - t0) / (run.work / WORK_PER_S))
    return min(runs)


def test_an_erff_bound_kernel_is_charged_its_cpu_as_plain_arithmetic_is() -> None:
    """Alternated, minimum of four each: the erff kernel's CPU per calibrated second is the plain kernel's within
    the fit's spread. Without the weights erff's count misses some 700 work units per lane and call (7-18x)."""
    args = _args(1 << 15, 8)
    erff, plain = CALLS.replace("FN", "erff"), PLAIN
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(4):
        a = _cpu_over_calibrated(erff, args, ours)
        b = _cpu_over_calibrated(plain, args, theirs)
    assert 1 / TOLERANCE <= a / b <= TOLERANCE, (a, b)


def test_a_call_counts_its_weight_per_lane_of_its_value() -> None:
    """``erff`` against ``fabsf`` (no weight: as cheap as the nodes it is) in the same kernel, the same syntax:
    the difference is erff's weight x the lanes of each call's value (all the group's lanes, masked or not: the
    executor computes every one), and a uniform argument counts once per call."""
    assert "fabsf" not in MATH_LANE_WORK and MATH_LANE_WORK["erff"] > 0
    n, reps = 300, 3  # (two blocks of 256 lanes: 512 lanes, 212 of them past n and masked)
    args = _args(n, reps)
    erff = run_host(CALLS.replace("FN", "erff"), "run", args).work
    fabs = run_host(CALLS.replace("FN", "fabsf"), "run", args).work
    assert erff - fabs == MATH_LANE_WORK["erff"] * 512 * reps
    assert erff == run_host(CALLS.replace("FN", "erff"), "run", args).work  # (the same every run)
    uniform = CALLS.replace("FN(v + 0.01f * (float)r)", "FN(0.5f)")
    erff_u = run_host(uniform.replace("FN", "erff"), "run", args).work
    fabs_u = run_host(uniform.replace("FN", "fabsf"), "run", args).work
    assert erff_u - fabs_u == MATH_LANE_WORK["erff"] * reps

"""The executor's memory accesses (``nkieval.cuda.interp``: ``gather``, ``scatter``, the shared-memory race check)
and its fused multiply-add, on kernels written for these tests: each result is checked against NumPy or against
what the CUDA programming model says the kernel reads, never against the executor's own earlier output."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.cuda import KernelFault, run_host
from nkieval.cuda.arith import fma32

# Two barrier phases over one __shared__ array: the first phase's writes are read after a barrier (no race);
# the second phase writes again and reads a neighbour's element before any barrier (a race in phase two only).
TWO_PHASES = """\
__global__ void phases(const float* x, float* y, float* z, int n) {
    __shared__ float s[64];
    const int t = threadIdx.x;
    s[t] = x[blockIdx.x * 64 + t];
    __syncthreads();
    y[blockIdx.x * 64 + t] = s[(t + 1) % 64];
    __syncthreads();
    s[t] = 2.0f * x[blockIdx.x * 64 + t];
    SECOND
    z[blockIdx.x * 64 + t] = s[(t + 3) % 64];
}
void host(const float* x, float* y, float* z, int n) { phases<<<n / 64, 64>>>(x, y, z, n); }
"""


def _phases(second: str) -> tuple[list[str], dict[str, np.ndarray]]:
    x = np.arange(128, dtype=np.float32)
    r = run_host(TWO_PHASES.replace("SECOND", second), "host",
                 {"x": x, "y": np.zeros(128, np.float32), "z": np.zeros(128, np.float32), "n": 128})
    return r.warnings, r.memory


def test_a_race_after_a_barrier_phase_without_one_is_still_found() -> None:
    warnings, mem = _phases("")
    assert len(warnings) == 1 and warnings[0].startswith("shared-memory race in phases at kernel.cu:10")
    assert "written by thread 3" in warnings[0]
    x = np.arange(128, dtype=np.float32).reshape(2, 64)
    np.testing.assert_array_equal(mem["y"], np.roll(x, -1, axis=1).reshape(-1))


def test_reads_after_a_barrier_are_not_races_in_any_phase() -> None:
    warnings, mem = _phases("__syncthreads();")
    assert warnings == []
    x = np.arange(128, dtype=np.float32).reshape(2, 64)
    np.testing.assert_array_equal(mem["z"], np.roll(2 * x, -3, axis=1).reshape(-1))


def test_a_thread_reading_its_own_write_is_no_race() -> None:
    src = TWO_PHASES.replace("SECOND", "").replace("s[(t + 3) % 64]", "s[t]")
    r = run_host(src, "host", {"x": np.ones(128, np.float32), "y": np.zeros(128, np.float32),
                              "z": np.zeros(128, np.float32), "n": 128})
    assert r.warnings == []
    np.testing.assert_array_equal(r.memory["z"], np.full(128, 2.0, np.float32))


MASKED = """\
__global__ void pick(const float* x, const int* idx, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && idx[i] >= 0) y[i] = x[idx[i]];
}
void host(const float* x, const int* idx, float* y, int n) { pick<<<(n + 31) / 32 + 1, 32>>>(x, idx, y, n); }
"""


def _pick(x: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    y = np.full(idx.size, -1.0, np.float32)
    return run_host(MASKED, "host", {"x": x, "idx": idx, "y": y, "n": n}).memory["y"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-5, 49), min_size=1, max_size=90), st.integers(0, 100))
def test_masked_loads_read_what_the_active_threads_index(ix: list[int], n: int) -> None:
    x = (np.arange(50, dtype=np.float32) * 1.5 + 0.25)
    idx = np.array(ix, np.int32)
    n = n % (idx.size + 1)  # (threads past n do not read idx)
    y = _pick(x, idx, n)
    want = np.full(idx.size, -1.0, np.float32)
    act = (np.arange(idx.size) < n) & (idx >= 0)
    want[act] = x[idx[act]]
    np.testing.assert_array_equal(y, want)


def test_an_inactive_threads_index_past_the_end_is_never_read_and_an_active_ones_faults() -> None:
    x = np.arange(50, dtype=np.float32)
    idx = np.array([3, 10**6, 7, -1, 49], np.int32)
    np.testing.assert_array_equal(_pick(x, idx, 1), [3, -1, -1, -1, -1])  # (threads 1-4 are past n)
    with pytest.raises(KernelFault, match=r"out-of-bounds read of x\[1000000\]"):
        _pick(x, idx, 2)
    np.testing.assert_array_equal(_pick(x, np.full(5, -1, np.int32), 5), np.full(5, -1.0, np.float32))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=3, max_size=3),
       st.sampled_from(["aaa", "aas", "asa", "saa", "sss", "ssa"]))
def test_fma32_rounds_the_exact_product_plus_the_addend_once(v: list[float], shapes: str) -> None:
    x, y, z = (np.float32(a) for a in v)
    vals = [np.full(4, a, np.float32) if k == "a" else a for a, k in zip((x, y, z), shapes)]
    with np.errstate(all="ignore"):
        got = fma32(*vals)
        want = np.float32(np.float64(x) * np.float64(y) + np.float64(z))  # (exact product in fp64, one sum)
    if "a" in shapes:
        assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.shape == (4,)
        np.testing.assert_array_equal(got, np.full(4, want, np.float32))
    else:
        assert isinstance(got, np.float32)
        np.testing.assert_array_equal(got, want)


def test_writes_before_a_barrier_do_not_race_with_reads_after_it_beside_new_writes() -> None:
    # phase two rewrites only the first half and reads the second half, which only phase one (before the
    # barrier) wrote: no race, although this phase has writes of its own
    src = TWO_PHASES.replace("s[t] = 2.0f * x[blockIdx.x * 64 + t];",
                             "if (t < 32) s[t] = 2.0f * x[blockIdx.x * 64 + t];")
    src = src.replace("SECOND", "").replace("s[(t + 3) % 64]", "s[32 + t % 32]")
    x = np.arange(128, dtype=np.float32)
    r = run_host(src, "host", {"x": x, "y": np.zeros(128, np.float32), "z": np.zeros(128, np.float32), "n": 128})
    assert r.warnings == []
    want = [x[b * 64 + 32 + t % 32] for b in range(2) for t in range(64)]  # (block b, thread t reads s[32 + t % 32])
    np.testing.assert_array_equal(r.memory["z"], np.array(want, np.float32))


SHIFTED = """\
__global__ void shifted(const float* x, float* y, int n, int k) {
    const int i = threadIdx.x;
    if (i < n) y[i] = x[i + k];
}
void host(const float* x, float* y, int n, int k) { shifted<<<1, 64>>>(x, y, n, k); }
"""


@pytest.mark.parametrize(("k", "fault"), [(0, None), (-1, "x[-1]"), (1, "x[16]"), (-40, "x[-40]"), (2**31 - 64, None)])
def test_reads_before_the_start_or_past_the_end_fault_naming_the_element(k: int, fault: str | None) -> None:
    x = np.arange(16, dtype=np.float32)
    args = {"x": x, "y": np.zeros(16, np.float32), "n": 16 if k != 2**31 - 64 else 0, "k": k}
    if fault is None:
        out = run_host(SHIFTED, "host", args).memory["y"]
        np.testing.assert_array_equal(out, x if k == 0 else np.zeros(16, np.float32))
        return
    with pytest.raises(KernelFault, match=re.escape(f"out-of-bounds read of {fault} ")):
        run_host(SHIFTED, "host", args)

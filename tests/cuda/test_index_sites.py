"""Element offsets a subscript keeps for the next time it meets the same operands (``nkieval.cuda.interp.IndexSite``):
results checked against NumPy, bounds faults against what the kernel reads, and the kept offsets' bookkeeping
(reused where the operands recur, never past a run, never past their byte budget)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nkieval.cuda.interp as interp
from nkieval.cuda import KernelFault, run_host
from nkieval.tasks.loader import BUILTIN_ROOT

# The built-in gemm_bf16 task's CUDA source: a shared-memory tiled product, the loop-invariant subscripts the
# kept offsets are for (``As[threadIdx.y][kk]`` meets the same ``threadIdx.y`` array every time and the same
# ``kk`` once per tile).
TILED = (BUILTIN_ROOT / "gemm_bf16" / "kernel.cu").read_text()


def _tiled(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    m, k = a.shape
    n = b.shape[1]
    r = run_host(TILED, "gemm_bf16", {"d_a_t": np.ascontiguousarray(a.T).astype(ml_dtypes.bfloat16),
                                      "d_b": b.astype(ml_dtypes.bfloat16), "d_c": np.zeros(m * n, np.float32),
                                      "M": m, "N": n, "K": k})
    return r.memory["d_c"].reshape(m, n)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 20), st.integers(1, 20), st.integers(1, 70), st.integers(0, 2**31 - 1))
def test_a_tiled_product_is_the_product(m: int, n: int, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    # small integers: exact in bf16, and every sum exact in fp32 whatever the order of the products
    a = rng.integers(-8, 9, (m, k)).astype(np.float32)
    b = rng.integers(-8, 9, (k, n)).astype(np.float32)
    np.testing.assert_array_equal(_tiled(a, b), a.astype(np.float64) @ b.astype(np.float64))


def test_the_inner_loops_offsets_are_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    made = []
    inner = interp.offset
    monkeypatch.setattr(interp, "offset", lambda base, i, step: made.append(1) or inner(base, i, step))
    a = np.ones((16, 64), np.float32)
    b = np.ones((64, 16), np.float32)
    np.testing.assert_array_equal(_tiled(a, b), np.full((16, 16), 64.0, np.float32))
    # Made afresh, the subscripts make 281 offset arrays, most of them the inner loop's four (16 times a tile,
    # 4 tiles). Kept: As[ty] and Bs[kk][tx] made twice (kept at their second sight), As[ty][kk] once per kk; the
    # loads' subscripts with an index computed in the loop (ka * M + row) are made each time.
    assert len(made) < 120  # (281 made afresh; 70 with the kept ones)


# One subscript (in the device function) reads two buffers of different sizes with the same offsets: offsets
# found in bounds of the larger must still be checked against the smaller.
TWO_SIZES = """\
__device__ float at(const float* p, int i) { return p[i]; }
__global__ void k(const float* big, const float* small, float* y) {
    const int t = threadIdx.x;
    float s = 0.0f;
    for (int r = 0; r < 3; ++r) s += at(big, t);
    y[t] = s + at(small, t);
}
void host(const float* big, const float* small, float* y, int n) { k<<<1, n>>>(big, small, y); }
"""


def test_offsets_in_bounds_of_a_larger_buffer_are_checked_against_a_smaller_one() -> None:
    big = np.arange(64, dtype=np.float32)
    with pytest.raises(KernelFault, match=r"out-of-bounds read of small\[63\] \(it holds 40 elements\)"):
        run_host(TWO_SIZES, "host", {"big": big, "small": np.zeros(40, np.float32), "y": np.zeros(64, np.float32),
                                     "n": 64})
    r = run_host(TWO_SIZES, "host", {"big": big, "small": np.ones(64, np.float32), "y": np.zeros(64, np.float32),
                                     "n": 64})
    np.testing.assert_array_equal(r.memory["y"], 3 * big + 1)


# The same for stores: offsets found in bounds of the larger buffer by its stores, then stored through into the
# smaller one.
TWO_SIZES_STORE = """\
__device__ void put(float* p, int i, float v) { p[i] = v; }
__global__ void k(float* big, float* small) {
    const int t = threadIdx.x;
    for (int r = 0; r < 3; ++r) put(big, t, (float)r);
    put(small, t, 7.0f);
}
void host(float* big, float* small, int n) { k<<<1, n>>>(big, small); }
"""


def test_stores_through_kept_offsets_are_checked() -> None:
    with pytest.raises(KernelFault, match=r"out-of-bounds write to small\[63\] \(it holds 40 elements\)"):
        run_host(TWO_SIZES_STORE, "host", {"big": np.zeros(64, np.float32), "small": np.zeros(40, np.float32),
                                           "n": 64})
    r = run_host(TWO_SIZES_STORE, "host", {"big": np.zeros(64, np.float32), "small": np.zeros(64, np.float32),
                                           "n": 64})
    np.testing.assert_array_equal(r.memory["big"], np.full(64, 2.0, np.float32))
    np.testing.assert_array_equal(r.memory["small"], np.full(64, 7.0, np.float32))


def test_a_subscript_with_an_index_new_at_every_call_stops_looking() -> None:
    src = """\
__global__ void k(const float* x, float* y, int n) {
    const int t = threadIdx.x;
    float s = 0.0f;
    for (int r = 0; r < 50; ++r) s += x[(t + r) % n];
    y[t] = s;
}
void host(const float* x, float* y, int n) { k<<<1, n>>>(x, y, n); }
"""
    sites: list[interp.IndexSite] = []
    init = interp.IndexSite.__init__

    def spy(self: interp.IndexSite) -> None:
        init(self)
        sites.append(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(interp.IndexSite, "__init__", spy)
        x = np.arange(16, dtype=np.float32)
        r = run_host(src, "host", {"x": x, "y": np.zeros(16, np.float32), "n": 16})
    want = np.array([sum(x[(t + i) % 16] for i in range(50)) for t in range(16)], np.float32)
    np.testing.assert_array_equal(r.memory["y"], want)
    stopped = [s for s in sites if s.fresh == -1]  # x[(t + r) % n]'s, and only it (y[t] runs once)
    assert len(stopped) == 1 and stopped[0].keys == []


def test_nothing_is_kept_after_a_run_or_past_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    a = np.ones((16, 64), np.float32)
    b = np.ones((64, 16), np.float32)
    _tiled(a, b)
    assert interp._KEPT == {} and interp._KEPT_BY_KEY == {} and interp._KEPT_BYTES[0] == 0
    with pytest.raises(KernelFault):
        run_host(TWO_SIZES, "host", {"big": np.ones(64, np.float32), "small": np.zeros(8, np.float32),
                                     "y": np.zeros(64, np.float32), "n": 64})
    assert interp._KEPT == {} and interp._KEPT_BY_KEY == {} and interp._KEPT_BYTES[0] == 0
    peak = []
    keep = interp._keep

    def watch(key: tuple[object, ...], kept: interp._KeptOffset) -> bool:
        ok = keep(key, kept)
        peak.append(interp._KEPT_BYTES[0])
        return ok

    monkeypatch.setattr(interp, "_keep", watch)
    monkeypatch.setattr(interp, "KEPT_MAX_BYTES", 12_000)  # two or three entries of 4-5 KiB (256 lanes)
    np.testing.assert_array_equal(_tiled(a, b), np.full((16, 16), 64.0, np.float32))
    assert peak and max(peak) <= 12_000 and max(peak) > 0 and sum(interp._KEPT_BYTES) == 0

"""Speed of the CUDA executor (nkieval.cuda) against NumPy doing the same math in the same run.

    python benchmarks/cuda_executor.py [--rows 4096 --cols 4096 --n 1048576 --repeat 3]

Two kernels: a 1M-element elementwise kernel (bias + GELU(tanh), one thread per element, bounds check)
and a row softmax with one warp per row (4096 x 4096 fp32: max and sum by warp shuffles). Prints the
executor's time, NumPy's, their ratio, and the largest difference of the results (in ulp of fp32).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from nkieval.cuda import run_host

ELEMENTWISE = r"""
__global__ void bias_gelu_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                 float* __restrict__ y, int n, int d) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * d) return;
    float v = x[i] + bias[i % d];
    float u = 0.7978845608f * (v + 0.044715f * v * v * v);
    y[i] = 0.5f * v * (1.0f + tanhf(u));
}
void bias_gelu(const float* x, const float* bias, float* y, int n, int d, cudaStream_t stream) {
    int total = n * d;
    bias_gelu_kernel<<<(total + 255) / 256, 256, 0, stream>>>(x, bias, y, n, d);
}
"""

SOFTMAX = r"""
#define WARPS 8
__global__ void softmax_warp_kernel(const float* __restrict__ x, float* __restrict__ y, int n, int d) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int row = blockIdx.x * WARPS + warp;
    if (row >= n) return;
    const float* xr = x + (long long)row * d;
    float* yr = y + (long long)row * d;
    float m = -FLT_MAX;
    for (int j = lane; j < d; j += 32) m = fmaxf(m, xr[j]);
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float s = 0.0f;
    for (int j = lane; j < d; j += 32) s += expf(xr[j] - m);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    float inv = 1.0f / s;
    for (int j = lane; j < d; j += 32) yr[j] = expf(xr[j] - m) * inv;
}
void softmax_warp(const float* x, float* y, int n, int d, cudaStream_t stream) {
    softmax_warp_kernel<<<(n + WARPS - 1) / WARPS, WARPS * 32, 0, stream>>>(x, y, n, d);
}
"""


def _numpy_elementwise(x: np.ndarray, bias: np.ndarray) -> np.ndarray:
    v = x + bias
    u = np.float32(0.7978845608) * (v + np.float32(0.044715) * v * v * v)
    return np.float32(0.5) * v * (np.float32(1.0) + np.tanh(u))


def _numpy_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max(axis=1, keepdims=True)
    e = np.exp(x - m)
    return e * (np.float32(1.0) / e.sum(axis=1, keepdims=True))


def _ulp(a: np.ndarray, b: np.ndarray) -> float:
    d = np.abs(a.astype(np.float64) - b)
    return float((d / np.spacing(np.maximum(np.abs(b), np.float32(1e-30)).astype(np.float32))).max())


def _best(fn: object, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 20, help="elements of the elementwise kernel")
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    rng = np.random.default_rng(0)

    d = 1024
    n = a.n // d
    x = rng.standard_normal((n, d)).astype(np.float32)
    bias = rng.standard_normal(d).astype(np.float32)
    t_ex, run = _best(lambda: run_host(ELEMENTWISE, "bias_gelu", {"x": x, "bias": bias, "y": np.zeros_like(x),
                                                                  "n": n, "d": d}), a.repeat)
    t_np, ref = _best(lambda: _numpy_elementwise(x, bias[None, :]), a.repeat)
    y = run.memory["y"].reshape(n, d)  # type: ignore[attr-defined]
    print(f"elementwise bias+GELU  {n * d:>9,d} elements  executor {t_ex:7.3f} s  numpy {t_np:7.4f} s  "
          f"ratio {t_ex / t_np:6.1f}x  max abs diff {np.abs(y - ref).max():.1e}")  # type: ignore[union-attr]

    xs = rng.standard_normal((a.rows, a.cols)).astype(np.float32)
    t_ex, run = _best(lambda: run_host(SOFTMAX, "softmax_warp", {"x": xs, "y": np.zeros_like(xs), "n": a.rows,
                                                                 "d": a.cols}), a.repeat)
    t_np, ref = _best(lambda: _numpy_softmax(xs), a.repeat)
    y = run.memory["y"].reshape(a.rows, a.cols)  # type: ignore[attr-defined]
    print(f"warp-per-row softmax   {a.rows}x{a.cols}  executor {t_ex:7.3f} s  numpy {t_np:7.4f} s  "
          f"ratio {t_ex / t_np:6.1f}x  max abs diff {np.abs(y - ref).max():.1e}")  # type: ignore[union-attr]


if __name__ == "__main__":
    main()

"""The CUDA recipe in near-exact arithmetic (cuda/exact.py), the pivot of the GPU-vs-Trainium envelope."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from nkieval.cuda import run_host
from nkieval.cuda.exact import exact_source

SRC = """\
__device__ float halve(float a) { return a * 0.5f; }
__global__ void k(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float tile[32];
    const int i = threadIdx.x;
    float s = 0.0f;
    for (int j = 0; j < n; ++j) s += x[j] * (float)(j + 1);
    tile[i] = expf(s) * 1e-30f;
    y[i] = halve(s) + __bfloat162float(__float2bfloat16(s)) + tile[i] * 0.0f;
}
void host(const float* x, float* y, int n) { k<<<1, 1>>>(x, y, n); }
"""


def test_scalars_and_math_widen_while_pointers_arrays_and_the_host_keep_their_types() -> None:
    out = exact_source(SRC)
    assert "__device__ double halve(double a)" in out
    assert "double s = 0.0f;" in out and "(double)(j + 1)" in out and "exp(s)" in out
    assert "__global__ void k(const float* __restrict__ x, float* __restrict__ y, int n)" in out
    assert "__shared__ float tile[32];" in out  # (shared memory keeps its layout: a store rounds to fp32)
    assert "__float2bfloat16(s)" in out  # (the kernel's explicit rounding stays)
    assert "void host(const float* x, float* y, int n)" in out


CANCEL = """\
__global__ void k(const float* __restrict__ x, float* __restrict__ y, int n) {
    float s = 1e8f;
    for (int j = 0; j < n; ++j) s += x[j];
    y[0] = s - 1e8f;
    y[1] = __bfloat162float(__float2bfloat16(s - 1e8f));
}
void host(const float* x, float* y, int n) { k<<<1, 1>>>(x, y, n); }
"""


def test_the_widened_kernel_keeps_what_fp32_loses_and_its_explicit_rounding() -> None:
    x = np.full(64, 1.0, np.float32)  # (1 + 1e8 is 1e8 in fp32: every term is lost)
    args = {"x": x, "y": np.zeros(2, np.float32), "n": 64}
    fp32 = run_host(CANCEL, "host", args).memory["y"]
    wide = run_host(exact_source(CANCEL), "host", args).memory["y"]
    assert fp32[0] == 0.0
    assert wide[0] == 64.0
    assert wide[1] == float(np.float32(64.0).astype(ml_dtypes.bfloat16))


def test_the_envelope_takes_the_tighter_pivot_and_still_bounds_the_difference() -> None:
    from types import SimpleNamespace

    from nkieval.review.stages.differential import _envelope

    task = SimpleNamespace(outputs=[SimpleNamespace(name="y")])
    gpu = [np.array([1.0, 2.0], np.float32)]
    port = [np.array([1.0, 2.0 + 2**-22], np.float32)]
    reference = [np.array([1.001, 2.001])]  # (a reference of another recipe: far from both)
    recipe = [np.array([1.0, 2.0])]
    per_out = {"y": {"envelope": None, "observed": 0.0}}
    _envelope(gpu, port, [reference, recipe], per_out, task)
    observed = 2**-22
    assert per_out["y"]["observed"] == observed
    assert observed <= per_out["y"]["envelope"] <= 2 * observed
    alone = {"y": {"envelope": None, "observed": 0.0}}
    _envelope(gpu, port, [reference], alone, task)
    assert alone["y"]["envelope"] > 1000 * observed

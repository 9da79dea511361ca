"""The CPU executor for CUDA kernels (nkieval.cuda): semantics on small kernels, and every built-in task's
kernel.cu against its reference."""

from __future__ import annotations

import numpy as np
import pytest

from nkieval.cuda import BuildOptions, KernelFault, Unsupported, run_host, run_task_cuda
from nkieval.tasks.inputs import generate_inputs
from nkieval.tasks.loader import builtin_tasks, load_reference, reference_outputs

EW = """
__global__ void k(const float* a, const float* b, const float* c, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * b[i] + c[i];
}
void run(const float* a, const float* b, const float* c, float* out, int n, cudaStream_t stream) {
    k<<<(n + 127) / 128, 128, 0, stream>>>(a, b, c, out, n);
}
"""


def _abc(n: int = 1000, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(n).astype(np.float32) for _ in range(3))  # type: ignore[return-value]


def test_fma_contraction_by_default_and_off_with_fmad_false() -> None:
    a, b, c = _abc()
    fused = (a.astype(np.float64) * b + c).astype(np.float32)
    separate = (a * b).astype(np.float32) + c
    assert np.any(fused != separate)  # the inputs tell the two apart
    out = run_host(EW, "run", {"a": a, "b": b, "c": c, "out": np.zeros_like(a), "n": a.size}).memory["out"]
    np.testing.assert_array_equal(out, fused)
    src = "// build: nvcc -O3 -fmad=false kernel.cu\n" + EW
    out2 = run_host(src, "run", {"a": a, "b": b, "c": c, "out": np.zeros_like(a), "n": a.size}).memory["out"]
    np.testing.assert_array_equal(out2, separate)


def test_order_of_operations_is_the_sources() -> None:
    src = """
    __global__ void k(const float* x, float* out, int n) {
        float s = 0.0f;
        for (int i = 0; i < n; ++i) s += x[i];
        out[0] = s;
    }
    void run(const float* x, float* out, int n, cudaStream_t stream) { k<<<1, 1, 0, stream>>>(x, out, n); }
    """
    x = np.array([1e8, 1.0, -1e8, 1.0] * 8, np.float32)
    out = run_host(src, "run", {"x": x, "out": np.zeros(1, np.float32), "n": x.size}).memory["out"]
    s = np.float32(0)
    for v in x:
        s = np.float32(s + v)
    assert out[0] == s and s != np.float32(x.astype(np.float64).sum())


def test_fast_math_build_line() -> None:
    src = """
    __global__ void k(const float* x, float* out, int n) {
        int i = threadIdx.x;
        if (i < n) out[i] = expf(x[i]);
    }
    void run(const float* x, float* out, int n, cudaStream_t stream) { k<<<1, 256, 0, stream>>>(x, out, n); }
    """
    x = np.linspace(-80, 80, 256).astype(np.float32)
    exact = run_host(src, "run", {"x": x, "out": np.zeros_like(x), "n": 256}).memory["out"]
    np.testing.assert_array_equal(exact, np.exp(x.astype(np.float64)).astype(np.float32))
    fast = run_host("// nvcc --use_fast_math\n" + src, "run", {"x": x, "out": np.zeros_like(x), "n": 256}).memory["out"]
    rel = np.abs(fast.astype(np.float64) / exact - 1)
    assert rel.max() > 1e-6  # __expf's argument rounding shows for large |x|
    assert rel.max() < 1e-4
    # flush-to-zero: a subnormal result becomes 0 under fast math
    tiny = np.array([-100.0], np.float32)
    assert run_host(src, "run", {"x": tiny, "out": np.zeros(1, np.float32), "n": 1}).memory["out"][0] > 0
    ftz = run_host(src, "run", {"x": tiny, "out": np.zeros(1, np.float32), "n": 1},
                   options=BuildOptions(fast_math=True, ftz=True, prec_div=False)).memory["out"]
    assert ftz[0] == 0


WARP = """
__global__ void k(const float* x, float* down, float* bfly, int n) {
    int i = threadIdx.x;
    float v = x[i], w = x[i];
    for (int off = 16; off > 0; off >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, off);
        w += __shfl_xor_sync(0xffffffffu, w, off);
    }
    down[i] = v;
    bfly[i] = w;
}
void run(const float* x, float* down, float* bfly, int n, cudaStream_t stream) {
    k<<<1, 64, 0, stream>>>(x, down, bfly, n);
}
"""


def test_warp_shuffles() -> None:
    x = np.arange(64, dtype=np.float32)
    mem = run_host(WARP, "run", {"x": x, "down": np.zeros(64, np.float32), "bfly": np.zeros(64, np.float32),
                                 "n": 64}).memory
    # lane 0 of each warp holds the warp's sum after a shfl_down tree; every lane after the butterfly
    assert mem["down"][0] == x[:32].sum() and mem["down"][32] == x[32:].sum()
    np.testing.assert_array_equal(mem["bfly"][:32], np.full(32, x[:32].sum()))
    np.testing.assert_array_equal(mem["bfly"][32:], np.full(32, x[32:].sum()))
    # lanes near the top of the warp add their own value where the source lane is out of range
    v = x[:32].copy()
    for off in (16, 8, 4, 2, 1):
        v = v + np.concatenate([v[off:], v[32 - off:]])
    np.testing.assert_array_equal(mem["down"][:32], v)


def test_shared_memory_barrier_and_block_reduction() -> None:
    src = """
    #define TB 128
    __global__ void k(const float* x, float* out, int n) {
        __shared__ float s[TB];
        int t = threadIdx.x;
        int i = blockIdx.x * TB + t;
        s[t] = i < n ? x[i] : 0.0f;
        __syncthreads();
        for (int st = TB / 2; st > 0; st >>= 1) {
            if (t < st) s[t] += s[t + st];
            __syncthreads();
        }
        if (t == 0) out[blockIdx.x] = s[0];
    }
    void run(const float* x, float* out, int n, cudaStream_t stream) {
        k<<<(n + TB - 1) / TB, TB, 0, stream>>>(x, out, n);
    }
    """
    x = np.arange(300, dtype=np.float32)
    out = run_host(src, "run", {"x": x, "out": np.zeros(3, np.float32), "n": 300}).memory["out"]
    np.testing.assert_array_equal(out, [x[:128].sum(), x[128:256].sum(), x[256:].sum()])


def test_divergent_barrier_and_out_of_bounds_are_reported() -> None:
    src = """
    __global__ void k(float* x, int n) {
        if (threadIdx.x < 16) { __syncthreads(); }
        x[threadIdx.x] = 1.0f;
    }
    void run(float* x, int n, cudaStream_t stream) { k<<<1, 64, 0, stream>>>(x, n); }
    """
    with pytest.raises(KernelFault, match="divergent barrier"):
        run_host(src, "run", {"x": np.zeros(64, np.float32), "n": 64})
    with pytest.raises(KernelFault, match=r"out-of-bounds write to x\[63\].*kernel.cu:4"):
        run_host(src.replace("if (threadIdx.x < 16) { __syncthreads(); }", ""), "run",
                 {"x": np.zeros(32, np.float32), "n": 32})


def test_returned_threads_do_not_make_a_barrier_divergent() -> None:
    src = """
    __global__ void k(float* x, int n) {
        __shared__ float s[64];
        int t = threadIdx.x;
        if (t >= n) return;
        s[t] = t;
        __syncthreads();
        x[t] = s[n - 1 - t];
    }
    void run(float* x, int n, cudaStream_t stream) { k<<<1, 64, 0, stream>>>(x, n); }
    """
    out = run_host(src, "run", {"x": np.zeros(64, np.float32), "n": 40}).memory["x"]
    np.testing.assert_array_equal(out[:40], np.arange(39, -1, -1))


def test_unsupported_construct_names_the_line() -> None:
    src = """
    __global__ void k(float* x) {
        goto end;
        end: x[0] = 1.0f;
    }
    void run(float* x, cudaStream_t stream) { k<<<1, 1, 0, stream>>>(x); }
    """
    with pytest.raises(Unsupported, match=r"not supported: .* at kernel.cu:3"):
        run_host(src, "run", {"x": np.zeros(1, np.float32)})


def test_divergent_control_flow_break_continue_return() -> None:
    src = """
    __device__ int collatz(int v) {
        int steps = 0;
        while (true) {
            if (v == 1) break;
            v = (v % 2 == 0) ? v / 2 : 3 * v + 1;
            ++steps;
        }
        return steps;
    }
    __global__ void k(int* out, int n) {
        int i = threadIdx.x;
        if (i >= n) return;
        int odd = 0;
        for (int j = 0; j < i; ++j) {
            if (j % 2 == 0) continue;
            odd += j;
        }
        out[i] = collatz(i + 1) * 1000 + odd;
    }
    void run(int* out, int n, cudaStream_t stream) { k<<<1, 64, 0, stream>>>(out, n); }
    """

    def collatz(v: int) -> int:
        s = 0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            s += 1
        return s

    out = run_host(src, "run", {"out": np.full(64, -1, np.int32), "n": 50}).memory["out"]
    want = [collatz(i + 1) * 1000 + sum(j for j in range(i) if j % 2) for i in range(50)]
    np.testing.assert_array_equal(out[:50], want)
    assert (out[50:] == -1).all()


def test_c_integer_semantics_and_conversions() -> None:
    src = """
    __global__ void k(const int* a, int* q, int* r, unsigned* u, __nv_bfloat16* h, const float* f) {
        int i = threadIdx.x;
        q[i] = a[i] / 3;
        r[i] = a[i] % 3;
        u[i] = (unsigned)a[i] - 1u;
        h[i] = __float2bfloat16(f[i]);
    }
    void run(const int* a, int* q, int* r, unsigned* u, __nv_bfloat16* h, const float* f, cudaStream_t stream) {
        k<<<1, 8, 0, stream>>>(a, q, r, u, h, f);
    }
    """
    import ml_dtypes

    a = np.array([-7, -6, -1, 0, 1, 5, 7, 8], np.int32)
    f = np.array([1.00390625, 1.01171875, -3.3, 1e-3, 65504, 1e30, -0.0, 2.5], np.float32)
    mem = run_host(src, "run", {"a": a, "q": np.zeros(8, np.int32), "r": np.zeros(8, np.int32),
                                "u": np.zeros(8, np.uint32), "h": np.zeros(8, ml_dtypes.bfloat16), "f": f}).memory
    np.testing.assert_array_equal(mem["q"], [-2, -2, 0, 0, 0, 1, 2, 2])  # truncation toward zero
    np.testing.assert_array_equal(mem["r"], [-1, 0, -1, 0, 1, 2, 1, 2])
    np.testing.assert_array_equal(mem["u"], (a.astype(np.int64) - 1) % 2**32)
    np.testing.assert_array_equal(mem["h"], f.astype(ml_dtypes.bfloat16))  # round to nearest even


def test_atomics_apply_in_thread_order() -> None:
    src = """
    __global__ void k(const float* x, float* acc, int* hist, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) {
            atomicAdd(acc, x[i]);
            atomicAdd(&hist[i % 4], 1);
        }
    }
    void run(const float* x, float* acc, int* hist, int n, cudaStream_t stream) {
        k<<<(n + 63) / 64, 64, 0, stream>>>(x, acc, hist, n);
    }
    """
    x = np.random.default_rng(1).standard_normal(200).astype(np.float32)
    mem = run_host(src, "run", {"x": x, "acc": np.zeros(1, np.float32), "hist": np.zeros(4, np.int32),
                                "n": 200}).memory
    s = np.float32(0)
    for v in x:
        s = np.float32(s + v)
    assert mem["acc"][0] == s
    np.testing.assert_array_equal(mem["hist"], [50, 50, 50, 50])


def test_templates_structs_float4_and_constexpr() -> None:
    src = """
    constexpr int kW = 4;
    struct MS { float m, s; };
    template <bool IsMax> __device__ float pick(float a, float b) { return IsMax ? fmaxf(a, b) : fminf(a, b); }
    __global__ void k(const float* x, float* out, int n4) {
        int i = threadIdx.x;
        if (i >= n4) return;
        float4 v = reinterpret_cast<const float4*>(x)[i];
        MS r = {pick<true>(pick<true>(v.x, v.y), pick<true>(v.z, v.w)), v.x + v.y + v.z + v.w};
        out[i * 2] = r.m;
        out[i * 2 + 1] = r.s / kW;
    }
    void run(const float* x, float* out, int n, cudaStream_t stream) {
        dim3 block(64);
        k<<<1, block, 0, stream>>>(x, out, n / kW);
    }
    """
    x = np.random.default_rng(2).standard_normal(64).astype(np.float32)
    out = run_host(src, "run", {"x": x, "out": np.zeros(32, np.float32), "n": 64}).memory["out"]
    v = x.reshape(16, 4)
    np.testing.assert_array_equal(out[0::2], v.max(axis=1))
    s = ((v[:, 0] + v[:, 1]) + v[:, 2]) + v[:, 3]
    np.testing.assert_array_equal(out[1::2], s / np.float32(4))


def _cases(task: object, cap: int) -> list[tuple[dict[str, int], str]]:
    def size(s: object) -> int:
        return sum(int(np.prod(x.concrete(s.dims))) for x in [*task.inputs, *task.outputs])  # type: ignore

    shapes = sorted(task.shapes, key=size)  # type: ignore[attr-defined]
    picked = [s for s in shapes if size(s) <= cap] or shapes[:1]
    return [(dict(s.dims), fam) for s in picked[:2] for fam in task.families]  # type: ignore[attr-defined]


CUDA_TASKS = [t for t in builtin_tasks() if t.cuda_file is not None]


@pytest.mark.parametrize("task", CUDA_TASKS, ids=[t.id for t in CUDA_TASKS])
def test_builtin_kernel_cu_matches_reference(task: object) -> None:
    """Every built-in task's CUDA source runs and agrees with the task's reference on every output, within
    the task's tolerance (small shapes of the task's own list, every input family)."""
    t = task
    for dims, fam in _cases(t, 20000):
        specs = [(x.name, x.concrete(dims), x.dtype, x.family) for x in t.inputs]  # type: ignore[attr-defined]
        inp = generate_inputs(specs, fam, 7, "cuda-test")
        ref = reference_outputs(t, load_reference(t), inp)  # type: ignore[arg-type]
        outs, _ = run_task_cuda(t, inp, dims)
        for o, r, spec in zip(outs, ref, t.outputs):  # type: ignore[attr-defined]
            np.testing.assert_allclose(np.asarray(o, np.float64), np.asarray(r, np.float64),
                                       rtol=t.rtol, atol=t.atol,  # type: ignore[attr-defined]
                                       err_msg=f"{t.id} {dims} {fam} output {spec.name}")  # type: ignore

// cross_entropy: loss[r] = logsumexp(logits[r, :]) - logits[r, labels[r]] over a large vocabulary.
// One 512-thread block per row, a single pass with an online (max, rescaled sum) log-sum-exp per
// thread, merged across the block; labels outside [0, v) give NaN (the caller's contract).
#include <cuda_runtime.h>
#include <cfloat>
#include <cmath>
#include <cstdio>

struct MS { float m, s; };

__device__ __forceinline__ MS combine(MS a, MS b) {
    if (a.m == -FLT_MAX) return b;
    if (b.m == -FLT_MAX) return a;
    float m = fmaxf(a.m, b.m);
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__global__ void cross_entropy_kernel(const float* __restrict__ logits, const int* __restrict__ labels,
                                     float* __restrict__ loss, int n, int v) {
    __shared__ MS part[32];
    int row = blockIdx.x;
    if (row >= n) return;
    const float* x = logits + (long long)row * v;
    MS st = {-FLT_MAX, 0.0f};
    for (int j = threadIdx.x; j < v; j += blockDim.x) {
        float xv = x[j];
        if (xv > st.m) { st.s = st.s * expf(st.m - xv) + 1.0f; st.m = xv; }
        else st.s += expf(xv - st.m);
    }
    for (int off = 16; off > 0; off >>= 1) {
        MS o = {__shfl_down_sync(0xffffffffu, st.m, off), __shfl_down_sync(0xffffffffu, st.s, off)};
        st = combine(st, o);
    }
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = st;
    __syncthreads();
    if (threadIdx.x == 0) {
        MS t = part[0];
        for (int w = 1; w < (blockDim.x + 31) / 32; ++w) t = combine(t, part[w]);
        int lab = labels[row];
        float picked = (lab >= 0 && lab < v) ? x[lab] : nanf("");
        loss[row] = t.m + logf(t.s) - picked;
    }
}

cudaError_t cross_entropy(const float* logits, const int* labels, float* loss, int n, int v, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    cross_entropy_kernel<<<n, 512, 0, stream>>>(logits, labels, loss, n, v);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "cross_entropy launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

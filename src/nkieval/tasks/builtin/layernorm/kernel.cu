// layernorm over the rows of a row-major [n, d] fp32 matrix, with per-column gamma and beta.
// One block per row; mean and variance by Welford's algorithm per thread, merged across the block.
#include <cuda_runtime.h>
#include <cstdio>

struct Stats { float mean, m2, count; };

__device__ __forceinline__ Stats merge(Stats a, Stats b) {
    float n = a.count + b.count;
    if (n == 0.0f) return a;
    float delta = b.mean - a.mean;
    Stats r;
    r.count = n;
    r.mean = a.mean + delta * (b.count / n);
    r.m2 = a.m2 + b.m2 + delta * delta * (a.count * b.count / n);
    return r;
}

__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                 const float* __restrict__ beta, float* __restrict__ y, int n, int d, float eps) {
    int row = blockIdx.x;
    if (row >= n) return;
    const float* xr = x + (long long)row * d;
    Stats s = {0.0f, 0.0f, 0.0f};
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        float v = xr[j];
        s.count += 1.0f;
        float delta = v - s.mean;
        s.mean += delta / s.count;
        s.m2 += delta * (v - s.mean);
    }
    for (int off = 16; off > 0; off >>= 1) {
        Stats o;
        o.mean = __shfl_down_sync(0xffffffffu, s.mean, off);
        o.m2 = __shfl_down_sync(0xffffffffu, s.m2, off);
        o.count = __shfl_down_sync(0xffffffffu, s.count, off);
        s = merge(s, o);
    }
    __shared__ Stats warp_stats[32];
    __shared__ float mean_sh, rstd_sh;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_stats[warp] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        Stats t = warp_stats[0];
        for (int w = 1; w < (blockDim.x + 31) / 32; ++w) t = merge(t, warp_stats[w]);
        mean_sh = t.mean;
        rstd_sh = rsqrtf(t.m2 / (float)d + eps);
    }
    __syncthreads();
    float mean = mean_sh, rstd = rstd_sh;
    float* yr = y + (long long)row * d;
    for (int j = threadIdx.x; j < d; j += blockDim.x) yr[j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
}

cudaError_t layernorm(const float* x, const float* gamma, const float* beta, float* y, int n, int d, float eps,
                      cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    layernorm_kernel<<<n, 256, 0, stream>>>(x, gamma, beta, y, n, d, eps);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "layernorm launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

// rmsnorm_warp: Gemma-style RMSNorm, y[r, c] = x[r, c] * rsqrt(mean(x[r, :]^2) + 1e-6) * (1 + w[c]).
// One warp per row, eight rows per block; the sum of squares is reduced with butterfly shuffles.
#include <cuda_runtime.h>
#include <cstdio>

constexpr int kWarpsPerBlock = 8;

__global__ void rmsnorm_warp_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                    float* __restrict__ y, int n_rows, int n_cols) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    if (row >= n_rows) return;
    const float* xr = x + (size_t)row * n_cols;
    float ss = 0.0f;
    for (int c = lane; c < n_cols; c += 32) {
        const float v = xr[c];
        ss += v * v;
    }
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    const float inv_rms = rsqrtf(ss / (float)n_cols + 1e-6f);
    for (int c = lane; c < n_cols; c += 32) {
        y[(size_t)row * n_cols + c] = xr[c] * inv_rms * (1.0f + w[c]);
    }
}

void rmsnorm_warp(const float* x, const float* w, float* y, int n_rows, int n_cols, cudaStream_t stream) {
    if (n_rows <= 0 || n_cols <= 0) return;
    const int blocks = (n_rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    rmsnorm_warp_kernel<<<blocks, kWarpsPerBlock * 32, 0, stream>>>(x, w, y, n_rows, n_cols);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "rmsnorm_warp launch failed: %s\n", cudaGetErrorString(err));
}

// causal_softmax: y = softmax(0.0625 * x) over the keys a query may see, for an [N, S] score matrix whose queries
// are the last N of S positions (key j is visible to query i when j <= i + S - N; the rest are zero).
// One warp per row, eight rows per block: a masked row max, then the sum of exponentials, with shuffles.
#include <cuda_runtime.h>
#include <math.h>
#include <cstdio>

constexpr float kScale = 0.0625f;
constexpr int kRowsPerBlock = 8;

__device__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

__device__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__global__ void causal_softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int n_rows, int n_cols) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
    if (row >= n_rows) return;
    const int last = row + (n_cols - n_rows);
    const float* xr = x + (size_t)row * n_cols;
    float m = -INFINITY;
    for (int c = lane; c < n_cols; c += 32) {
        if (c > last) break;
        m = fmaxf(m, xr[c] * kScale);
    }
    m = warp_max(m);
    float s = 0.0f;
    for (int c = lane; c < n_cols; c += 32) {
        if (c > last) break;
        s += __expf(xr[c] * kScale - m);
    }
    s = warp_sum(s);
    for (int c = lane; c < n_cols; c += 32) {
        y[(size_t)row * n_cols + c] = c > last ? 0.0f : __expf(xr[c] * kScale - m) / s;
    }
}

void causal_softmax(const float* x, float* y, int n_rows, int n_cols, cudaStream_t stream) {
    if (n_rows <= 0 || n_cols < n_rows) return;
    const int blocks = (n_rows + kRowsPerBlock - 1) / kRowsPerBlock;
    causal_softmax_kernel<<<blocks, 32 * kRowsPerBlock, 0, stream>>>(x, y, n_rows, n_cols);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "causal_softmax launch failed: %s\n", cudaGetErrorString(err));
}

// online_softmax: y = softmax(x * 0.125) per row and the row's log-sum-exp, as an attention kernel's scaled
// scores. One warp per row, four rows per block; each lane keeps a running max and a rescaled running sum
// (online softmax), and the lanes' pairs are merged with butterfly shuffles.
#include <cuda_runtime.h>
#include <math.h>
#include <cstdio>

constexpr float kScale = 0.125f;
constexpr int kRowsPerBlock = 4;

// exp(a - b) for a running max a that may still be -inf (a lane that has seen no element)
__device__ float rescale(float a, float b) { return a == -INFINITY ? 0.0f : __expf(a - b); }

__global__ void online_softmax_kernel(const float* __restrict__ x, float* __restrict__ y, float* __restrict__ lse,
                                      int n_rows, int n_cols) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
    if (row >= n_rows) return;
    const float* xr = x + (size_t)row * n_cols;
    float m = -INFINITY;
    float d = 0.0f;
    for (int c = lane; c < n_cols; c += 32) {
        const float v = xr[c] * kScale;
        const float m_new = fmaxf(m, v);
        d = d * rescale(m, m_new) + __expf(v - m_new);
        m = m_new;
    }
    for (int off = 16; off > 0; off >>= 1) {
        const float m_o = __shfl_xor_sync(0xffffffffu, m, off);
        const float d_o = __shfl_xor_sync(0xffffffffu, d, off);
        const float m_new = fmaxf(m, m_o);
        d = d * rescale(m, m_new) + d_o * rescale(m_o, m_new);
        m = m_new;
    }
    for (int c = lane; c < n_cols; c += 32) y[(size_t)row * n_cols + c] = __expf(xr[c] * kScale - m) / d;
    if (lane == 0) lse[row] = m + logf(d);
}

void online_softmax(const float* x, float* y, float* lse, int n_rows, int n_cols, cudaStream_t stream) {
    if (n_rows <= 0 || n_cols <= 0) return;
    const int blocks = (n_rows + kRowsPerBlock - 1) / kRowsPerBlock;
    online_softmax_kernel<<<blocks, 32 * kRowsPerBlock, 0, stream>>>(x, y, lse, n_rows, n_cols);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "online_softmax launch failed: %s\n", cudaGetErrorString(err));
}

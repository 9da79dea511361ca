// row_softmax: out[r, :] = softmax(x[r, :]) for an n_rows x n_cols fp32 matrix (row-major).
// One thread block per row; each thread strides over the columns; block-wide max and sum
// reductions through shared memory.
#include <cuda_runtime.h>
#include <cfloat>
#include <cstdio>

constexpr int kThreads = 256;

__device__ float block_reduce(float v, float* smem, bool is_max) {
    const int tid = threadIdx.x;
    smem[tid] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            smem[tid] = is_max ? fmaxf(smem[tid], smem[tid + s]) : smem[tid] + smem[tid + s];
        }
        __syncthreads();
    }
    float r = smem[0];
    __syncthreads();
    return r;
}

__global__ void row_softmax_kernel(const float* __restrict__ x, float* __restrict__ out, int n_rows, int n_cols) {
    __shared__ float smem[kThreads];
    const int row = blockIdx.x;
    if (row >= n_rows) return;
    const float* xr = x + (size_t)row * n_cols;
    float* yr = out + (size_t)row * n_cols;

    float m = -FLT_MAX;
    for (int c = threadIdx.x; c < n_cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = block_reduce(m, smem, true);

    float s = 0.0f;
    for (int c = threadIdx.x; c < n_cols; c += blockDim.x) s += expf(xr[c] - m);
    s = block_reduce(s, smem, false);

    const float inv = 1.0f / s;
    for (int c = threadIdx.x; c < n_cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
}

void row_softmax(const float* d_x, float* d_out, int n_rows, int n_cols, cudaStream_t stream) {
    if (n_rows <= 0 || n_cols <= 0) return;
    row_softmax_kernel<<<n_rows, kThreads, 0, stream>>>(d_x, d_out, n_rows, n_cols);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        fprintf(stderr, "row_softmax launch failed: %s\n", cudaGetErrorString(err));
    }
}

// silu: out[i] = x * sigmoid(x) over a row-major [N, D] fp32 tensor, one thread per element.
#include <cuda_runtime.h>
#include <math.h>
#include <cstdio>

__device__ __forceinline__ float silu_f(float v) {
    return v / (1.0f + expf(-v));
}

__global__ void silu_kernel(const float* __restrict__ x, float* __restrict__ out, int n, int d) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y;
    if (row >= n || col >= d) return;  // bounds guard for ragged rows and columns
    long long i = (long long)row * d + col;
    out[i] = silu_f(x[i]);
}

// Host launcher: one grid row per tensor row, 256 threads across the columns.
cudaError_t silu(const float* x, float* out, int n, int d, cudaStream_t stream) {
    if (n <= 0 || d <= 0) return cudaSuccess;
    dim3 block(256);
    dim3 grid((d + block.x - 1) / block.x, n);
    silu_kernel<<<grid, block, 0, stream>>>(x, out, n, d);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "silu launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

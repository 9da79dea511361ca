// gelu: out[i] = 0.5 x (1 + erf(x / sqrt 2)) over a row-major [N, D] fp32 tensor, one thread per element.
#include <cuda_runtime.h>
#include <math.h>
#include <cstdio>

__device__ __forceinline__ float gelu_f(float v) {
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ out, int n, int d) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y;
    if (row >= n || col >= d) return;  // bounds guard for ragged rows and columns
    long long i = (long long)row * d + col;
    out[i] = gelu_f(x[i]);
}

// Host launcher: one grid row per tensor row, 256 threads across the columns.
cudaError_t gelu(const float* x, float* out, int n, int d, cudaStream_t stream) {
    if (n <= 0 || d <= 0) return cudaSuccess;
    dim3 block(256);
    dim3 grid((d + block.x - 1) / block.x, n);
    gelu_kernel<<<grid, block, 0, stream>>>(x, out, n, d);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "gelu launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

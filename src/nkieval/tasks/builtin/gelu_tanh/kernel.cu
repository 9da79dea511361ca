// gelu_tanh: out[i] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) over a row-major [N, D] fp32 tensor, one thread per element.
#include <cuda_runtime.h>
#include <math.h>
#include <cstdio>

__device__ __forceinline__ float gelu_tanh_f(float v) {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;
    return 0.5f * v * (1.0f + tanhf(k0 * (v + k1 * v * v * v)));
}

__global__ void gelu_tanh_kernel(const float* __restrict__ x, float* __restrict__ out, int n, int d) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y;
    if (row >= n || col >= d) return;  // bounds guard for ragged rows and columns
    long long i = (long long)row * d + col;
    out[i] = gelu_tanh_f(x[i]);
}

// Host launcher: one grid row per tensor row, 256 threads across the columns.
cudaError_t gelu_tanh(const float* x, float* out, int n, int d, cudaStream_t stream) {
    if (n <= 0 || d <= 0) return cudaSuccess;
    dim3 block(256);
    dim3 grid((d + block.x - 1) / block.x, n);
    gelu_tanh_kernel<<<grid, block, 0, stream>>>(x, out, n, d);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "gelu_tanh launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

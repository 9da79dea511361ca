// vector_add: out[i] = a[i] + b[i] for i < n (fp32). One thread per element, grid-stride loop.
#include <cuda_runtime.h>
#include <cstdio>

__global__ void vector_add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        out[i] = a[i] + b[i];
    }
}

// Host launcher: 256 threads per block, enough blocks to cover n (capped; the loop strides).
void vector_add(const float* d_a, const float* d_b, float* d_out, int n, cudaStream_t stream) {
    const int threads = 256;
    int blocks = (n + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    vector_add_kernel<<<blocks, threads, 0, stream>>>(d_a, d_b, d_out, n);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        fprintf(stderr, "vector_add launch failed: %s\n", cudaGetErrorString(err));
    }
}

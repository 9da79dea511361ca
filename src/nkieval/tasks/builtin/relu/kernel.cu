// relu: out[i] = max(x[i], 0) over a row-major [N, D] fp32 tensor, treated as a flat array.
#include <cuda_runtime.h>
#include <cstdio>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ out, long long total) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)blockDim.x * gridDim.x;
    for (; i < total; i += stride) {
        float v = x[i];
        out[i] = v > 0.0f ? v : 0.0f;
    }
}

// Host launcher: x and out are device pointers to n*d floats.
cudaError_t relu(const float* x, float* out, int n, int d, cudaStream_t stream) {
    long long total = (long long)n * d;
    if (total <= 0) return cudaSuccess;
    const int threads = 256;
    long long blocks = (total + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    relu_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, out, total);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "relu launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

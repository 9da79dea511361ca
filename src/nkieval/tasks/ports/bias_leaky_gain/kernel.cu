// bias_leaky_gain: the fused bias + activation epilogue of a StyleGAN2-style layer (fused_bias_act),
// y = leaky_relu(x + b[col], 0.2) * sqrt(2), bf16 in, fp32 out, over an [N, D] matrix.
// Grid-stride loop, one element per thread per step; the bias column is i % D.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdio>

__device__ float leaky_gain(float u) {
    const float a = u > 0.0f ? u : 0.2f * u;
    return a * 1.4142135624f;
}

__global__ void bias_leaky_gain_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ b,
                                       float* __restrict__ y, long long n, int d) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        const float u = __bfloat162float(x[i]) + __bfloat162float(b[i % d]);
        y[i] = leaky_gain(u);
    }
}

void bias_leaky_gain(const __nv_bfloat16* x, const __nv_bfloat16* b, float* y, int n_rows, int n_cols,
                     cudaStream_t stream) {
    const long long n = (long long)n_rows * n_cols;
    if (n <= 0) return;
    const int threads = 256;
    long long blocks = (n + threads - 1) / threads;
    if (blocks > 4096) blocks = 4096;
    bias_leaky_gain_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, b, y, n, n_cols);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "bias_leaky_gain launch failed: %s\n", cudaGetErrorString(err));
}

// depthwise_conv1d: causal depthwise convolution out[c, t] = bias[c] + sum_k w[c, k] * x[c, t - (K-1) + k].
// 2-D grid: blockIdx.y = channel, 256 threads over time; each block stages its x window plus the
// (K-1)-element causal halo in shared memory.
#include <cuda_runtime.h>
#include <cstdio>

#define TB 256
#define KMAX 8

__global__ void dwconv1d_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                const float* __restrict__ bias, float* __restrict__ out, int c, int l, int k) {
    __shared__ float xs[TB + KMAX - 1];
    __shared__ float ws[KMAX];
    int ch = blockIdx.y;
    if (ch >= c) return;
    int t0 = blockIdx.x * TB;
    const float* xr = x + (long long)ch * l;
    for (int i = threadIdx.x; i < TB + k - 1; i += blockDim.x) {
        int src = t0 - (k - 1) + i;
        xs[i] = (src >= 0 && src < l) ? xr[src] : 0.0f;
    }
    if (threadIdx.x < k) ws[threadIdx.x] = w[ch * k + threadIdx.x];
    __syncthreads();
    int t = t0 + threadIdx.x;
    if (t < l) {
        float acc = bias[ch];
        for (int j = 0; j < k; ++j) acc = fmaf(ws[j], xs[threadIdx.x + j], acc);
        out[(long long)ch * l + t] = acc;
    }
}

cudaError_t depthwise_conv1d(const float* x, const float* w, const float* bias, float* out, int c, int l, int k,
                             cudaStream_t stream) {
    if (c <= 0 || l <= 0) return cudaSuccess;
    if (k < 1 || k > KMAX) return cudaErrorInvalidValue;
    dim3 grid((l + TB - 1) / TB, c);
    dwconv1d_kernel<<<grid, TB, 0, stream>>>(x, w, bias, out, c, l, k);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "depthwise_conv1d launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

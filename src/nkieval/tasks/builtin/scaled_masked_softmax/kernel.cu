// scaled_masked_softmax: out[i, :] = softmax(scale * x[i, :] + causal_mask), bottom-right aligned
// (query i sees keys j <= i + s - n). One 256-thread block per row; masked keys get probability 0.
#include <cuda_runtime.h>
#include <cfloat>
#include <cstdio>

template <bool IsMax>
__inline__ __device__ float block_reduce(float v, float* smem) {
    for (int off = 16; off > 0; off >>= 1) {
        float o = __shfl_down_sync(0xffffffffu, v, off);
        v = IsMax ? fmaxf(v, o) : v + o;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float r = smem[0];
        for (int w = 1; w < (blockDim.x + 31) / 32; ++w) r = IsMax ? fmaxf(r, smem[w]) : r + smem[w];
        smem[32] = r;
    }
    __syncthreads();
    float r = smem[32];
    __syncthreads();
    return r;
}

__global__ void scaled_masked_softmax_kernel(const float* __restrict__ x, float* __restrict__ out, int n, int s,
                                             float scale) {
    __shared__ float smem[33];
    int row = blockIdx.x;
    if (row >= n) return;
    int last = row + (s - n);  // last visible key
    const float* xr = x + (long long)row * s;
    float* orow = out + (long long)row * s;
    float m = -FLT_MAX;
    for (int j = threadIdx.x; j <= last && j < s; j += blockDim.x) m = fmaxf(m, xr[j] * scale);
    m = block_reduce<true>(m, smem);
    float sum = 0.0f;
    for (int j = threadIdx.x; j <= last && j < s; j += blockDim.x) sum += expf(xr[j] * scale - m);
    sum = block_reduce<false>(sum, smem);
    float inv = 1.0f / sum;
    for (int j = threadIdx.x; j < s; j += blockDim.x) orow[j] = (j <= last) ? expf(xr[j] * scale - m) * inv : 0.0f;
}

cudaError_t scaled_masked_softmax(const float* x, float* out, int n, int s, float scale, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    if (n > s) return cudaErrorInvalidValue;
    scaled_masked_softmax_kernel<<<n, 256, 0, stream>>>(x, out, n, s, scale);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "scaled_masked_softmax launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

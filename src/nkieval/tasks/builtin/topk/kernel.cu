// topk: the k largest values of each row of a row-major [n, d] fp32 matrix, descending, with indices.
// One 256-thread block per row, k rounds of a block-wide argmax; each winner is masked out of a
// shared-memory copy of the row before the next round (rows up to 16384 floats = 64 KiB dynamic smem).
#include <cuda_runtime.h>
#include <cfloat>
#include <cstdio>

__inline__ __device__ void better(float& v, int& i, float ov, int oi) {
    if (ov > v || (ov == v && oi < i)) { v = ov; i = oi; }
}

__global__ void topk_kernel(const float* __restrict__ x, float* __restrict__ values, int* __restrict__ indices,
                            int n, int d, int k) {
    extern __shared__ float row[];
    __shared__ float wv[32];
    __shared__ int wi[32];
    int r = blockIdx.x;
    if (r >= n) return;
    for (int j = threadIdx.x; j < d; j += blockDim.x) row[j] = x[(long long)r * d + j];
    __syncthreads();
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    for (int t = 0; t < k; ++t) {
        float v = -FLT_MAX;
        int i = d;
        for (int j = threadIdx.x; j < d; j += blockDim.x) better(v, i, row[j], j);
        for (int off = 16; off > 0; off >>= 1)
            better(v, i, __shfl_down_sync(0xffffffffu, v, off), __shfl_down_sync(0xffffffffu, i, off));
        if (lane == 0) { wv[warp] = v; wi[warp] = i; }
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 1; w < nwarps; ++w) better(v, i, wv[w], wi[w]);
            values[(long long)r * k + t] = v;
            indices[(long long)r * k + t] = i;
            if (i < d) row[i] = -FLT_MAX;
        }
        __syncthreads();
    }
}

cudaError_t topk(const float* x, float* values, int* indices, int n, int d, int k, cudaStream_t stream) {
    if (n <= 0 || k <= 0 || k > d) return cudaErrorInvalidValue;
    size_t smem = (size_t)d * sizeof(float);
    if (smem > 48 * 1024) cudaFuncSetAttribute(topk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    topk_kernel<<<n, 256, smem, stream>>>(x, values, indices, n, d, k);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "topk launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

// attention_head: out = softmax(q k^T / sqrt(d)) v for one head, bf16 row-major q [sq, d], k, v [skv, d].
// One block of 128 threads per query row: scores into dynamic shared memory (skv <= 8192), block max
// and sum, then each thread accumulates output dimensions from the probabilities.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cfloat>
#include <cmath>
#include <cstdio>

__inline__ __device__ float block_reduce_max(float v, float* red) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = red[0];
    for (int w = 1; w < (blockDim.x + 31) / 32; ++w) r = fmaxf(r, red[w]);
    __syncthreads();
    return r;
}

__inline__ __device__ float block_reduce_sum(float v, float* red) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = 0.0f;
    for (int w = 0; w < (blockDim.x + 31) / 32; ++w) r += red[w];
    __syncthreads();
    return r;
}

__global__ void attention_head_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                                      const __nv_bfloat16* __restrict__ v, float* __restrict__ out,
                                      int sq, int skv, int d) {
    extern __shared__ float scores[];
    __shared__ float red[32];
    __shared__ float qrow[128];
    int i = blockIdx.x;
    if (i >= sq) return;
    for (int c = threadIdx.x; c < d; c += blockDim.x) qrow[c] = __bfloat162float(q[(long long)i * d + c]);
    __syncthreads();
    float scale = rsqrtf((float)d);
    float m = -FLT_MAX;
    for (int j = threadIdx.x; j < skv; j += blockDim.x) {
        float s = 0.0f;
        for (int c = 0; c < d; ++c) s = fmaf(qrow[c], __bfloat162float(k[(long long)j * d + c]), s);
        s *= scale;
        scores[j] = s;
        m = fmaxf(m, s);
    }
    m = block_reduce_max(m, red);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < skv; j += blockDim.x) { float e = expf(scores[j] - m); scores[j] = e; sum += e; }
    sum = block_reduce_sum(sum, red);
    __syncthreads();
    float inv = 1.0f / sum;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < skv; ++j) acc = fmaf(scores[j], __bfloat162float(v[(long long)j * d + c]), acc);
        out[(long long)i * d + c] = acc * inv;
    }
}

cudaError_t attention_head(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, float* out,
                           int sq, int skv, int d, cudaStream_t stream) {
    if (sq <= 0) return cudaSuccess;
    if (d > 128 || skv <= 0 || skv > 8192) return cudaErrorInvalidValue;
    size_t smem = (size_t)skv * sizeof(float);
    if (smem > 48 * 1024)
        cudaFuncSetAttribute(attention_head_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    attention_head_kernel<<<sq, 128, smem, stream>>>(q, k, v, out, sq, skv, d);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "attention_head launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

// causal_attention: one head. out[i, :] = sum_{j <= i} softmax_j(q_i . k_j / sqrt(D)) v[j, :].
// q_t, k_t are [D, S] (transposed), v is [S, D], all bf16; fp32 scores, softmax and output.
// One thread block per query row: the block computes the row's causal scores into shared memory,
// reduces max and sum, then each thread accumulates output features d = tid, tid + blockDim.x, ...
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cfloat>
#include <cstdio>

constexpr int kThreads = 128;

__device__ float block_max(float v, float* red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}

__device__ float block_sum(float v, float* red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}

__global__ void causal_attention_kernel(const __nv_bfloat16* __restrict__ q_t, const __nv_bfloat16* __restrict__ k_t,
                                        const __nv_bfloat16* __restrict__ v, float* __restrict__ out, int S, int D) {
    extern __shared__ float scores[];  // S floats
    __shared__ float red[kThreads];
    const int i = blockIdx.x;
    if (i >= S) return;
    const float scale = rsqrtf((float)D);

    float m = -FLT_MAX;
    for (int j = threadIdx.x; j <= i; j += blockDim.x) {  // causal: keys 0..i
        float acc = 0.0f;
        for (int d = 0; d < D; ++d) {
            acc += __bfloat162float(q_t[(size_t)d * S + i]) * __bfloat162float(k_t[(size_t)d * S + j]);
        }
        scores[j] = acc * scale;
        m = fmaxf(m, scores[j]);
    }
    m = block_max(m, red);

    float s = 0.0f;
    for (int j = threadIdx.x; j <= i; j += blockDim.x) {
        scores[j] = expf(scores[j] - m);
        s += scores[j];
    }
    s = block_sum(s, red);
    const float inv = 1.0f / s;

    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j <= i; ++j) acc += scores[j] * __bfloat162float(v[(size_t)j * D + d]);
        out[(size_t)i * D + d] = acc * inv;
    }
}

void causal_attention(const __nv_bfloat16* d_q_t, const __nv_bfloat16* d_k_t, const __nv_bfloat16* d_v,
                      float* d_out, int S, int D, cudaStream_t stream) {
    if (S <= 0 || D <= 0) return;
    const size_t smem = (size_t)S * sizeof(float);
    causal_attention_kernel<<<S, kThreads, smem, stream>>>(d_q_t, d_k_t, d_v, d_out, S, D);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        fprintf(stderr, "causal_attention launch failed: %s\n", cudaGetErrorString(err));
    }
}

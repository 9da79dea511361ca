// router_topk: per token, softmax over e expert logits, top-8, renormalised weights and expert ids.
// One warp per token: the warp computes the softmax denominator, then 8 rounds of a warp argmax over
// the probabilities (held in registers, e <= 1024 -> 32 per lane), then renormalises the 8 winners.
#include <cuda_runtime.h>
#include <cfloat>
#include <cstdio>

#define K 8
#define MAX_PER_LANE 32

__global__ void router_topk_kernel(const float* __restrict__ logits, float* __restrict__ weights,
                                   int* __restrict__ experts, int t, int e) {
    int tok = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (tok >= t) return;
    const float* x = logits + (long long)tok * e;
    float p[MAX_PER_LANE];
    float m = -FLT_MAX;
    for (int i = 0; i < MAX_PER_LANE; ++i) {
        int j = lane + 32 * i;
        p[i] = (j < e) ? x[j] : -FLT_MAX;
        m = fmaxf(m, p[i]);
    }
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float s = 0.0f;
    for (int i = 0; i < MAX_PER_LANE; ++i) {
        int j = lane + 32 * i;
        p[i] = (j < e) ? expf(p[i] - m) : -1.0f;
        if (j < e) s += p[i];
    }
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    float picked_sum = 0.0f;
    float wv[K];
    int wi[K];
    for (int r = 0; r < K; ++r) {
        float best = -1.0f;
        int bi = e;
        for (int i = 0; i < MAX_PER_LANE; ++i) {
            int j = lane + 32 * i;
            if (p[i] > best || (p[i] == best && j < bi)) { best = p[i]; bi = j; }
        }
        for (int off = 16; off > 0; off >>= 1) {
            float ob = __shfl_xor_sync(0xffffffffu, best, off);
            int oi = __shfl_xor_sync(0xffffffffu, bi, off);
            if (ob > best || (ob == best && oi < bi)) { best = ob; bi = oi; }
        }
        if ((bi & 31) == lane) p[bi >> 5] = -1.0f;  // the owner lane removes the winner
        wv[r] = best / s;
        wi[r] = bi;
        picked_sum += wv[r];
    }
    if (lane == 0) {
        for (int r = 0; r < K; ++r) {
            weights[(long long)tok * K + r] = wv[r] / picked_sum;
            experts[(long long)tok * K + r] = wi[r];
        }
    }
}

cudaError_t router_topk(const float* logits, float* weights, int* experts, int t, int e, cudaStream_t stream) {
    if (t <= 0) return cudaSuccess;
    if (e < K || e > 32 * MAX_PER_LANE) return cudaErrorInvalidValue;
    const int threads = 256;
    int blocks = (t * 32 + threads - 1) / threads;
    router_topk_kernel<<<blocks, threads, 0, stream>>>(logits, weights, experts, t, e);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "router_topk launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

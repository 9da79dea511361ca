// gqa_decode_attention: one decode step of grouped-query attention over a [b, s, hkv, d] bf16 KV cache.
// One block per (sequence, kv head): the g query heads of the group share each K/V row load.
// Scores for the group live in dynamic shared memory [g][s]; softmax per head; then P @ V.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cfloat>
#include <cmath>
#include <cstdio>

#define MAXG 16
#define MAXD 128

__global__ void gqa_decode_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ kc,
                                  const __nv_bfloat16* __restrict__ vc, float* __restrict__ out,
                                  int b, int hq, int hkv, int s, int d) {
    extern __shared__ float sc[];  // [g][s]
    __shared__ float qs[MAXG][MAXD];
    __shared__ float stat[MAXG][2];
    int bi = blockIdx.x / hkv, kvh = blockIdx.x % hkv;
    if (bi >= b) return;
    int g = hq / hkv;
    float scale = rsqrtf((float)d);
    for (int i = threadIdx.x; i < g * d; i += blockDim.x) {
        int gh = i / d, c = i % d;
        qs[gh][c] = __bfloat162float(q[((long long)bi * hq + kvh * g + gh) * d + c]);
    }
    __syncthreads();
    for (int j = threadIdx.x; j < s; j += blockDim.x) {
        const __nv_bfloat16* kr = kc + (((long long)bi * s + j) * hkv + kvh) * d;
        float acc[MAXG];
        for (int gh = 0; gh < g; ++gh) acc[gh] = 0.0f;
        for (int c = 0; c < d; ++c) {
            float kv = __bfloat162float(kr[c]);
            for (int gh = 0; gh < g; ++gh) acc[gh] = fmaf(qs[gh][c], kv, acc[gh]);
        }
        for (int gh = 0; gh < g; ++gh) sc[gh * s + j] = acc[gh] * scale;
    }
    __syncthreads();
    if (threadIdx.x < g) {  // one thread per head: max and sum (s is modest for decode)
        int gh = threadIdx.x;
        float m = -FLT_MAX, sum = 0.0f;
        for (int j = 0; j < s; ++j) m = fmaxf(m, sc[gh * s + j]);
        for (int j = 0; j < s; ++j) { float e = expf(sc[gh * s + j] - m); sc[gh * s + j] = e; sum += e; }
        stat[gh][0] = m;
        stat[gh][1] = 1.0f / sum;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < g * d; i += blockDim.x) {
        int gh = i / d, c = i % d;
        float acc = 0.0f;
        for (int j = 0; j < s; ++j)
            acc = fmaf(sc[gh * s + j], __bfloat162float(vc[(((long long)bi * s + j) * hkv + kvh) * d + c]), acc);
        out[((long long)bi * hq + kvh * g + gh) * d + c] = acc * stat[gh][1];
    }
}

cudaError_t gqa_decode_attention(const __nv_bfloat16* q, const __nv_bfloat16* k_cache, const __nv_bfloat16* v_cache,
                                 float* out, int b, int hq, int hkv, int s, int d, cudaStream_t stream) {
    if (b <= 0 || hq <= 0) return cudaSuccess;
    if (hkv <= 0 || hq % hkv || hq / hkv > MAXG || d > MAXD || s <= 0) return cudaErrorInvalidValue;
    size_t smem = (size_t)(hq / hkv) * s * sizeof(float);
    if (smem > 48 * 1024)
        cudaFuncSetAttribute(gqa_decode_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    gqa_decode_kernel<<<b * hkv, 128, smem, stream>>>(q, k_cache, v_cache, out, b, hq, hkv, s, d);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "gqa_decode_attention launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

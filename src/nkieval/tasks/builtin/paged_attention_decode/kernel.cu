// paged_attention_decode: one decode step over a paged KV cache (pages [np, pg, h, d], bf16) addressed
// through a per-sequence block table [b, mp]. One 128-thread block per (sequence, head): scores for
// all mp*pg positions in dynamic shared memory, block-wide max / sum, then P @ V per output dim.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cfloat>
#include <cmath>
#include <cstdio>

__global__ void paged_attention_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ kp,
                                       const __nv_bfloat16* __restrict__ vp, const int* __restrict__ table,
                                       float* __restrict__ out, int b, int h, int d, int np_, int pg, int mp) {
    extern __shared__ float sc[];
    __shared__ float red[32];
    __shared__ float qs[128];
    int bi = blockIdx.x / h, hh = blockIdx.x % h;
    if (bi >= b) return;
    int ctx = mp * pg;
    for (int c = threadIdx.x; c < d; c += blockDim.x) qs[c] = __bfloat162float(q[((long long)bi * h + hh) * d + c]);
    __syncthreads();
    float scale = rsqrtf((float)d), m = -FLT_MAX;
    for (int pos = threadIdx.x; pos < ctx; pos += blockDim.x) {
        int page = table[bi * mp + pos / pg];
        float s = -FLT_MAX;
        if (page >= 0 && page < np_) {  // bounds check on the table entry
            const __nv_bfloat16* kr = kp + (((long long)page * pg + pos % pg) * h + hh) * d;
            s = 0.0f;
            for (int c = 0; c < d; ++c) s = fmaf(qs[c], __bfloat162float(kr[c]), s);
            s *= scale;
        }
        sc[pos] = s;
        m = fmaxf(m, s);
    }
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < (blockDim.x + 31) / 32; ++w) m = fmaxf(m, red[w]);
    __syncthreads();
    float sum = 0.0f;
    for (int pos = threadIdx.x; pos < ctx; pos += blockDim.x) { float e = expf(sc[pos] - m); sc[pos] = e; sum += e; }
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = sum;
    __syncthreads();
    sum = 0.0f;
    for (int w = 0; w < (blockDim.x + 31) / 32; ++w) sum += red[w];
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float acc = 0.0f;
        for (int pos = 0; pos < ctx; ++pos) {
            int page = table[bi * mp + pos / pg];
            if (page < 0 || page >= np_) continue;
            acc = fmaf(sc[pos], __bfloat162float(vp[(((long long)page * pg + pos % pg) * h + hh) * d + c]), acc);
        }
        out[((long long)bi * h + hh) * d + c] = acc / sum;
    }
}

cudaError_t paged_attention_decode(const __nv_bfloat16* q, const __nv_bfloat16* k_pages,
                                   const __nv_bfloat16* v_pages, const int* block_table, float* out, int b, int h,
                                   int d, int np_, int pg, int mp, cudaStream_t stream) {
    if (b <= 0 || h <= 0) return cudaSuccess;
    if (d > 128 || mp * pg <= 0) return cudaErrorInvalidValue;
    size_t smem = (size_t)mp * pg * sizeof(float);
    if (smem > 48 * 1024)
        cudaFuncSetAttribute(paged_attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    paged_attention_kernel<<<b * h, 128, smem, stream>>>(q, k_pages, v_pages, block_table, out, b, h, d, np_, pg, mp);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "paged_attention_decode launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

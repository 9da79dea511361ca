// decoder_decode_step: attention half of a decoder layer for one new token per sequence.
// Kernel 1: RMSNorm of each row (one block per sequence). Kernel 2: q, k, v projections (one thread per
// output column, the row staged in shared memory) and RoPE. Kernel 3: one block per (sequence, head):
// attention over the S cached positions plus the new token. Kernel 4: out = x + attn @ wo.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cfloat>
#include <cmath>
#include <cstdio>

__global__ void rmsnorm_rows_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                    float* __restrict__ hn, int b, int dm, float eps) {
    __shared__ float red[32];
    int row = blockIdx.x;
    if (row >= b) return;
    float s = 0.0f;
    for (int j = threadIdx.x; j < dm; j += blockDim.x) { float v = x[row * dm + j]; s += v * v; }
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    float tot = 0.0f;
    for (int w = 0; w < (blockDim.x + 31) / 32; ++w) tot += red[w];
    float r = rsqrtf(tot / (float)dm + eps);
    for (int j = threadIdx.x; j < dm; j += blockDim.x) hn[row * dm + j] = x[row * dm + j] * r * gamma[j];
}

__global__ void qkv_rope_kernel(const float* __restrict__ hn, const __nv_bfloat16* __restrict__ wq,
                                const __nv_bfloat16* __restrict__ wk, const __nv_bfloat16* __restrict__ wv,
                                const float* __restrict__ cos_t, const float* __restrict__ sin_t,
                                float* __restrict__ q, float* __restrict__ k, float* __restrict__ v,
                                int b, int dm, int hd, int dh) {
    extern __shared__ float row[];
    int bi = blockIdx.y;
    if (bi >= b) return;
    for (int j = threadIdx.x; j < dm; j += blockDim.x) row[j] = hn[bi * dm + j];
    __syncthreads();
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= hd) return;
    int pair = (col % dh) < dh / 2 ? col + dh / 2 : col - dh / 2;  // swap_halves partner within the head
    float aq = 0.0f, ak = 0.0f, av = 0.0f, pq = 0.0f, pk = 0.0f;
    for (int j = 0; j < dm; ++j) {
        float hv = row[j];
        aq = fmaf(hv, __bfloat162float(wq[(long long)j * hd + col]), aq);
        ak = fmaf(hv, __bfloat162float(wk[(long long)j * hd + col]), ak);
        av = fmaf(hv, __bfloat162float(wv[(long long)j * hd + col]), av);
        pq = fmaf(hv, __bfloat162float(wq[(long long)j * hd + pair]), pq);
        pk = fmaf(hv, __bfloat162float(wk[(long long)j * hd + pair]), pk);
    }
    float c = cos_t[bi * dh + col % dh], s = sin_t[bi * dh + col % dh];
    q[bi * hd + col] = aq * c + pq * s;
    k[bi * hd + col] = ak * c + pk * s;
    v[bi * hd + col] = av;
}

__global__ void decode_attention_kernel(const float* __restrict__ q, const float* __restrict__ knew,
                                        const float* __restrict__ vnew, const __nv_bfloat16* __restrict__ kc,
                                        const __nv_bfloat16* __restrict__ vc, float* __restrict__ attn,
                                        int b, int s, int h, int dh) {
    extern __shared__ float sc[];  // s + 1 scores
    __shared__ float red[32];
    int bi = blockIdx.x / h, hh = blockIdx.x % h;
    if (bi >= b) return;
    int hd = h * dh;
    const float* qr = q + bi * hd + hh * dh;
    float scale = rsqrtf((float)dh), m = -FLT_MAX;
    for (int pos = threadIdx.x; pos <= s; pos += blockDim.x) {
        float acc = 0.0f;
        for (int c = 0; c < dh; ++c) {
            float kv = pos < s ? __bfloat162float(kc[(((long long)bi * s + pos) * h + hh) * dh + c])
                               : knew[bi * hd + hh * dh + c];
            acc = fmaf(qr[c], kv, acc);
        }
        sc[pos] = acc * scale;
        m = fmaxf(m, sc[pos]);
    }
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < (blockDim.x + 31) / 32; ++w) m = fmaxf(m, red[w]);
    __syncthreads();
    float sum = 0.0f;
    for (int pos = threadIdx.x; pos <= s; pos += blockDim.x) { float e = expf(sc[pos] - m); sc[pos] = e; sum += e; }
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = sum;
    __syncthreads();
    sum = 0.0f;
    for (int w = 0; w < (blockDim.x + 31) / 32; ++w) sum += red[w];
    for (int c = threadIdx.x; c < dh; c += blockDim.x) {
        float acc = 0.0f;
        for (int pos = 0; pos <= s; ++pos) {
            float vv = pos < s ? __bfloat162float(vc[(((long long)bi * s + pos) * h + hh) * dh + c])
                               : vnew[bi * hd + hh * dh + c];
            acc = fmaf(sc[pos], vv, acc);
        }
        attn[bi * hd + hh * dh + c] = acc / sum;
    }
}

__global__ void out_proj_kernel(const float* __restrict__ x, const float* __restrict__ attn,
                                const __nv_bfloat16* __restrict__ wo, float* __restrict__ out, int b, int hd, int dm) {
    int bi = blockIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (bi >= b || col >= dm) return;
    float acc = x[bi * dm + col];
    for (int j = 0; j < hd; ++j) acc = fmaf(attn[bi * hd + j], __bfloat162float(wo[(long long)j * dm + col]), acc);
    out[bi * dm + col] = acc;
}

cudaError_t decoder_decode_step(const float* x, const float* gamma, const __nv_bfloat16* wq, const __nv_bfloat16* wk,
                                const __nv_bfloat16* wv, const float* cos_t, const float* sin_t,
                                const __nv_bfloat16* k_cache, const __nv_bfloat16* v_cache, const __nv_bfloat16* wo,
                                float* out, float* ws, int b, int dm, int hd, int h, int dh, int s, float eps,
                                cudaStream_t stream) {
    if (b <= 0) return cudaSuccess;
    if (h * dh != hd || (dh & 1)) return cudaErrorInvalidValue;
    float* hn = ws;                 // [b, dm]
    float* q = hn + (size_t)b * dm;  // [b, hd] each
    float* k = q + (size_t)b * hd;
    float* v = k + (size_t)b * hd;
    float* attn = v + (size_t)b * hd;
    rmsnorm_rows_kernel<<<b, 256, 0, stream>>>(x, gamma, hn, b, dm, eps);
    qkv_rope_kernel<<<dim3((hd + 127) / 128, b), 128, dm * sizeof(float), stream>>>(hn, wq, wk, wv, cos_t, sin_t, q,
                                                                                     k, v, b, dm, hd, dh);
    size_t smem = (size_t)(s + 1) * sizeof(float);
    if (smem > 48 * 1024)
        cudaFuncSetAttribute(decode_attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    decode_attention_kernel<<<b * h, 128, smem, stream>>>(q, k, v, k_cache, v_cache, attn, b, s, h, dh);
    out_proj_kernel<<<dim3((dm + 127) / 128, b), 128, 0, stream>>>(x, attn, wo, out, b, hd, dm);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "decoder_decode_step launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

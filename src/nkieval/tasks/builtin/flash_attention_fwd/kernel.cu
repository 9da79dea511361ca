// flash_attention_fwd: causal single-head attention with an online softmax, bf16 inputs
// q_t, k_t [d, s] (transposed) and v [s, d]; fp32 out [s, d] and lse [s].
// One 64-thread block per 64-query tile; key tiles of 32 stream through shared memory up to the
// diagonal; each thread owns one query row: running max m, sum l and accumulator acc[d].
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cfloat>
#include <cmath>
#include <cstdio>

#define BQ 64
#define BK 32
#define DMAX 128

__global__ void flash_fwd_kernel(const __nv_bfloat16* __restrict__ q_t, const __nv_bfloat16* __restrict__ k_t,
                                 const __nv_bfloat16* __restrict__ v, float* __restrict__ out, float* __restrict__ lse,
                                 int d, int s) {
    __shared__ float ks[BK][DMAX + 1];
    __shared__ float vs[BK][DMAX + 1];
    int q0 = blockIdx.x * BQ;
    int i = q0 + threadIdx.x;
    bool valid = i < s;
    float qr[DMAX], acc[DMAX];
    for (int c = 0; c < d; ++c) { qr[c] = valid ? __bfloat162float(q_t[(long long)c * s + i]) : 0.0f; acc[c] = 0.0f; }
    float scale = rsqrtf((float)d), m = -FLT_MAX, l = 0.0f;
    int kend = min(s, q0 + BQ);  // keys beyond the tile's last query are never visible
    for (int k0 = 0; k0 < kend; k0 += BK) {
        for (int idx = threadIdx.x; idx < BK * d; idx += blockDim.x) {
            int j = idx / d, c = idx % d;
            bool ok = k0 + j < s;
            ks[j][c] = ok ? __bfloat162float(k_t[(long long)c * s + k0 + j]) : 0.0f;
            vs[j][c] = ok ? __bfloat162float(v[(long long)(k0 + j) * d + c]) : 0.0f;
        }
        __syncthreads();
        if (valid) {
            for (int j = 0; j < BK && k0 + j <= i; ++j) {
                float sc = 0.0f;
                for (int c = 0; c < d; ++c) sc = fmaf(qr[c], ks[j][c], sc);
                sc *= scale;
                float mn = fmaxf(m, sc);
                float corr = expf(m - mn), pj = expf(sc - mn);
                l = l * corr + pj;
                for (int c = 0; c < d; ++c) acc[c] = acc[c] * corr + pj * vs[j][c];
                m = mn;
            }
        }
        __syncthreads();
    }
    if (valid) {
        for (int c = 0; c < d; ++c) out[(long long)i * d + c] = acc[c] / l;
        lse[i] = m + logf(l);
    }
}

cudaError_t flash_attention_fwd(const __nv_bfloat16* q_t, const __nv_bfloat16* k_t, const __nv_bfloat16* v, float* out,
                                float* lse, int d, int s, cudaStream_t stream) {
    if (s <= 0) return cudaSuccess;
    if (d < 1 || d > DMAX) return cudaErrorInvalidValue;
    flash_fwd_kernel<<<(s + BQ - 1) / BQ, BQ, 0, stream>>>(q_t, k_t, v, out, lse, d, s);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "flash_attention_fwd launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

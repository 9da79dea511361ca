// batched_gemm: c[i] = a_t[i]^T @ b[i] for bf16 a_t [batch, k, m], b [batch, k, n]; fp32 accumulation.
// Tensor-core WMMA tiles of 16x16x16 where a full tile fits, with a bounds-checked shared-memory
// staging path so ragged m, n and k are handled (zero padding of partial tiles).
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <mma.h>
#include <cstdio>

using namespace nvcuda;

#define TM 16
#define TN 16
#define TK 16

__global__ void batched_gemm_kernel(const __nv_bfloat16* __restrict__ a_t, const __nv_bfloat16* __restrict__ b,
                                    float* __restrict__ c, int m, int n, int k) {
    __shared__ __nv_bfloat16 as[TK][TM];   // a^T tile: [k][m], read as column-major A
    __shared__ __nv_bfloat16 bs[TK][TN];
    __shared__ float cs[TM][TN];
    int batch = blockIdx.z;
    int m0 = blockIdx.y * TM, n0 = blockIdx.x * TN;
    const __nv_bfloat16* ab = a_t + (long long)batch * k * m;
    const __nv_bfloat16* bb = b + (long long)batch * k * n;
    wmma::fragment<wmma::accumulator, TM, TN, TK, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k0 = 0; k0 < k; k0 += TK) {
        for (int i = threadIdx.x; i < TK * TM; i += blockDim.x) {
            int kk = i / TM, mm = i % TM;
            as[kk][mm] = (k0 + kk < k && m0 + mm < m) ? ab[(long long)(k0 + kk) * m + m0 + mm] : __float2bfloat16(0.0f);
        }
        for (int i = threadIdx.x; i < TK * TN; i += blockDim.x) {
            int kk = i / TN, nn = i % TN;
            bs[kk][nn] = (k0 + kk < k && n0 + nn < n) ? bb[(long long)(k0 + kk) * n + n0 + nn] : __float2bfloat16(0.0f);
        }
        __syncthreads();
        wmma::fragment<wmma::matrix_a, TM, TN, TK, __nv_bfloat16, wmma::col_major> fa;
        wmma::fragment<wmma::matrix_b, TM, TN, TK, __nv_bfloat16, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, &as[0][0], TM);
        wmma::load_matrix_sync(fb, &bs[0][0], TN);
        wmma::mma_sync(acc, fa, fb, acc);
        __syncthreads();
    }
    wmma::store_matrix_sync(&cs[0][0], acc, TN, wmma::mem_row_major);
    __syncthreads();
    float* cb = c + (long long)batch * m * n;
    for (int i = threadIdx.x; i < TM * TN; i += blockDim.x) {
        int mm = i / TN, nn = i % TN;
        if (m0 + mm < m && n0 + nn < n) cb[(long long)(m0 + mm) * n + n0 + nn] = cs[mm][nn];
    }
}

cudaError_t batched_gemm(const __nv_bfloat16* a_t, const __nv_bfloat16* b, float* c, int batch, int m, int n, int k,
                         cudaStream_t stream) {
    if (batch <= 0 || m <= 0 || n <= 0) return cudaSuccess;
    dim3 grid((n + TN - 1) / TN, (m + TM - 1) / TM, batch);
    batched_gemm_kernel<<<grid, 32, 0, stream>>>(a_t, b, c, m, n, k);  // one warp per 16x16 tile
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "batched_gemm launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

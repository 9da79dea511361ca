// gemm_fp32: c[m, n] = sum_k a[m, k] * b[k, n], row-major fp32, fp32 accumulation.
// 64x64 output tile per 256-thread block, 16-deep K slices staged in shared memory,
// each thread computes a 4x4 micro-tile; every global load and store is bounds-checked.
#include <cuda_runtime.h>
#include <cstdio>

#define BM 64
#define BN 64
#define BK 16
#define TM 4
#define TN 4

__global__ void gemm_fp32_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                 int m, int n, int k) {
    __shared__ float as[BK][BM];
    __shared__ float bs[BK][BN];
    int tx = threadIdx.x % (BN / TN);  // 0..15
    int ty = threadIdx.x / (BN / TN);  // 0..15
    int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN] = {};
    for (int k0 = 0; k0 < k; k0 += BK) {
        for (int i = threadIdx.x; i < BM * BK; i += blockDim.x) {
            int r = i / BK, kk = i % BK;
            int gr = row0 + r, gk = k0 + kk;
            as[kk][r] = (gr < m && gk < k) ? a[(long long)gr * k + gk] : 0.0f;
        }
        for (int i = threadIdx.x; i < BK * BN; i += blockDim.x) {
            int kk = i / BN, cc = i % BN;
            int gk = k0 + kk, gc = col0 + cc;
            bs[kk][cc] = (gk < k && gc < n) ? b[(long long)gk * n + gc] : 0.0f;
        }
        __syncthreads();
        for (int kk = 0; kk < BK; ++kk) {
            float av[TM], bv[TN];
            for (int i = 0; i < TM; ++i) av[i] = as[kk][ty * TM + i];
            for (int j = 0; j < TN; ++j) bv[j] = bs[kk][tx * TN + j];
            for (int i = 0; i < TM; ++i)
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < TM; ++i) {
        int r = row0 + ty * TM + i;
        if (r >= m) continue;
        for (int j = 0; j < TN; ++j) {
            int cc = col0 + tx * TN + j;
            if (cc < n) c[(long long)r * n + cc] = acc[i][j];
        }
    }
}

cudaError_t gemm_fp32(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
    if (m <= 0 || n <= 0) return cudaSuccess;
    dim3 block((BM / TM) * (BN / TN));
    dim3 grid((n + BN - 1) / BN, (m + BM - 1) / BM);
    gemm_fp32_kernel<<<grid, block, 0, stream>>>(a, b, c, m, n, k);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "gemm_fp32 launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

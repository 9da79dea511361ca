// gemm_bf16: C[M, N] = A[M, K] @ B[K, N] with bf16 inputs and fp32 accumulation and output.
// A is stored transposed (a_t[K, M]). Classic shared-memory tiling: each 16 x 16 thread block
// computes one 16 x 16 tile of C, marching over K in 16-wide slabs; out-of-range loads are zero.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdio>

constexpr int kTile = 16;

__global__ void gemm_bf16_kernel(const __nv_bfloat16* __restrict__ a_t, const __nv_bfloat16* __restrict__ b,
                                 float* __restrict__ c, int M, int N, int K) {
    __shared__ float As[kTile][kTile];
    __shared__ float Bs[kTile][kTile];
    const int row = blockIdx.y * kTile + threadIdx.y;  // index into M
    const int col = blockIdx.x * kTile + threadIdx.x;  // index into N
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += kTile) {
        const int ka = k0 + threadIdx.x;
        const int kb = k0 + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? __bfloat162float(a_t[(size_t)ka * M + row]) : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? __bfloat162float(b[(size_t)kb * N + col]) : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kTile; ++kk) acc += As[threadIdx.y][kk] * Bs[kk][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) c[(size_t)row * N + col] = acc;
}

void gemm_bf16(const __nv_bfloat16* d_a_t, const __nv_bfloat16* d_b, float* d_c, int M, int N, int K,
               cudaStream_t stream) {
    if (M <= 0 || N <= 0 || K <= 0) return;
    dim3 block(kTile, kTile);
    dim3 grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile);
    gemm_bf16_kernel<<<grid, block, 0, stream>>>(d_a_t, d_b, d_c, M, N, K);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        fprintf(stderr, "gemm_bf16 launch failed: %s\n", cudaGetErrorString(err));
    }
}

// gemm_bias_gelu: out[M, N] = gelu(X[M, K] @ W[K, N] + bias[N]) with bf16 X, W, fp32 bias, fp32 accumulation
// and output, exact erf GELU. X is stored transposed (x_t[K, M]). Shared-memory 16 x 16 tiling; the
// epilogue (bias + GELU) runs in registers before the only store.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdio>

constexpr int kTile = 16;

__device__ __forceinline__ float gelu_erf(float z) {
    return 0.5f * z * (1.0f + erff(z * 0.70710678118654752f));
}

__global__ void gemm_bias_gelu_kernel(const __nv_bfloat16* __restrict__ x_t, const __nv_bfloat16* __restrict__ w,
                                      const float* __restrict__ bias, float* __restrict__ out, int M, int N, int K) {
    __shared__ float Xs[kTile][kTile];
    __shared__ float Ws[kTile][kTile];
    const int row = blockIdx.y * kTile + threadIdx.y;
    const int col = blockIdx.x * kTile + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += kTile) {
        const int kx = k0 + threadIdx.x;
        const int kw = k0 + threadIdx.y;
        Xs[threadIdx.y][threadIdx.x] = (row < M && kx < K) ? __bfloat162float(x_t[(size_t)kx * M + row]) : 0.0f;
        Ws[threadIdx.y][threadIdx.x] = (kw < K && col < N) ? __bfloat162float(w[(size_t)kw * N + col]) : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kTile; ++kk) acc += Xs[threadIdx.y][kk] * Ws[kk][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) out[(size_t)row * N + col] = gelu_erf(acc + bias[col]);
}

void gemm_bias_gelu(const __nv_bfloat16* d_x_t, const __nv_bfloat16* d_w, const float* d_bias, float* d_out,
                    int M, int N, int K, cudaStream_t stream) {
    if (M <= 0 || N <= 0 || K <= 0) return;
    dim3 block(kTile, kTile);
    dim3 grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile);
    gemm_bias_gelu_kernel<<<grid, block, 0, stream>>>(d_x_t, d_w, d_bias, d_out, M, N, K);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        fprintf(stderr, "gemm_bias_gelu launch failed: %s\n", cudaGetErrorString(err));
    }
}

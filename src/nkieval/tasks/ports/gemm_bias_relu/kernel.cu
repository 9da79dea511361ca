// gemm_bias_relu: C = relu(0.5 * (A @ B) + bias[col]) with bf16 A (stored transposed, a_t[K, M]) and B[K, N], fp32
// accumulation, bias and output. Shared-memory tiling: each 16 x 16 block computes one 16 x 16 tile of C over
// 16-wide K slabs (out-of-range loads are zero); the scale, bias and ReLU are fused into the store.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdio>

constexpr int kTile = 16;
constexpr float kAlpha = 0.5f;

__global__ void gemm_bias_relu_kernel(const __nv_bfloat16* __restrict__ a_t, const __nv_bfloat16* __restrict__ b,
                                      const float* __restrict__ bias, float* __restrict__ c, int M, int N, int K) {
    __shared__ float As[kTile][kTile];
    __shared__ float Bs[kTile][kTile];
    const int row = blockIdx.y * kTile + threadIdx.y;
    const int col = blockIdx.x * kTile + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += kTile) {
        const int ka = k0 + threadIdx.x;
        const int kb = k0 + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? __bfloat162float(a_t[(size_t)ka * M + row]) : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? __bfloat162float(b[(size_t)kb * N + col]) : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < kTile; ++kk) acc += As[threadIdx.y][kk] * Bs[kk][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) {
        const float v = kAlpha * acc + bias[col];
        c[(size_t)row * N + col] = v > 0.0f ? v : 0.0f;
    }
}

void gemm_bias_relu(const __nv_bfloat16* a_t, const __nv_bfloat16* b, const float* bias, float* c, int M, int N, int K,
                    cudaStream_t stream) {
    if (M <= 0 || N <= 0 || K <= 0) return;
    dim3 block(kTile, kTile);
    dim3 grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile);
    gemm_bias_relu_kernel<<<grid, block, 0, stream>>>(a_t, b, bias, c, M, N, K);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "gemm_bias_relu launch failed: %s\n", cudaGetErrorString(err));
}

// rope_half: rotary position embedding, rotate-half convention (GPT-NeoX / Llama), for x [B * T, D] with cos and
// sin tables [T, D / 2]: the row of token (b, t) is rotated by the angles of position t. One thread per pair.
#include <cuda_runtime.h>
#include <cstdio>

__global__ void rope_half_kernel(const float* __restrict__ x, const float* __restrict__ cos_t,
                                 const float* __restrict__ sin_t, float* __restrict__ y, int n_rows, int T, int D) {
    const int half = D / 2;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_rows * half) return;
    const int row = i / half;
    const int j = i % half;
    const int t = row % T;
    const float c = cos_t[(size_t)t * half + j];
    const float s = sin_t[(size_t)t * half + j];
    const float x1 = x[(size_t)row * D + j];
    const float x2 = x[(size_t)row * D + j + half];
    y[(size_t)row * D + j] = x1 * c - x2 * s;
    y[(size_t)row * D + j + half] = x2 * c + x1 * s;
}

void rope_half(const float* x, const float* cos_t, const float* sin_t, float* y, int BT, int T, int D,
               cudaStream_t stream) {
    const int n = BT * (D / 2);
    if (n <= 0) return;
    const int threads = 256;
    rope_half_kernel<<<(n + threads - 1) / threads, threads, 0, stream>>>(x, cos_t, sin_t, y, BT, T, D);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "rope_half launch failed: %s\n", cudaGetErrorString(err));
}

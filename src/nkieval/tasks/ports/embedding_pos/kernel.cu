// embedding_pos: the encoder of a decoder-only transformer, out[b, t, :] = wte[idx[b, t], :] * sqrt(C) + wpe[t, :]
// (token embeddings scaled by sqrt(C) as Gemma does, learned positions as GPT-2). One thread per output element.
#include <cuda_runtime.h>
#include <math.h>
#include <cstdio>

__global__ void embedding_pos_kernel(const int* __restrict__ idx, const float* __restrict__ wte,
                                     const float* __restrict__ wpe, float* __restrict__ out, int B, int T, int C) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * T * C) return;
    const int bt = i / C;
    const int c = i % C;
    const int t = bt % T;
    const int token = idx[bt];
    out[i] = wte[(size_t)token * C + c] * sqrtf((float)C) + wpe[(size_t)t * C + c];
}

void embedding_pos(const int* idx, const float* wte, const float* wpe, float* out, int B, int T, int C,
                   cudaStream_t stream) {
    const int n = B * T * C;
    if (n <= 0) return;
    const int threads = 256;
    embedding_pos_kernel<<<(n + threads - 1) / threads, threads, 0, stream>>>(idx, wte, wpe, out, B, T, C);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "embedding_pos launch failed: %s\n", cudaGetErrorString(err));
}

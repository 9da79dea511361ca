// rope: rotate-half rotary embedding of x[t, h, :] (fp32) with per-token cos/sin tables [t, d];
// the rotate-half sign is folded into the table: sin[t] = concat(-sin(theta), sin(theta)).
// One block per token; threads stride over (head, pair) and write both halves of each pair.
#include <cuda_runtime.h>
#include <cstdio>

__global__ void rope_kernel(const float* __restrict__ x, const float* __restrict__ cos_t,
                            const float* __restrict__ sin_t, float* __restrict__ out, int t, int h, int d) {
    int tok = blockIdx.x;
    if (tok >= t) return;
    int half = d / 2;
    const float* c = cos_t + (long long)tok * d;
    const float* s = sin_t + (long long)tok * d;
    for (int idx = threadIdx.x; idx < h * half; idx += blockDim.x) {
        int head = idx / half, j = idx % half;
        long long base = ((long long)tok * h + head) * d;
        float x1 = x[base + j], x2 = x[base + j + half];
        out[base + j] = x1 * c[j] + x2 * s[j];
        out[base + j + half] = x2 * c[j + half] + x1 * s[j + half];
    }
}

cudaError_t rope(const float* x, const float* cos_t, const float* sin_t, float* out, int t, int h, int d,
                 cudaStream_t stream) {
    if (t <= 0 || (d & 1)) return t <= 0 ? cudaSuccess : cudaErrorInvalidValue;
    rope_kernel<<<t, 128, 0, stream>>>(x, cos_t, sin_t, out, t, h, d);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "rope launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

// cumsum: inclusive prefix sum along each row of a row-major [n, d] fp32 matrix.
// One 512-thread block per row walks the row in 512-wide chunks: Hillis-Steele scan in shared
// memory, plus the running total of the previous chunks.
#include <cuda_runtime.h>
#include <cstdio>

#define BLOCK 512

__global__ void cumsum_kernel(const float* __restrict__ x, float* __restrict__ out, int n, int d) {
    __shared__ float buf[2][BLOCK];
    __shared__ float carry;
    int row = blockIdx.x;
    if (row >= n) return;
    const float* xr = x + (long long)row * d;
    float* orow = out + (long long)row * d;
    if (threadIdx.x == 0) carry = 0.0f;
    __syncthreads();
    for (int base = 0; base < d; base += BLOCK) {
        int j = base + threadIdx.x;
        int cur = 0;
        buf[cur][threadIdx.x] = (j < d) ? xr[j] : 0.0f;
        __syncthreads();
        for (int off = 1; off < BLOCK; off <<= 1) {
            float v = buf[cur][threadIdx.x];
            if (threadIdx.x >= off) v += buf[cur][threadIdx.x - off];
            buf[cur ^ 1][threadIdx.x] = v;
            cur ^= 1;
            __syncthreads();
        }
        float total = carry;
        if (j < d) orow[j] = buf[cur][threadIdx.x] + total;
        __syncthreads();
        if (threadIdx.x == BLOCK - 1) carry = total + buf[cur][BLOCK - 1];
        __syncthreads();
    }
}

cudaError_t cumsum(const float* x, float* out, int n, int d, cudaStream_t stream) {
    if (n <= 0 || d <= 0) return cudaSuccess;
    cumsum_kernel<<<n, BLOCK, 0, stream>>>(x, out, n, d);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "cumsum launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

// scale_bias_broadcast: out[r, c] = x[r, c] * row_scale[r] + col_bias[c], row-major [n, d] fp32.
// 2-D grid of 32x8 thread blocks; the column bias is staged in shared memory per block.
#include <cuda_runtime.h>
#include <cstdio>

__global__ void scale_bias_kernel(const float* __restrict__ x, const float* __restrict__ row_scale,
                                  const float* __restrict__ col_bias, float* __restrict__ out, int n, int d) {
    __shared__ float bias[32];
    int c = blockIdx.x * 32 + threadIdx.x;
    int r = blockIdx.y * 8 + threadIdx.y;
    if (threadIdx.y == 0) bias[threadIdx.x] = (c < d) ? col_bias[c] : 0.0f;
    __syncthreads();
    if (r < n && c < d) {
        long long i = (long long)r * d + c;
        out[i] = fmaf(x[i], row_scale[r], bias[threadIdx.x]);
    }
}

cudaError_t scale_bias_broadcast(const float* x, const float* row_scale, const float* col_bias, float* out,
                                 int n, int d, cudaStream_t stream) {
    if (n <= 0 || d <= 0) return cudaSuccess;
    dim3 block(32, 8);
    dim3 grid((d + 31) / 32, (n + 7) / 8);
    scale_bias_kernel<<<grid, block, 0, stream>>>(x, row_scale, col_bias, out, n, d);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "scale_bias_broadcast launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

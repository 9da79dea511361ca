// fp8_dequantize: y[r, j] = float(q[r, j]) * scale[r] for row-major [n, d] __nv_fp8_e4m3 codes.
// 2-D grid: blockIdx.y = row, 256 threads stride over the columns four codes at a time.
#include <cuda_runtime.h>
#include <cuda_fp8.h>
#include <cstdio>

__global__ void fp8_dequantize_kernel(const __nv_fp8_e4m3* __restrict__ q, const float* __restrict__ scale,
                                      float* __restrict__ y, int n, int d) {
    int row = blockIdx.y;
    if (row >= n) return;
    float s = scale[row];
    const __nv_fp8_e4m3* qr = q + (long long)row * d;
    float* yr = y + (long long)row * d;
    for (int j = (blockIdx.x * blockDim.x + threadIdx.x) * 4; j < d; j += gridDim.x * blockDim.x * 4) {
        #pragma unroll
        for (int u = 0; u < 4; ++u) {
            if (j + u < d) yr[j + u] = float(qr[j + u]) * s;
        }
    }
}

cudaError_t fp8_dequantize(const __nv_fp8_e4m3* q, const float* scale, float* y, int n, int d, cudaStream_t stream) {
    if (n <= 0 || d <= 0) return cudaSuccess;
    int per_block = 256 * 4;
    int gx = (d + per_block - 1) / per_block;
    if (gx > 64) gx = 64;
    dim3 grid(gx, n);
    fp8_dequantize_kernel<<<grid, 256, 0, stream>>>(q, scale, y, n, d);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "fp8_dequantize launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

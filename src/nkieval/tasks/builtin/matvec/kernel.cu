// matvec: y[r] = sum_k a[r, k] * x[k] for a row-major [m, k] fp32 matrix.
// One warp per row (8 rows per 256-thread block), float4 loads when the row is 16-byte aligned.
#include <cuda_runtime.h>
#include <cstdio>

__global__ void matvec_kernel(const float* __restrict__ a, const float* __restrict__ x, float* __restrict__ y,
                              int m, int k) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (warp >= m) return;  // whole warp exits together: the guard is warp-uniform
    const float* row = a + (long long)warp * k;
    float acc = 0.0f;
    bool aligned = ((k & 3) == 0);
    if (aligned) {
        const float4* row4 = reinterpret_cast<const float4*>(row);
        const float4* x4 = reinterpret_cast<const float4*>(x);
        for (int j = lane; j < k / 4; j += 32) {
            float4 av = row4[j], xv = x4[j];
            acc += av.x * xv.x + av.y * xv.y + av.z * xv.z + av.w * xv.w;
        }
    } else {
        for (int j = lane; j < k; j += 32) acc += row[j] * x[j];
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) y[warp] = acc;
}

cudaError_t matvec(const float* a, const float* x, float* y, int m, int k, cudaStream_t stream) {
    if (m <= 0) return cudaSuccess;
    const int threads = 256, rows_per_block = threads / 32;
    int blocks = (m + rows_per_block - 1) / rows_per_block;
    matvec_kernel<<<blocks, threads, 0, stream>>>(a, x, y, m, k);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "matvec launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

// row_sum: out[r] = sum_j x[r, j] for a row-major [n, d] fp32 matrix.
// One 256-thread block per row: strided partial sums, warp shuffles, then shared memory.
#include <cuda_runtime.h>
#include <cstdio>

__inline__ __device__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ out, int n, int d) {
    int row = blockIdx.x;
    if (row >= n) return;
    const float* xr = x + (long long)row * d;
    float acc = 0.0f;
    for (int j = threadIdx.x; j < d; j += blockDim.x) acc += xr[j];
    __shared__ float partial[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    acc = warp_sum(acc);
    if (lane == 0) partial[warp] = acc;
    __syncthreads();
    int nwarps = (blockDim.x + 31) >> 5;
    acc = (threadIdx.x < nwarps) ? partial[lane] : 0.0f;
    if (warp == 0) {
        acc = warp_sum(acc);
        if (lane == 0) out[row] = acc;
    }
}

cudaError_t row_sum(const float* x, float* out, int n, int d, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    row_sum_kernel<<<n, 256, 0, stream>>>(x, out, n, d);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "row_sum launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

// row_argmax: values[r] = max_j x[r, j], indices[r] = first j attaining it, for row-major [n, d] fp32.
// One 256-thread block per row; (value, index) pairs reduced with warp shuffles, ties -> lower index.
#include <cuda_runtime.h>
#include <cfloat>
#include <cstdio>

__inline__ __device__ void better(float& v, int& i, float ov, int oi) {
    if (ov > v || (ov == v && oi < i)) { v = ov; i = oi; }
}

__inline__ __device__ void warp_argmax(float& v, int& i) {
    for (int off = 16; off > 0; off >>= 1) {
        float ov = __shfl_down_sync(0xffffffffu, v, off);
        int oi = __shfl_down_sync(0xffffffffu, i, off);
        better(v, i, ov, oi);
    }
}

__global__ void row_argmax_kernel(const float* __restrict__ x, float* __restrict__ values,
                                  int* __restrict__ indices, int n, int d) {
    int row = blockIdx.x;
    if (row >= n) return;
    const float* xr = x + (long long)row * d;
    float v = -FLT_MAX;
    int idx = d;  // sentinel larger than any column
    for (int j = threadIdx.x; j < d; j += blockDim.x) better(v, idx, xr[j], j);
    __shared__ float sv[32];
    __shared__ int si[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    warp_argmax(v, idx);
    if (lane == 0) { sv[warp] = v; si[warp] = idx; }
    __syncthreads();
    if (warp == 0) {
        int nwarps = (blockDim.x + 31) >> 5;
        v = lane < nwarps ? sv[lane] : -FLT_MAX;
        idx = lane < nwarps ? si[lane] : d;
        warp_argmax(v, idx);
        if (lane == 0) { values[row] = v; indices[row] = idx; }
    }
}

cudaError_t row_argmax(const float* x, float* values, int* indices, int n, int d, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    row_argmax_kernel<<<n, 256, 0, stream>>>(x, values, indices, n, d);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "row_argmax launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

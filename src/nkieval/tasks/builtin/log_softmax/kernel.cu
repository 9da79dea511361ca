// log_softmax over the rows of a row-major [n, d] fp32 matrix: out = (x - max) - log(sum exp(x - max)).
// x - max first: it is exact for nearby values, where max + log(sum) would round at the scale of max.
// One 256-thread block per row: block max, block sum of exp, then the elementwise write.
#include <cuda_runtime.h>
#include <cfloat>
#include <cstdio>

template <bool IsMax>
__inline__ __device__ float block_reduce(float v, float* smem) {
    for (int off = 16; off > 0; off >>= 1) {
        float o = __shfl_down_sync(0xffffffffu, v, off);
        v = IsMax ? fmaxf(v, o) : v + o;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    int nwarps = (blockDim.x + 31) >> 5;
    v = (threadIdx.x < nwarps) ? smem[threadIdx.x] : (IsMax ? -FLT_MAX : 0.0f);
    if (warp == 0) {
        for (int off = 16; off > 0; off >>= 1) {
            float o = __shfl_down_sync(0xffffffffu, v, off);
            v = IsMax ? fmaxf(v, o) : v + o;
        }
        if (lane == 0) smem[0] = v;
    }
    __syncthreads();
    float r = smem[0];
    __syncthreads();
    return r;
}

__global__ void log_softmax_kernel(const float* __restrict__ x, float* __restrict__ out, int n, int d) {
    __shared__ float smem[32];
    int row = blockIdx.x;
    if (row >= n) return;
    const float* xr = x + (long long)row * d;
    float* orow = out + (long long)row * d;
    float m = -FLT_MAX;
    for (int j = threadIdx.x; j < d; j += blockDim.x) m = fmaxf(m, xr[j]);
    m = block_reduce<true>(m, smem);
    float s = 0.0f;
    for (int j = threadIdx.x; j < d; j += blockDim.x) s += expf(xr[j] - m);
    s = block_reduce<false>(s, smem);
    float ls = logf(s);
    for (int j = threadIdx.x; j < d; j += blockDim.x) orow[j] = (xr[j] - m) - ls;
}

cudaError_t log_softmax(const float* x, float* out, int n, int d, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    log_softmax_kernel<<<n, 256, 0, stream>>>(x, out, n, d);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "log_softmax launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

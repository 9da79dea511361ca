// avgpool2d: 3x3 average pool, stride 1, zero padding 1, count_include_pad (divide by 9), on [c, h, w] fp32.
// One thread per output pixel; 16x16 thread blocks stage an 18x18 input tile (with halo) in shared memory.
#include <cuda_runtime.h>
#include <cstdio>

#define TS 16

__global__ void avgpool3x3_kernel(const float* __restrict__ x, float* __restrict__ out, int c, int h, int w) {
    __shared__ float tile[TS + 2][TS + 2];
    int ch = blockIdx.z;
    if (ch >= c) return;
    int ox = blockIdx.x * TS, oy = blockIdx.y * TS;
    const float* xc = x + (long long)ch * h * w;
    for (int i = threadIdx.y; i < TS + 2; i += TS) {
        for (int j = threadIdx.x; j < TS + 2; j += TS) {
            int yy = oy + i - 1, xx = ox + j - 1;
            tile[i][j] = (yy >= 0 && yy < h && xx >= 0 && xx < w) ? xc[(long long)yy * w + xx] : 0.0f;
        }
    }
    __syncthreads();
    int y = oy + threadIdx.y, xq = ox + threadIdx.x;
    if (y < h && xq < w) {
        float s = 0.0f;
        for (int di = 0; di < 3; ++di)
            for (int dj = 0; dj < 3; ++dj) s += tile[threadIdx.y + di][threadIdx.x + dj];
        out[((long long)ch * h + y) * w + xq] = s * (1.0f / 9.0f);
    }
}

cudaError_t avgpool2d(const float* x, float* out, int c, int h, int w, cudaStream_t stream) {
    if (c <= 0 || h <= 0 || w <= 0) return cudaSuccess;
    dim3 block(TS, TS);
    dim3 grid((w + TS - 1) / TS, (h + TS - 1) / TS, c);
    avgpool3x3_kernel<<<grid, block, 0, stream>>>(x, out, c, h, w);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "avgpool2d launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

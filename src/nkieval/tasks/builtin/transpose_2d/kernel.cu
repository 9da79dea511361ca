// transpose_2d: out[j, i] = x[i, j] for a row-major [m, n] fp32 matrix.
// Classic 32x32 shared-memory tile (padded to avoid bank conflicts), 32x8 threads per block.
#include <cuda_runtime.h>
#include <cstdio>

#define TILE 32
#define ROWS 8

__global__ void transpose_kernel(const float* __restrict__ x, float* __restrict__ out, int m, int n) {
    __shared__ float tile[TILE][TILE + 1];
    int col = blockIdx.x * TILE + threadIdx.x;  // column of x
    int row = blockIdx.y * TILE + threadIdx.y;  // row of x
    for (int k = 0; k < TILE; k += ROWS) {
        if (row + k < m && col < n) tile[threadIdx.y + k][threadIdx.x] = x[(long long)(row + k) * n + col];
    }
    __syncthreads();
    int ocol = blockIdx.y * TILE + threadIdx.x;  // column of out = row of x
    int orow = blockIdx.x * TILE + threadIdx.y;  // row of out = column of x
    for (int k = 0; k < TILE; k += ROWS) {
        if (orow + k < n && ocol < m) out[(long long)(orow + k) * m + ocol] = tile[threadIdx.x][threadIdx.y + k];
    }
}

cudaError_t transpose_2d(const float* x, float* out, int m, int n, cudaStream_t stream) {
    if (m <= 0 || n <= 0) return cudaSuccess;
    dim3 block(TILE, ROWS);
    dim3 grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    transpose_kernel<<<grid, block, 0, stream>>>(x, out, m, n);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "transpose launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

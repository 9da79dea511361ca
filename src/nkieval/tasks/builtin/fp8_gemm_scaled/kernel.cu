// fp8_gemm_scaled: c[m, n] = scale_a[m] * scale_b[n] * sum_k a_t[k, m] * b[k, n] with fp8 (e4m3) operands,
// fp32 accumulation. 32x32 output tile per block; fp8 codes are staged in shared memory and widened to
// float only inside the dot product; both scales are applied once in the epilogue.
#include <cuda_runtime.h>
#include <cuda_fp8.h>
#include <cstdio>

#define T 32

__global__ void fp8_gemm_scaled_kernel(const __nv_fp8_e4m3* __restrict__ a_t, const __nv_fp8_e4m3* __restrict__ b,
                                       const float* __restrict__ scale_a, const float* __restrict__ scale_b,
                                       float* __restrict__ c, int m, int n, int k) {
    __shared__ __nv_fp8_e4m3 as[T][T];  // [k][m]
    __shared__ __nv_fp8_e4m3 bs[T][T];  // [k][n]
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < k; k0 += T) {
        int ka = k0 + threadIdx.y;
        int am = blockIdx.y * T + threadIdx.x;
        as[threadIdx.y][threadIdx.x] = (ka < k && am < m) ? a_t[(long long)ka * m + am] : __nv_fp8_e4m3(0.0f);
        bs[threadIdx.y][threadIdx.x] = (ka < k && col < n) ? b[(long long)ka * n + col] : __nv_fp8_e4m3(0.0f);
        __syncthreads();
        for (int kk = 0; kk < T; ++kk) acc = fmaf(float(as[kk][threadIdx.y]), float(bs[kk][threadIdx.x]), acc);
        __syncthreads();
    }
    if (row < m && col < n) c[(long long)row * n + col] = acc * scale_a[row] * scale_b[col];
}

cudaError_t fp8_gemm_scaled(const __nv_fp8_e4m3* a_t, const __nv_fp8_e4m3* b, const float* scale_a,
                            const float* scale_b, float* c, int m, int n, int k, cudaStream_t stream) {
    if (m <= 0 || n <= 0) return cudaSuccess;
    dim3 block(T, T), grid((n + T - 1) / T, (m + T - 1) / T);
    fp8_gemm_scaled_kernel<<<grid, block, 0, stream>>>(a_t, b, scale_a, scale_b, c, m, n, k);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "fp8_gemm_scaled launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

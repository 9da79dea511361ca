// lora_gemm: out = x @ w + scaling * (x @ A) @ B with x given transposed (x_t [d, n]), bf16 operands,
// fp32 accumulation. Kernel 1 computes the fp32 low-rank projection t = x @ A ([n, r]); kernel 2 is a
// 32x32-tiled GEMM over the concatenated reduction [x | scaling * t] x [w ; B], so the update is fused.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdio>

#define T 32

__global__ void lora_down_kernel(const __nv_bfloat16* __restrict__ x_t, const __nv_bfloat16* __restrict__ a,
                                 float* __restrict__ t_out, int n, int d, int r, float scaling) {
    int tok = blockIdx.x * blockDim.y + threadIdx.y;
    int j = threadIdx.x;
    if (tok >= n || j >= r) return;
    float acc = 0.0f;
    for (int k = 0; k < d; ++k)
        acc = fmaf(__bfloat162float(x_t[(long long)k * n + tok]), __bfloat162float(a[(long long)k * r + j]), acc);
    t_out[(long long)tok * r + j] = scaling * acc;
}

__global__ void lora_gemm_kernel(const __nv_bfloat16* __restrict__ x_t, const __nv_bfloat16* __restrict__ w,
                                 const float* __restrict__ t_in, const __nv_bfloat16* __restrict__ b,
                                 float* __restrict__ out, int n, int d, int f, int r) {
    __shared__ float xs[T][T + 1], ws[T][T + 1];
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float acc = 0.0f;
    int ktot = d + r;  // reduction over [x | t] against [w ; B]
    for (int k0 = 0; k0 < ktot; k0 += T) {
        int kx = k0 + threadIdx.x, kw = k0 + threadIdx.y;
        float xv = 0.0f, wv = 0.0f;
        if (row < n && kx < d) xv = __bfloat162float(x_t[(long long)kx * n + row]);
        else if (row < n && kx < ktot) xv = t_in[(long long)row * r + (kx - d)];
        if (col < f && kw < d) wv = __bfloat162float(w[(long long)kw * f + col]);
        else if (col < f && kw < ktot) wv = __bfloat162float(b[(long long)(kw - d) * f + col]);
        xs[threadIdx.y][threadIdx.x] = xv;
        ws[threadIdx.y][threadIdx.x] = wv;
        __syncthreads();
        for (int kk = 0; kk < T; ++kk) acc = fmaf(xs[threadIdx.y][kk], ws[kk][threadIdx.x], acc);
        __syncthreads();
    }
    if (row < n && col < f) out[(long long)row * f + col] = acc;
}

cudaError_t lora_gemm(const __nv_bfloat16* x_t, const __nv_bfloat16* w, const __nv_bfloat16* lora_a,
                      const __nv_bfloat16* lora_b, float* out, float* t_workspace, int n, int d, int f, int r,
                      float scaling, cudaStream_t stream) {
    if (n <= 0 || f <= 0) return cudaSuccess;
    if (r < 1 || r > 128) return cudaErrorInvalidValue;
    dim3 b1(r, 256 / r > 0 ? 256 / r : 1);
    lora_down_kernel<<<(n + b1.y - 1) / b1.y, b1, 0, stream>>>(x_t, lora_a, t_workspace, n, d, r, scaling);
    dim3 block(T, T), grid((f + T - 1) / T, (n + T - 1) / T);
    lora_gemm_kernel<<<grid, block, 0, stream>>>(x_t, w, t_workspace, lora_b, out, n, d, f, r);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "lora_gemm launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

// swiglu_mlp: out = (silu(x @ w_gate) * (x @ w_up)) @ w_down, bf16 operands, fp32 accumulation.
// x is given transposed (x_t[d, n]). Kernel 1 computes the gated activation act[n, h] (fp32, in a
// workspace) with both projections sharing one staged x tile; kernel 2 is the down projection.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdio>

#define T 32

__global__ void gate_up_kernel(const __nv_bfloat16* __restrict__ x_t, const __nv_bfloat16* __restrict__ wg,
                               const __nv_bfloat16* __restrict__ wu, float* __restrict__ act,
                               int n, int d, int h) {
    __shared__ float xs[T][T + 1], gs[T][T + 1], us[T][T + 1];
    int tok = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float g = 0.0f, u = 0.0f;
    for (int k0 = 0; k0 < d; k0 += T) {
        int kx = k0 + threadIdx.x, kw = k0 + threadIdx.y;
        xs[threadIdx.y][threadIdx.x] = (tok < n && kx < d) ? __bfloat162float(x_t[(long long)kx * n + tok]) : 0.0f;
        bool okw = (kw < d && col < h);
        gs[threadIdx.y][threadIdx.x] = okw ? __bfloat162float(wg[(long long)kw * h + col]) : 0.0f;
        us[threadIdx.y][threadIdx.x] = okw ? __bfloat162float(wu[(long long)kw * h + col]) : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < T; ++kk) {
            float xv = xs[threadIdx.y][kk];
            g = fmaf(xv, gs[kk][threadIdx.x], g);
            u = fmaf(xv, us[kk][threadIdx.x], u);
        }
        __syncthreads();
    }
    if (tok < n && col < h) act[(long long)tok * h + col] = g / (1.0f + expf(-g)) * u;
}

__global__ void down_kernel(const float* __restrict__ act, const __nv_bfloat16* __restrict__ wd,
                            float* __restrict__ out, int n, int h, int d) {
    __shared__ float as[T][T + 1], ws[T][T + 1];
    int tok = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < h; k0 += T) {
        int ka = k0 + threadIdx.x, kw = k0 + threadIdx.y;
        as[threadIdx.y][threadIdx.x] = (tok < n && ka < h) ? act[(long long)tok * h + ka] : 0.0f;
        ws[threadIdx.y][threadIdx.x] = (kw < h && col < d) ? __bfloat162float(wd[(long long)kw * d + col]) : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < T; ++kk) acc = fmaf(as[threadIdx.y][kk], ws[kk][threadIdx.x], acc);
        __syncthreads();
    }
    if (tok < n && col < d) out[(long long)tok * d + col] = acc;
}

cudaError_t swiglu_mlp(const __nv_bfloat16* x_t, const __nv_bfloat16* w_gate, const __nv_bfloat16* w_up,
                       const __nv_bfloat16* w_down, float* out, float* act_workspace, int n, int d, int h,
                       cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    dim3 block(T, T);
    gate_up_kernel<<<dim3((h + T - 1) / T, (n + T - 1) / T), block, 0, stream>>>(x_t, w_gate, w_up, act_workspace,
                                                                               n, d, h);
    down_kernel<<<dim3((d + T - 1) / T, (n + T - 1) / T), block, 0, stream>>>(act_workspace, w_down, out, n, h, d);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "swiglu_mlp launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

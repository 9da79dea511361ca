// moe_expert_block: top-2 MoE MLP. Kernel 1 (one warp per token) computes the router logits, picks the
// top two experts and their renormalised softmax gates. Kernel 2 (grid over experts x token tiles)
// evaluates silu(x @ w1[e]) @ w2[e] only for tokens routed to e and atomically adds gate * y to out.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cfloat>
#include <cstdio>

#define EMAX 64
#define T 16

__global__ void router_top2_kernel(const __nv_bfloat16* __restrict__ x_t, const __nv_bfloat16* __restrict__ rw,
                                   int* __restrict__ sel, float* __restrict__ gate, int t, int d, int e) {
    int tok = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (tok >= t) return;
    float best = -FLT_MAX, second = -FLT_MAX;
    int bi = 0, si = 0;
    for (int ex = 0; ex < e; ++ex) {
        float acc = 0.0f;
        for (int k = lane; k < d; k += 32)
            acc = fmaf(__bfloat162float(x_t[(long long)k * t + tok]), __bfloat162float(rw[(long long)k * e + ex]), acc);
        for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (acc > best) { second = best; si = bi; best = acc; bi = ex; }
        else if (acc > second) { second = acc; si = ex; }
    }
    if (lane == 0) {
        float g2 = expf(second - best);
        sel[tok * 2] = bi;
        sel[tok * 2 + 1] = si;
        gate[tok * 2] = 1.0f / (1.0f + g2);
        gate[tok * 2 + 1] = g2 / (1.0f + g2);
    }
}

__global__ void expert_mlp_kernel(const __nv_bfloat16* __restrict__ x_t, const __nv_bfloat16* __restrict__ w1,
                                  const __nv_bfloat16* __restrict__ w2, const int* __restrict__ sel,
                                  const float* __restrict__ gate, float* __restrict__ out, int t, int d, int h) {
    extern __shared__ float act[];  // [T tokens][h]
    int ex = blockIdx.y;
    int t0 = blockIdx.x * T;
    const __nv_bfloat16* a = w1 + (long long)ex * d * h;
    const __nv_bfloat16* b = w2 + (long long)ex * h * d;
    for (int idx = threadIdx.x; idx < T * h; idx += blockDim.x) {
        int i = idx / h, j = idx % h, tok = t0 + i;
        float v = 0.0f;
        if (tok < t && (sel[tok * 2] == ex || sel[tok * 2 + 1] == ex)) {
            for (int k = 0; k < d; ++k)
                v = fmaf(__bfloat162float(x_t[(long long)k * t + tok]), __bfloat162float(a[(long long)k * h + j]), v);
            v = v / (1.0f + expf(-v));
        }
        act[idx] = v;
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < T * d; idx += blockDim.x) {
        int i = idx / d, c = idx % d, tok = t0 + i;
        if (tok >= t) continue;
        float g = sel[tok * 2] == ex ? gate[tok * 2] : (sel[tok * 2 + 1] == ex ? gate[tok * 2 + 1] : 0.0f);
        if (g == 0.0f) continue;
        float acc = 0.0f;
        for (int j = 0; j < h; ++j) acc = fmaf(act[i * h + j], __bfloat162float(b[(long long)j * d + c]), acc);
        atomicAdd(&out[(long long)tok * d + c], g * acc);
    }
}

cudaError_t moe_expert_block(const __nv_bfloat16* x_t, const __nv_bfloat16* router_w, const __nv_bfloat16* w1,
                             const __nv_bfloat16* w2, float* out, int* sel_ws, float* gate_ws, int t, int d, int h,
                             int e, cudaStream_t stream) {
    if (t <= 0) return cudaSuccess;
    if (e < 2 || e > EMAX) return cudaErrorInvalidValue;
    cudaMemsetAsync(out, 0, (size_t)t * d * sizeof(float), stream);
    router_top2_kernel<<<(t * 32 + 255) / 256, 256, 0, stream>>>(x_t, router_w, sel_ws, gate_ws, t, d, e);
    size_t smem = (size_t)T * h * sizeof(float);
    if (smem > 48 * 1024) cudaFuncSetAttribute(expert_mlp_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    expert_mlp_kernel<<<dim3((t + T - 1) / T, e), 256, smem, stream>>>(x_t, w1, w2, sel_ws, gate_ws, out, t, d, h);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "moe_expert_block launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

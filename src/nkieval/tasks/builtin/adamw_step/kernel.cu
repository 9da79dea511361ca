// adamw_step: one fused AdamW update over n fp32 parameters (grid-stride loop, one element per thread).
#include <cuda_runtime.h>
#include <math.h>
#include <cstdio>

__global__ void adamw_kernel(const float* __restrict__ param, const float* __restrict__ grad,
                             const float* __restrict__ m, const float* __restrict__ v,
                             float* __restrict__ param_new, float* __restrict__ m_new, float* __restrict__ v_new,
                             long long n, float lr, float beta1, float beta2, float eps, float weight_decay,
                             float bc1, float bc2) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        float g = grad[i];
        float m1 = beta1 * m[i] + (1.0f - beta1) * g;
        float v1 = beta2 * v[i] + (1.0f - beta2) * g * g;
        float denom = sqrtf(v1 / bc2) + eps;
        param_new[i] = param[i] * (1.0f - lr * weight_decay) - lr * (m1 / bc1) / denom;
        m_new[i] = m1;
        v_new[i] = v1;
    }
}

cudaError_t adamw_step(const float* param, const float* grad, const float* m, const float* v, float* param_new,
                       float* m_new, float* v_new, long long n, float lr, float beta1, float beta2, float eps,
                       float weight_decay, int step, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    float bc1 = 1.0f - powf(beta1, (float)step), bc2 = 1.0f - powf(beta2, (float)step);
    const int threads = 256;
    long long blocks = (n + threads - 1) / threads;
    if (blocks > 4096) blocks = 4096;
    adamw_kernel<<<(unsigned)blocks, threads, 0, stream>>>(param, grad, m, v, param_new, m_new, v_new, n, lr, beta1,
                                                           beta2, eps, weight_decay, bc1, bc2);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "adamw_step launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

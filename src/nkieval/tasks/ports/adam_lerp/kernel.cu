// adam_lerp: one Adam step over n fp32 parameters, the moments updated with lerp as fused optimizers write it.
// One element per thread; the bias corrections are computed in the kernel from the step count.
#include <cuda_runtime.h>
#include <math.h>
#include <cstdio>

__device__ float lerp(float a, float b, float t) { return a + t * (b - a); }

__global__ void adam_lerp_kernel(const float* __restrict__ param, const float* __restrict__ grad,
                                 const float* __restrict__ m, const float* __restrict__ v, float* __restrict__ param_new,
                                 float* __restrict__ m_new, float* __restrict__ v_new, int n, float lr, float beta1,
                                 float beta2, float eps, int step) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float g = grad[i];
    const float m1 = lerp(g, m[i], beta1);
    const float v1 = lerp(g * g, v[i], beta2);
    const float bc1 = 1.0f - powf(beta1, (float)step);
    const float bc2 = 1.0f - powf(beta2, (float)step);
    const float m_hat = m1 / bc1;
    const float v_hat = v1 / bc2;
    param_new[i] = param[i] - lr * m_hat / (sqrtf(v_hat) + eps);
    m_new[i] = m1;
    v_new[i] = v1;
}

cudaError_t adam_lerp(const float* param, const float* grad, const float* m, const float* v, float* param_new,
                      float* m_new, float* v_new, int n, float lr, float beta1, float beta2, float eps, int step,
                      cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    const int threads = 256;
    adam_lerp_kernel<<<(n + threads - 1) / threads, threads, 0, stream>>>(param, grad, m, v, param_new, m_new, v_new,
                                                                         n, lr, beta1, beta2, eps, step);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "adam_lerp launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

// sgd_nesterov: one step of SGD with weight decay and Nesterov momentum (torch.optim.SGD, dampening 0).
// One element per thread.
#include <cuda_runtime.h>
#include <cstdio>

__global__ void sgd_nesterov_kernel(const float* __restrict__ param, const float* __restrict__ grad,
                                    const float* __restrict__ buf, float* __restrict__ param_new,
                                    float* __restrict__ buf_new, int n, float lr, float momentum, float weight_decay) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float p = param[i];
    float g = grad[i] + weight_decay * p;
    const float b = momentum * buf[i] + g;
    g = g + momentum * b;
    param_new[i] = p - lr * g;
    buf_new[i] = b;
}

void sgd_nesterov(const float* param, const float* grad, const float* buf, float* param_new, float* buf_new, int n,
                  float lr, float momentum, float weight_decay, cudaStream_t stream) {
    if (n <= 0) return;
    const int threads = 256;
    sgd_nesterov_kernel<<<(n + threads - 1) / threads, threads, 0, stream>>>(param, grad, buf, param_new, buf_new, n,
                                                                             lr, momentum, weight_decay);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "sgd_nesterov launch failed: %s\n", cudaGetErrorString(err));
}

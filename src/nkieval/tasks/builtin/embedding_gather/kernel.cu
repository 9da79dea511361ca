// embedding_gather: out[i, :] = table[ids[i], :] for an fp32 [v, d] table and n int32 ids.
// One block per token; ids outside [0, v) produce a zero row instead of an out-of-bounds read.
#include <cuda_runtime.h>
#include <cstdio>

__global__ void embedding_gather_kernel(const float* __restrict__ table, const int* __restrict__ ids,
                                        float* __restrict__ out, int v, int d, int n) {
    int tok = blockIdx.x;
    if (tok >= n) return;
    int id = ids[tok];
    float* orow = out + (long long)tok * d;
    if (id < 0 || id >= v) {
        for (int j = threadIdx.x; j < d; j += blockDim.x) orow[j] = 0.0f;
        return;
    }
    const float* trow = table + (long long)id * d;
    for (int j = threadIdx.x; j < d; j += blockDim.x) orow[j] = trow[j];
}

cudaError_t embedding_gather(const float* table, const int* ids, float* out, int v, int d, int n,
                             cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    embedding_gather_kernel<<<n, 128, 0, stream>>>(table, ids, out, v, d, n);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "embedding_gather launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

// chunked_linear_attention: o[t] = sum_{s<=t} (q[t].k[s]) v[s], fp32, one head, chunks of 64 steps.
// Pass 1 (one block per chunk) computes the chunk's state contribution K_c^T V_c; pass 2 (one thread
// block) turns them into exclusive prefix states; pass 3 (one block per chunk) computes the
// intra-chunk causal part plus Q_c S_{c-1}. Work is linear in T.
#include <cuda_runtime.h>
#include <cstdio>

#define CH 64
#define DMAX 128

__global__ void chunk_state_kernel(const float* __restrict__ k, const float* __restrict__ v,
                                   float* __restrict__ states, int t, int dk, int dv) {
    int c = blockIdx.x;
    int t0 = c * CH, tn = min(CH, t - t0);
    float* st = states + (long long)c * dk * dv;
    for (int idx = threadIdx.x; idx < dk * dv; idx += blockDim.x) {
        int i = idx / dv, j = idx % dv;
        float acc = 0.0f;
        for (int s = 0; s < tn; ++s) acc = fmaf(k[(long long)(t0 + s) * dk + i], v[(long long)(t0 + s) * dv + j], acc);
        st[idx] = acc;
    }
}

__global__ void prefix_state_kernel(float* __restrict__ states, int nchunks, int dk, int dv) {
    // exclusive prefix over chunks, in place: states[c] := sum_{c' < c} states[c']
    for (int idx = threadIdx.x; idx < dk * dv; idx += blockDim.x) {
        float run = 0.0f;
        for (int c = 0; c < nchunks; ++c) {
            float cur = states[(long long)c * dk * dv + idx];
            states[(long long)c * dk * dv + idx] = run;
            run += cur;
        }
    }
}

__global__ void chunk_output_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                    const float* __restrict__ v, const float* __restrict__ states,
                                    float* __restrict__ o, int t, int dk, int dv) {
    __shared__ float a[CH][CH + 1];
    int c = blockIdx.x;
    int t0 = c * CH, tn = min(CH, t - t0);
    for (int idx = threadIdx.x; idx < CH * CH; idx += blockDim.x) {
        int i = idx / CH, s = idx % CH;
        float acc = 0.0f;
        if (i < tn && s <= i) {
            for (int d = 0; d < dk; ++d) acc = fmaf(q[(long long)(t0 + i) * dk + d], k[(long long)(t0 + s) * dk + d], acc);
        }
        a[i][s] = acc;
    }
    __syncthreads();
    const float* st = states + (long long)c * dk * dv;
    for (int idx = threadIdx.x; idx < tn * dv; idx += blockDim.x) {
        int i = idx / dv, j = idx % dv;
        float acc = 0.0f;
        for (int s = 0; s <= i; ++s) acc = fmaf(a[i][s], v[(long long)(t0 + s) * dv + j], acc);
        for (int d = 0; d < dk; ++d) acc = fmaf(q[(long long)(t0 + i) * dk + d], st[d * dv + j], acc);
        o[(long long)(t0 + i) * dv + j] = acc;
    }
}

cudaError_t chunked_linear_attention(const float* q, const float* k, const float* v, float* o, float* states_ws,
                                     int t, int dk, int dv, cudaStream_t stream) {
    if (t <= 0) return cudaSuccess;
    if (dk > DMAX || dv > DMAX) return cudaErrorInvalidValue;
    int nchunks = (t + CH - 1) / CH;
    chunk_state_kernel<<<nchunks, 256, 0, stream>>>(k, v, states_ws, t, dk, dv);
    prefix_state_kernel<<<1, 256, 0, stream>>>(states_ws, nchunks, dk, dv);
    chunk_output_kernel<<<nchunks, 256, 0, stream>>>(q, k, v, states_ws, o, t, dk, dv);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "chunked_linear_attention launch failed: %s\n", cudaGetErrorString(err));
    return err;
}

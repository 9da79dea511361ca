"""Kernels the CUDA executor's budget tests share (imported as ``cuda_testlib``, as ``tests/sim`` imports
``isa_testlib``)."""

#: one loop of ``reps`` multiply-adds per thread: its work (and CPU) grows with ``reps`` alone
LOOP = """
__global__ void k(const float* a, float* out, int n, int reps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f;
    for (int r = 0; r < reps; ++r) acc = acc * 0.5f + a[i];
    out[i] = acc;
}
void run(const float* a, float* out, int n, int reps) { k<<<(n + 127) / 128, 128>>>(a, out, n, reps); }
"""

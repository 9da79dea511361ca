"""``__shared__`` arrays declared together in one declaration are distinct memory.

The executor once keyed a launch's shared memory by ``declaration id * 1000 + declarator id % 1000``: two
declarators of one declaration whose tree-sitter ids (heap addresses, or slots of one children array) were
congruent modulo 1000 shared one buffer. Whether they were depended on the heap's layout, so a kernel such as
swiglu_mlp's (``__shared__ float xs[T][T + 1], gs[T][T + 1], us[T][T + 1];``) computed from the wrong tile in
some processes only (a flaky full-suite failure with outputs of the wrong sign)."""

from __future__ import annotations

import numpy as np

from nkieval.cuda import run_host

#: more declarators in one declaration than there are residues modulo 1000 of 8-byte-aligned ids (125): two of
#: them are congruent modulo 1000 whatever the heap's layout (the old key's collision made certain)
N_DECLARATORS = 130


def _source(n: int) -> str:
    names = [f"s{k}" for k in range(n)]
    writes = "\n".join(f"    {v} = {k}.0f;" for k, v in enumerate(names))
    reads = "\n".join(f"    out[{k}] = {v};" for k, v in enumerate(names))
    return f"""
__global__ void k(float* out) {{
    __shared__ float {", ".join(names)};
{writes}
    __syncthreads();
{reads}
}}
void run(float* out, cudaStream_t stream) {{
    k<<<1, 1, 0, stream>>>(out);
}}
"""


def test_every_shared_variable_of_one_declaration_is_its_own_memory() -> None:
    out = run_host(_source(N_DECLARATORS), "run", {"out": np.full(N_DECLARATORS, -1, np.float32)}).memory["out"]
    np.testing.assert_array_equal(out, np.arange(N_DECLARATORS, dtype=np.float32))


def test_shared_tiles_declared_together_are_distinct() -> None:
    src = """
    #define T 4
    __global__ void k(const float* a, const float* b, const float* c, float* out) {
        __shared__ float xs[T][T + 1], gs[T][T + 1], us[T][T + 1];
        int i = threadIdx.y, j = threadIdx.x;
        xs[i][j] = a[i * T + j];
        gs[i][j] = b[i * T + j];
        us[i][j] = c[i * T + j];
        __syncthreads();
        out[i * T + j] = xs[i][j] + 10.0f * gs[i][j] + 100.0f * us[i][j];
    }
    void run(const float* a, const float* b, const float* c, float* out, cudaStream_t stream) {
        k<<<1, dim3(T, T), 0, stream>>>(a, b, c, out);
    }
    """
    a, b, c = (np.full(16, v, np.float32) for v in (1.0, 2.0, 3.0))
    out = run_host(src, "run", {"a": a, "b": b, "c": c, "out": np.zeros(16, np.float32)}).memory["out"]
    np.testing.assert_array_equal(out, np.full(16, 321.0, np.float32))

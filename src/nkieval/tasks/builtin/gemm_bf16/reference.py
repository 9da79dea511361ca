"""Reference for gemm_bf16: c = a_t.T @ b of the bf16 inputs, in float64, rounded once to fp32."""

import numpy as np


def reference(a_t, b):
    return (a_t.astype(np.float64).T @ b.astype(np.float64)).astype(np.float32)

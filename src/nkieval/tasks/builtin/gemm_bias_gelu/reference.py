"""Reference for gemm_bias_gelu: exact-erf GELU of (x_t.T @ w + bias), in float64, rounded once to fp32."""

import math

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])


def oracle(x_t, w, bias):
    z = x_t.astype(np.float64).T @ w.astype(np.float64) + bias.astype(np.float64)[None, :]
    return 0.5 * z * (1.0 + _erf(z / math.sqrt(2.0)))


def reference(x_t, w, bias):
    return oracle(x_t, w, bias).astype(np.float32)

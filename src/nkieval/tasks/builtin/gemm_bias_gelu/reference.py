"""Reference for gemm_bias_gelu: exact-erf GELU of (x_t.T @ w + bias), in float64, rounded once to fp32.

GELU is the specified formula z * (1 + erf(z / sqrt(2))) / 2 evaluated in float64 with math.erf
(double-precision accurate), as the CUDA kernel evaluates it in fp32; ``np.frompyfunc`` is the
cheapest exact elementwise erf without SciPy (``oracle`` runs 17 times per numerics check).
"""

import math

import numpy as np

_ERF = np.frompyfunc(math.erf, 1, 1)


def gelu(z):
    return 0.5 * z * (1.0 + _ERF(z * (1.0 / math.sqrt(2.0))).astype(np.float64))


def oracle(x_t, w, bias):
    z = x_t.astype(np.float64).T @ w.astype(np.float64) + bias.astype(np.float64)[None, :]
    return gelu(z)


def gelu_apprx_tanh_oracle(x_t, w, bias):
    """The tanh-approximation GELU (``nl.gelu_apprx_tanh``): what the flaw computes instead."""
    z = x_t.astype(np.float64).T @ w.astype(np.float64) + bias.astype(np.float64)[None, :]
    return 0.5 * z * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3)))


def bias_after_gelu_oracle(x_t, w, bias):
    """gelu(x_t.T @ w) + bias: the bias added after the activation instead of before it."""
    z = x_t.astype(np.float64).T @ w.astype(np.float64)
    return gelu(z) + bias.astype(np.float64)[None, :]


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "gelu_apprx_tanh": {
        "cause": "computes the tanh-approximation GELU (gelu_apprx_tanh) instead of the exact erf GELU",
        "action": "use the exact GELU (nl.gelu / erf), as the task and the CUDA kernel specify",
        "fn": gelu_apprx_tanh_oracle,
    },
    "bias_after_gelu": {
        "cause": "adds the bias after the GELU (gelu(x @ w) + bias) instead of before it",
        "action": "add the bias to the PSUM result first and apply GELU to the sum",
        "fn": bias_after_gelu_oracle,
    },
}


def reference(x_t, w, bias):
    return oracle(x_t, w, bias).astype(np.float32)

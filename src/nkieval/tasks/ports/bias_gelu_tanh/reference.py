"""Reference for bias_gelu_tanh: the tanh-approximated GELU of x + b in float64, rounded once to fp32."""

import numpy as np


def oracle(x, b):
    u = x.astype(np.float64) + b.astype(np.float64)
    return 0.5 * u * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (u + 0.044715 * u ** 3)))


def reference(x, b):
    return oracle(x, b).astype(np.float32)

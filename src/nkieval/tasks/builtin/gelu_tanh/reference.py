"""Reference for gelu_tanh: the tanh-approximated GELU evaluated in float64, rounded to fp32."""

import math

import numpy as np


def reference(x):
    xd = x.astype(np.float64)
    inner = math.sqrt(2.0 / math.pi) * (xd + 0.044715 * xd ** 3)
    return (0.5 * xd * (1.0 + np.tanh(inner))).astype(np.float32)

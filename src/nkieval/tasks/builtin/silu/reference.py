"""Reference for silu: x * sigmoid(x) in float64, rounded to fp32."""


import numpy as np


def reference(x):
    xd = x.astype(np.float64)
    return (xd / (1.0 + np.exp(-xd))).astype(np.float32)

"""Reference for rmsnorm: x / sqrt(mean(x^2) + eps) * w per row, in float64, rounded once to fp32."""

import numpy as np


def reference(x, w, eps=1e-6):
    xf = x.astype(np.float64)
    ms = (xf * xf).mean(axis=-1, keepdims=True)
    return (xf / np.sqrt(ms + eps) * w.astype(np.float64)).astype(np.float32)

"""Reference for rmsnorm_gemm: float64 RMSNorm then GEMM with the given bf16 weights."""

import numpy as np


def oracle(x, gamma, w, eps=1e-6):
    xd = np.asarray(x, dtype=np.float64)
    r = 1.0 / np.sqrt((xd * xd).mean(axis=1, keepdims=True) + eps)
    return (xd * r * np.asarray(gamma, dtype=np.float64)) @ np.asarray(w, dtype=np.float64)


def reference(x, gamma, w, eps=1e-6):
    return oracle(x, gamma, w, eps).astype(np.float32)

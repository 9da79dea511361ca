"""Reference for fp8_gemm_scaled: exact fp8 values, float64 product, both scales applied."""

import numpy as np


def oracle(a_t, b, scale_a, scale_b):
    acc = np.asarray(a_t, dtype=np.float64).T @ np.asarray(b, dtype=np.float64)
    return acc * np.asarray(scale_a, dtype=np.float64)[:, None] * np.asarray(scale_b, dtype=np.float64)[None, :]


def reference(a_t, b, scale_a, scale_b):
    return oracle(a_t, b, scale_a, scale_b).astype(np.float32)

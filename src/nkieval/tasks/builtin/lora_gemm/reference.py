"""Reference for lora_gemm: float64 base GEMM plus the scaled low-rank update."""

import numpy as np


def oracle(x_t, w, lora_a, lora_b, scaling=2.0):
    x = np.asarray(x_t, dtype=np.float64).T
    base = x @ np.asarray(w, dtype=np.float64)
    low = (x @ np.asarray(lora_a, dtype=np.float64)) @ np.asarray(lora_b, dtype=np.float64)
    return base + scaling * low


def reference(x_t, w, lora_a, lora_b, scaling=2.0):
    return oracle(x_t, w, lora_a, lora_b, scaling).astype(np.float32)

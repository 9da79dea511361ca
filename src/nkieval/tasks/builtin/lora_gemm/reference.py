"""Reference for lora_gemm: float64 base GEMM plus the scaled low-rank update."""

import numpy as np


def oracle(x_t, w, lora_a, lora_b, scaling=2.0):
    x = np.asarray(x_t, dtype=np.float64).T
    base = x @ np.asarray(w, dtype=np.float64)
    low = (x @ np.asarray(lora_a, dtype=np.float64)) @ np.asarray(lora_b, dtype=np.float64)
    return base + scaling * low


def no_scaling_oracle(x_t, w, lora_a, lora_b, scaling=2.0):
    """x @ w + (x @ lora_a) @ lora_b: the low-rank product added without the alpha / R scaling."""
    return oracle(x_t, w, lora_a, lora_b, 1.0)


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "no_scaling": {
        "cause": "adds the low-rank product without the alpha / R scaling (x @ w + x @ A @ B instead of "
                 "x @ w + scaling * x @ A @ B)",
        "action": "multiply the low-rank product (or x @ A) by `scaling` before adding it to the base GEMM",
        "fn": no_scaling_oracle,
    },
}


def reference(x_t, w, lora_a, lora_b, scaling=2.0):
    return oracle(x_t, w, lora_a, lora_b, scaling).astype(np.float32)

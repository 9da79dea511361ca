"""Reference for fp8_gemm_scaled: exact fp8 values, float64 product, both scales applied."""

import numpy as np


def oracle(a_t, b, scale_a, scale_b):
    acc = np.asarray(a_t, dtype=np.float64).T @ np.asarray(b, dtype=np.float64)
    return acc * np.asarray(scale_a, dtype=np.float64)[:, None] * np.asarray(scale_b, dtype=np.float64)[None, :]


def missing_scale_b_oracle(a_t, b, scale_a, scale_b):
    """The product scaled by the per-token scale_a only: the per-channel weight scale scale_b is left out."""
    return oracle(a_t, b, scale_a, np.ones(np.shape(scale_b)))


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "missing_scale_b": {
        "cause": "applies the per-token scale_a but not the per-channel weight scale scale_b",
        "action": "multiply column n of the product by scale_b[n] as well (c = (a_t.T @ b) * scale_a[:, None] "
                  "* scale_b[None, :])",
        "fn": missing_scale_b_oracle,
    },
}


def reference(a_t, b, scale_a, scale_b):
    return oracle(a_t, b, scale_a, scale_b).astype(np.float32)

"""Reference for fp8_dequantize: exact fp8 value times the row scale, rounded once to fp32."""

import numpy as np


def reference(q, scale):
    return (q.astype(np.float64) * scale.astype(np.float64)).astype(np.float32)


def first_row_scale(q, scale):
    """Every row scaled by the first row's scale instead of its own."""
    return q.astype(np.float64) * scale.astype(np.float64).reshape(-1)[0]


VARIANTS = {
    "first_row_scale": {
        "cause": "every row is multiplied by the first row's scale (scale[0]) instead of its own",
        "action": "load the scale column and multiply each row by its own scale",
        "fn": first_row_scale,
    },
}

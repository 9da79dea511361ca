"""Reference for scale_bias_broadcast: x * row_scale[:, None] + col_bias[None, :] in float64."""

import numpy as np


def oracle(x, row_scale, col_bias):
    xd = np.asarray(x, dtype=np.float64)
    return xd * np.asarray(row_scale, dtype=np.float64)[:, None] + np.asarray(col_bias, dtype=np.float64)[None, :]


def first_scale_only_oracle(x, row_scale, col_bias):
    """x * row_scale[0] + col_bias: the first row's scale applied to every row."""
    return oracle(x, np.full(np.shape(row_scale), np.asarray(row_scale)[0]), col_bias)


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "first_scale_only": {
        "cause": "broadcasts row_scale[0] to every row (the per-row scale vector is never indexed by row)",
        "action": "load row_scale as a [rows, 1] column for each row tile, so that row i is scaled by row_scale[i]",
        "fn": first_scale_only_oracle,
    },
}


def reference(x, row_scale, col_bias):
    return oracle(x, row_scale, col_bias).astype(np.float32)

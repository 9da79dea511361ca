"""Reference for scale_bias_broadcast: x * row_scale[:, None] + col_bias[None, :] in float64."""

import numpy as np


def oracle(x, row_scale, col_bias):
    xd = np.asarray(x, dtype=np.float64)
    return xd * np.asarray(row_scale, dtype=np.float64)[:, None] + np.asarray(col_bias, dtype=np.float64)[None, :]


def reference(x, row_scale, col_bias):
    return oracle(x, row_scale, col_bias).astype(np.float32)

"""Reference for rope_half: rotate-half RoPE with per-position cos/sin tables, float64 rounded once to fp32."""

import numpy as np


def oracle(x, cos_t, sin_t):
    t_len, half = cos_t.shape
    xf = x.astype(np.float64)
    pos = np.arange(x.shape[0]) % t_len
    c, s = cos_t.astype(np.float64)[pos], sin_t.astype(np.float64)[pos]
    x1, x2 = xf[:, :half], xf[:, half:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=1)


def reference(x, cos_t, sin_t):
    return oracle(x, cos_t, sin_t).astype(np.float32)

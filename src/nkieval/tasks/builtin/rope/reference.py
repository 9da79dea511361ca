"""Reference for rope: x * cos + swap_halves(x) * sin in float64, broadcast over heads (sign folded in sin)."""

import numpy as np


def oracle(x, cos, sin):
    xd = np.asarray(x, dtype=np.float64)
    half = xd.shape[-1] // 2
    swapped = np.concatenate([xd[..., half:], xd[..., :half]], axis=-1)
    return xd * np.asarray(cos, dtype=np.float64)[:, None, :] + swapped * np.asarray(sin, dtype=np.float64)[:, None, :]


def reference(x, cos, sin):
    return oracle(x, cos, sin).astype(np.float32)
